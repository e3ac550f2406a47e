package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.MismatchPolicy;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A claim or a claim check carries the COMMIT in one prepared string ({@code ...; COMMIT}) only through pgjdbc
 * ({@code Dialect#statementsTogether}, as the relay asks): another driver of PostgreSQL's protocol may refuse a
 * prepared string of several statements (the extended protocol parses one at a time), and on such a driver every
 * delivery of those paths failed at its commit. The connections here name {@code driver} and refuse such strings
 * unless it is pgjdbc; each path applies its deliveries either way, folded only through pgjdbc.
 *
 * <p>The same holds for a claim with a lock timeout of its own: on PostgreSQL it sets {@code lock_timeout} for the
 * claim and puts the session's back with a second statement ({@code ...; SELECT set_config(...)}), and through
 * another driver every such claim failed with 42601. There the restore goes on its own after the claim.
 */
class ClaimFoldingDriverTest {

    /** The paths that fold the COMMIT into their last statement on PostgreSQL. */
    enum Path {
        /** {@link ClaimTiming#AT_COMMIT} in the engine's own transaction: {@code claimAtCommitAndCommit}. */
        CLAIM_AT_COMMIT,
        /** One delivery in a {@link ManualTransactions} scope, checked at the scope's commit: {@code verifyClaimAndCommit}. */
        CHECK_AT_CALLER_COMMIT,
        /** A batch in such a scope: {@code verifyClaimsAndCommit}. */
        BATCH_CHECK_AT_CALLER_COMMIT
    }

    private static final AtomicLong ids = new AtomicLong();
    private static TestDatabase db;

    @BeforeAll
    static void start() {
        db = TestPostgres.shared().freshDatabase(2);
        db.execute("CREATE TABLE fold_effect (id varchar(40))");
    }

    @AfterAll
    static void stop() {
        if (db != null) {
            db.close();
        }
    }

    static Stream<Arguments> driversAndPaths() {
        return Stream.of(NamingDriver.PGJDBC, "pgjdbc-ng")
                .flatMap(driver -> Stream.of(Path.values()).map(path -> Arguments.of(driver, path)));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("driversAndPaths")
    void theCommitIsFoldedIntoTheClaimOnlyThroughPgjdbc(String driver, Path path) throws Exception {
        List<String> prepared = new CopyOnWriteArrayList<>();
        DataSource ds = NamingDriver.of(db.dataSource(), driver, prepared);
        String first = "e-" + ids.incrementAndGet();
        List<String> events = path == Path.BATCH_CHECK_AT_CALLER_COMMIT
                ? List.of(first, "e-" + ids.incrementAndGet())
                : List.of(first);
        List<Outcome> outcomes;
        if (path == Path.CLAIM_AT_COMMIT) {
            IdempotentConsumer consumer =
                    consumer(IdempotentConsumer.builder().dataSource(ds).claimTiming(ClaimTiming.AT_COMMIT));
            outcomes = List.of(consumer.process(Delivery.of(first, "x")));
        } else {
            ManualTransactions manual = new ManualTransactions();
            IdempotentConsumer consumer =
                    consumer(IdempotentConsumer.builder().transactions(manual).dialect(Dialects.POSTGRESQL));
            try (Connection c = ds.getConnection()) {
                c.setAutoCommit(false);
                try (ManualTransactions.Scope scope = manual.join(c)) {
                    outcomes = consumer.processBatch(
                            events.stream().map(id -> Delivery.of(id, "x")).toList());
                    scope.commit();
                }
            }
        }
        assertThat(outcomes).as("%s %s", driver, path).allMatch(o -> o.status() == Status.APPLIED);
        for (String id : events) {
            assertThat(count("SELECT count(*) FROM once_inbox WHERE event_id = ?", id))
                    .as("%s %s: %s claimed and committed", driver, path, id)
                    .isEqualTo(1);
            assertThat(count("SELECT count(*) FROM fold_effect WHERE id = ?", id))
                    .as("%s %s: %s applied once", driver, path, id)
                    .isEqualTo(1);
        }
        assertThat(prepared.stream().filter(sql -> sql.endsWith("; COMMIT")))
                .as("%s %s: prepared strings that carry the COMMIT", driver, path)
                .hasSize(driver.equals(NamingDriver.PGJDBC) ? 1 : 0);
    }

    /** The claims that carry a lock timeout of their own: the inbox's, and those of the engine's owned transaction. */
    enum LockPath {
        /** {@link Inbox#claim}: {@code claim}. */
        INBOX_CLAIM,
        /** {@link Inbox#claimAll}: {@code claimBatch}. */
        INBOX_CLAIM_ALL,
        /** A consumer's delivery expected new: {@code claimNew}. */
        NEW,
        /** A consumer's batch expected new: {@code claimBatchAllNew}. */
        BATCH_NEW,
        /** A consumer's delivery whose fingerprint is kept: {@code claimWithFingerprint}. */
        FINGERPRINTED,
        /** A consumer's batch whose fingerprints are kept: {@code claimBatchWithFingerprints}. */
        BATCH_FINGERPRINTED
    }

    static Stream<Arguments> driversAndLockPaths() {
        return Stream.of(NamingDriver.PGJDBC, "pgjdbc-ng")
                .flatMap(driver -> Stream.of(LockPath.values()).map(path -> Arguments.of(driver, path)));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("driversAndLockPaths")
    void theLockTimeoutIsPutBackInTheClaimsStringOnlyThroughPgjdbc(String driver, LockPath path) throws Exception {
        List<String> prepared = new CopyOnWriteArrayList<>();
        DataSource ds = NamingDriver.of(db.dataSource(), driver, prepared);
        List<String> events = List.of("e-" + ids.incrementAndGet(), "e-" + ids.incrementAndGet());
        // What the statements after the claim see: the session's lock_timeout (0), not the claim's.
        List<String> after = new CopyOnWriteArrayList<>();
        switch (path) {
            case INBOX_CLAIM, INBOX_CLAIM_ALL -> {
                Inbox inbox = Inbox.of(Dialects.POSTGRESQL, TablePrefix.DEFAULT, LOCK_TIMEOUT, Clock.systemUTC());
                try (Connection c = ds.getConnection()) {
                    c.setAutoCommit(false);
                    if (path == LockPath.INBOX_CLAIM) {
                        assertThat(inbox.claim(c, "fold", events.get(0))).isTrue();
                        events = events.subList(0, 1);
                    } else {
                        assertThat(inbox.claimAll(c, "fold", events)).containsExactlyInAnyOrderElementsOf(events);
                    }
                    after.add(lockTimeout(c));
                    c.commit();
                }
            }
            default -> {
                boolean batch = path == LockPath.BATCH_NEW || path == LockPath.BATCH_FINGERPRINTED;
                boolean fingerprinted = path == LockPath.FINGERPRINTED || path == LockPath.BATCH_FINGERPRINTED;
                IdempotentConsumer consumer = IdempotentConsumer.builder()
                        .dataSource(ds)
                        .lockTimeout(LOCK_TIMEOUT)
                        .onMismatch(fingerprinted ? MismatchPolicy.COUNT : MismatchPolicy.OFF)
                        .consumer("fold")
                        .handler((d, tx) -> after.add(lockTimeout(tx.connection())))
                        .build();
                if (!batch) {
                    events = events.subList(0, 1);
                }
                List<Outcome> outcomes = consumer.processBatch(
                        events.stream().map(id -> Delivery.of(id, "x")).toList());
                assertThat(outcomes).as("%s %s", driver, path).allMatch(o -> o.status() == Status.APPLIED);
            }
        }
        for (String id : events) {
            assertThat(count("SELECT count(*) FROM once_inbox WHERE event_id = ?", id))
                    .as("%s %s: %s claimed and committed", driver, path, id)
                    .isEqualTo(1);
        }
        assertThat(after)
                .as("%s %s: lock_timeout after the claim, put back to the session's", driver, path)
                .isNotEmpty()
                .allMatch("0"::equals);
        long claims = prepared.stream().filter(sql -> sql.contains(SETS)).count();
        long together = prepared.stream()
                .filter(sql -> sql.contains(SETS) && sql.contains("; " + RESTORES))
                .count();
        long alone = prepared.stream().filter(sql -> sql.startsWith(RESTORES)).count();
        assertThat(claims).as("%s %s: claims with a lock timeout", driver, path).isPositive();
        assertThat(together)
                .as("%s %s: claims that carry the restore (one round trip)", driver, path)
                .isEqualTo(driver.equals(NamingDriver.PGJDBC) ? claims : 0);
        assertThat(alone)
                .as("%s %s: restores sent on their own", driver, path)
                .isEqualTo(driver.equals(NamingDriver.PGJDBC) ? 0 : claims);
    }

    private static final Duration LOCK_TIMEOUT = Duration.ofMillis(1234);
    private static final String SETS = "set_config('lock_timeout', '1234ms'";
    private static final String RESTORES = "SELECT set_config('lock_timeout', current_setting('once.lock_timeout')";

    private static String lockTimeout(Connection c) throws SQLException {
        try (PreparedStatement p = c.prepareStatement("SELECT current_setting('lock_timeout')");
                ResultSet rs = p.executeQuery()) {
            rs.next();
            return rs.getString(1);
        }
    }

    private static IdempotentConsumer consumer(dev.once.IdempotentConsumerBuilder builder) {
        return builder.consumer("fold")
                .handler((d, tx) -> {
                    try (PreparedStatement p = tx.connection().prepareStatement("INSERT INTO fold_effect VALUES (?)")) {
                        p.setString(1, d.eventId());
                        p.executeUpdate();
                    }
                })
                .build();
    }

    private static long count(String sql, String id) throws SQLException {
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement p = c.prepareStatement(sql)) {
            p.setString(1, id);
            try (ResultSet rs = p.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }
}
