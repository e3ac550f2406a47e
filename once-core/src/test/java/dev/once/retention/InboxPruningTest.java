package dev.once.retention;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.awaitility.Awaitility;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * What {@link InboxPruner} deletes, on both databases: exactly the claims stamped before the
 * cutoff, whatever the chunk size, whatever order the rows lie in the table, including a claim
 * that commits late with an old stamp (behind where an earlier run's walk had got to), while claims
 * keep being made.
 */
class InboxPruningTest {

    enum Db {
        POSTGRES,
        MARIADB;

        TestDatabase fresh() {
            return this == POSTGRES
                    ? TestPostgres.shared().freshDatabase(4)
                    : TestMariaDb.shared().freshDatabase(4);
        }
    }

    private static final Instant NOW = Instant.parse("2026-12-01T12:00:00Z");
    private static final Duration RETENTION = Duration.ofDays(7);
    private static final Instant CUTOFF = NOW.minus(RETENTION);
    private static final String CONSUMER = "prune-test";

    static Stream<Arguments> chunkSizes() {
        return Stream.of(Db.values()).flatMap(db -> Stream.of(1, 7, 250, 5_000).map(size -> Arguments.of(db, size)));
    }

    @ParameterizedTest(name = "{0}, chunks of {1}")
    @MethodSource("chunkSizes")
    void deletesExactlyTheClaimsBeforeTheCutoffInAnyChunkSize(Db which, int chunkSize) throws Exception {
        try (TestDatabase db = which.fresh()) {
            // Old and retained claims interleaved in the table, and some exactly at the cutoff (kept).
            List<String[]> rows = new ArrayList<>();
            Set<String> kept = new HashSet<>();
            for (int i = 0; i < 500; i++) {
                rows.add(new String[] {
                    "old-" + i, CUTOFF.minusMillis(1 + i * 997L).toString()
                });
                rows.add(new String[] {"new-" + i, CUTOFF.plusMillis(i * 997L).toString()});
                kept.add("new-" + i);
            }
            Collections.shuffle(rows, new Random(chunkSize));
            insert(db, rows);
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            InboxPruner pruner = pruner(db, chunkSize, registry);

            assertThat(pruner.prune()).as("claims before the cutoff deleted").isEqualTo(500);
            assertThat(ids(db)).as("the claims left").isEqualTo(kept);
            assertThat(registry.get("once.retention.deleted").counter().count()).isEqualTo(500.0);
            assertThat(pruner.prune()).as("a second run finds nothing").isZero();
        }
    }

    /**
     * A claim can commit with a stamp older than the cutoff (a consumer whose clock lags, a
     * transaction held open): it was invisible to the run that passed its place, so the next run
     * must still find it. The late claim lies before the old claims in the table, so the first
     * run's walk ends beyond it: a pruner that resumed where its last run stopped would never
     * delete it. The same pruner runs again, then another one, as after a restart.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Db.class)
    void aClaimCommittedLateWithAnOldStampIsDeletedByTheNextRun(Db which) throws Exception {
        try (TestDatabase db = which.fresh()) {
            List<String[]> retained = new ArrayList<>();
            List<String[]> old = new ArrayList<>();
            for (int i = 0; i < 300; i++) {
                retained.add(new String[] {"new-" + i, CUTOFF.plusSeconds(i).toString()});
                old.add(new String[] {"old-" + i, CUTOFF.minusSeconds(1 + i).toString()});
            }
            insert(db, retained);
            InboxPruner pruner = pruner(db, 50, new SimpleMeterRegistry());
            try (Connection late = db.dataSource().getConnection()) {
                late.setAutoCommit(false);
                insert(late, List.<String[]>of(new String[] {
                    "late", CUTOFF.minusSeconds(3600).toString()
                }));
                insert(db, old);
                if (which == Db.MARIADB) {
                    // InnoDB's ordered delete waits on the open claim's row lock (then fails at the
                    // lock wait timeout, 50 s by default, and the next run tries again): it never
                    // passes the row, so here the claim commits before the run.
                    late.commit();
                    assertThat(pruner.prune())
                            .as("the old claims and the late one")
                            .isEqualTo(301);
                } else {
                    String lateAt = string(late, "SELECT ctid::text FROM once_inbox WHERE event_id = 'late'");
                    String lastOld = string(db, "SELECT max(ctid)::text FROM once_inbox WHERE event_id LIKE 'old-%'");
                    assertThat(string(late, "SELECT ('" + lateAt + "'::tid < '" + lastOld + "'::tid)::text"))
                            .as("the late claim (at %s) lies before the last old one (at %s)", lateAt, lastOld)
                            .isEqualTo("true");
                    assertThat(pruner.prune()).as("the committed old claims").isEqualTo(300);
                    late.commit();
                    assertThat(pruner.prune())
                            .as("the same pruner's next run deletes the late claim")
                            .isEqualTo(1);
                }
            }
            insert(db, List.<String[]>of(new String[] {
                "late-again", CUTOFF.minusSeconds(60).toString()
            }));
            assertThat(pruner(db, 50, new SimpleMeterRegistry()).prune())
                    .as("a restarted pruner deletes another one")
                    .isEqualTo(1);
            assertThat(ids(db)).hasSize(300).allMatch(id -> id.startsWith("new-"));
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Db.class)
    void claimsKeepWorkingWhilePruning(Db which) throws Exception {
        try (TestDatabase db = which.fresh()) {
            IdempotentConsumer consumer = oldClaimsAndAConsumer(db, 20_000);
            InboxPruner pruner = pruner(db, 200, new SimpleMeterRegistry());
            CompletableFuture<Long> pruned = CompletableFuture.supplyAsync(pruner::prune, OwnThreads.each());
            List<CompletableFuture<List<Outcome>>> claimers = new ArrayList<>();
            for (int w = 0; w < 2; w++) {
                int worker = w;
                claimers.add(CompletableFuture.supplyAsync(
                        () -> {
                            List<Outcome> outcomes = new ArrayList<>();
                            for (int i = 0; i < 100; i++) {
                                // a fresh event, then its copy: absorbed while the pruner deletes around it
                                outcomes.add(consumer.process(Delivery.of("fresh-" + worker + "-" + i, "x")));
                                outcomes.add(consumer.process(Delivery.of("fresh-" + worker + "-" + i, "x")
                                        .redelivery()));
                            }
                            return outcomes;
                        },
                        OwnThreads.each()));
            }
            assertThat(pruned.get(2, TimeUnit.MINUTES)).isEqualTo(20_000);
            for (CompletableFuture<List<Outcome>> c : claimers) {
                List<Outcome> outcomes = c.get(2, TimeUnit.MINUTES);
                for (int i = 0; i < outcomes.size(); i += 2) {
                    assertThat(outcomes.get(i).status()).isEqualTo(Outcome.Status.APPLIED);
                    assertThat(outcomes.get(i + 1).status()).isEqualTo(Outcome.Status.DUPLICATE);
                }
            }
            assertThat(ids(db)).hasSize(200).allMatch(id -> id.startsWith("fresh-"));
        }
    }

    /** {@code old} claims older than the retention, and a consumer of them that claims at {@link #NOW}. */
    private static IdempotentConsumer oldClaimsAndAConsumer(TestDatabase db, int old) throws Exception {
        List<String[]> rows = new ArrayList<>();
        for (int i = 0; i < old; i++) {
            rows.add(new String[] {"old-" + i, CUTOFF.minusMillis(1 + i).toString()});
        }
        insert(db, rows);
        return IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer(CONSUMER)
                .handler((d, tx) -> {})
                .clock(Clock.fixed(NOW, ZoneOffset.UTC))
                .build();
    }

    /**
     * A chunk holds only the claims it deletes: while it is open (deleted, not committed) a new claim goes through
     * without waiting, also when the chunk's scan reached the newest end of the {@code processed_at} index (every
     * claim old: an inbox idle longer than the retention). On MariaDB the chunk's delete ran under REPEATABLE READ:
     * its range scan locked the gap after the last old claim up to the end of the index (a next-key lock on the
     * supremum), where every new claim's index entry goes, so every claim waited for the chunk's commit.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Db.class)
    void anOpenChunkHoldsUpNoNewClaim(Db which) throws Exception {
        try (TestDatabase db = which.fresh()) {
            IdempotentConsumer consumer = oldClaimsAndAConsumer(db, 50);
            CountDownLatch atCommit = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            InboxPruner pruner = InboxPruner.builder()
                    .dataSource(holdingTheFirstDeletesCommit(db.dataSource(), atCommit, release))
                    .retention(RETENTION)
                    .chunkSize(100)
                    .clock(Clock.fixed(NOW, ZoneOffset.UTC))
                    .build();

            CompletableFuture<Long> pruned = CompletableFuture.supplyAsync(pruner::prune, OwnThreads.each());
            assertThat(atCommit.await(30, TimeUnit.SECONDS)).isTrue();
            CompletableFuture<Outcome> claim =
                    CompletableFuture.supplyAsync(() -> consumer.process(Delivery.of("fresh", "x")), OwnThreads.each());
            Awaitility.await("the claim done or waiting")
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> claim.isDone() || inboxLockWaits(db, which));
            boolean waited = !claim.isDone();
            release.countDown();

            assertThat(pruned.get(30, TimeUnit.SECONDS)).isEqualTo(50);
            assertThat(claim.get(30, TimeUnit.SECONDS).status()).isEqualTo(Outcome.Status.APPLIED);
            assertThat(ids(db)).containsExactly("fresh");
            assertThat(waited).as("the new claim waited for the open chunk").isFalse();
        }
    }

    /**
     * Whether a transaction waits for a lock on this test's inbox: on MariaDB, the monitor's lock queues (live, unlike
     * information_schema.INNODB_TRX, a cache InnoDB refreshes at most every 100 ms) list one {@code waiting}.
     */
    private static boolean inboxLockWaits(TestDatabase db, Db which) throws SQLException {
        if (which == Db.POSTGRES) {
            return db.queryLong("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                            + " AND wait_event_type = 'Lock'")
                    > 0;
        }
        // RECORD LOCKS space id 5 page no 4 n bits 72 index once_inbox_processed_at of table `db`.`once_inbox` trx id
        // 40020 lock_mode X insert intention waiting
        String table = " of table `" + db.name() + "`.`once_inbox` ";
        return string(db, "SHOW ENGINE INNODB STATUS", 3)
                .lines()
                .anyMatch(line -> line.contains(table) && line.endsWith(" waiting"));
    }

    /** A data source whose first transaction that prepared a DELETE waits at its commit until {@code release}. */
    private static DataSource holdingTheFirstDeletesCommit(
            DataSource target, CountDownLatch atCommit, CountDownLatch release) {
        AtomicBoolean armed = new AtomicBoolean(true);
        return (DataSource) Proxy.newProxyInstance(
                DataSource.class.getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                    Object result = invoke(method, target, args);
                    if (!method.getName().equals("getConnection")) {
                        return result;
                    }
                    Connection connection = (Connection) result;
                    AtomicBoolean deleted = new AtomicBoolean();
                    return Proxy.newProxyInstance(
                            Connection.class.getClassLoader(), new Class<?>[] {Connection.class}, (p, m, a) -> {
                                if (m.getName().equals("prepareStatement") && ((String) a[0]).contains("DELETE")) {
                                    deleted.set(true);
                                }
                                if (m.getName().equals("commit")
                                        && deleted.getAndSet(false)
                                        && armed.getAndSet(false)) {
                                    atCommit.countDown();
                                    release.await(30, TimeUnit.SECONDS);
                                }
                                return invoke(m, connection, a);
                            });
                });
    }

    private static Object invoke(Method method, Object target, Object[] args) throws Throwable {
        try {
            return method.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    /** The pruner's cutoff is only as good as the stamp: a claim carries the clock's instant, to the microsecond. */
    @ParameterizedTest
    @EnumSource(Db.class)
    void aClaimIsStampedWithTheClocksInstant(Db which) throws Exception {
        Instant at = Instant.parse("1999-12-31T23:59:59.123456789Z");
        try (TestDatabase db = which.fresh()) {
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer(CONSUMER)
                    .handler((d, tx) -> {})
                    .clock(Clock.fixed(at, ZoneOffset.UTC))
                    .build();
            assertThat(consumer.process(Delivery.of("stamped", "x")).status()).isEqualTo(Outcome.Status.APPLIED);
            try (Connection c = db.dataSource().getConnection();
                    PreparedStatement ps = c.prepareStatement("SELECT processed_at FROM once_inbox");
                    java.sql.ResultSet rs = ps.executeQuery()) {
                assertThat(rs.next()).isTrue();
                assertThat(rs.getTimestamp(1).toInstant()).isEqualTo(Instant.parse("1999-12-31T23:59:59.123456Z"));
            }
        }
    }

    private static InboxPruner pruner(TestDatabase db, int chunkSize, SimpleMeterRegistry registry) {
        return InboxPruner.builder()
                .dataSource(db.dataSource())
                .retention(RETENTION)
                .chunkSize(chunkSize)
                .meterRegistry(registry)
                .clock(Clock.fixed(NOW, ZoneOffset.UTC))
                .build();
    }

    private static void insert(TestDatabase db, List<String[]> rows) throws SQLException {
        try (Connection c = db.dataSource().getConnection()) {
            insert(c, rows);
        }
    }

    /** Claims as the consumer writes them: id and stamp; in the connection's transaction. */
    private static void insert(Connection c, List<String[]> rows) throws SQLException {
        try (PreparedStatement ps =
                c.prepareStatement("INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES (?, ?, ?)")) {
            for (String[] row : rows) {
                ps.setString(1, CONSUMER);
                ps.setString(2, row[0]);
                ps.setTimestamp(3, Timestamp.from(Instant.parse(row[1])));
                ps.addBatch();
            }
            ps.executeBatch();
        }
    }

    private static String string(TestDatabase db, String sql) throws SQLException {
        try (Connection c = db.dataSource().getConnection()) {
            return string(c, sql);
        }
    }

    private static String string(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getString(1);
        }
    }

    private static String string(TestDatabase db, String sql, int column) throws SQLException {
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getString(column);
        }
    }

    private static Set<String> ids(TestDatabase db) throws SQLException {
        Set<String> ids = new HashSet<>();
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT event_id FROM once_inbox")) {
            while (rs.next()) {
                ids.add(rs.getString(1));
            }
        }
        return ids;
    }
}
