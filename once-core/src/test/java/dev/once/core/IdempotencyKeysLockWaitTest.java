package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.KeyTransaction;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The way a caller gets it wrong: it completes a key inside its own transaction and leaves that
 * transaction open (slow work after the complete, a stuck commit). Another request's begin of the
 * key must answer {@link BeginResult.InProgress} within the lock wait, never hang on the row.
 */
class IdempotencyKeysLockWaitTest {

    private static final Duration LOCK = Duration.ofSeconds(30);
    private static final Duration LOCK_WAIT = Duration.ofMillis(200);
    /** Scheduling on a loaded test machine; far below the wait without a bound (forever, or InnoDB's 50 s). */
    private static final Duration SLACK = Duration.ofSeconds(4);

    private final ExecutorService otherRequest = Executors.newSingleThreadExecutor();
    private TestDatabase db;
    /** The lock wait the database keeps: MariaDB rounds it up to whole seconds. */
    private Duration kept;

    static Stream<Arguments> databases() {
        return Stream.of(
                Arguments.of("postgresql", (Supplier<TestDatabase>)
                        () -> TestPostgres.shared().freshDatabase(4)),
                Arguments.of("mariadb", (Supplier<TestDatabase>)
                        () -> TestMariaDb.shared().freshDatabase(4)));
    }

    @AfterEach
    void tearDown() {
        otherRequest.shutdownNow();
        if (db != null) {
            db.close();
        }
    }

    /** A store on the named database with the short bound under test. */
    private IdempotencyKeys keys(String name, Supplier<TestDatabase> database, MutableClock clock) {
        db = database.get();
        kept = name.equals("mariadb") ? Duration.ofSeconds(1) : LOCK_WAIT;
        return IdempotencyKeys.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .lockDuration(LOCK)
                .lockWait(LOCK_WAIT)
                .build();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("databases")
    void aBeginOfAKeyHeldByAnOpenTransactionAnswersInProgressWithinTheBound(
            String name, Supplier<TestDatabase> database) throws Exception {
        MutableClock clock = MutableClock.startingNow();
        IdempotencyKeys keys = keys(name, database, clock);
        byte[] body = "charged".getBytes(StandardCharsets.UTF_8);

        // Committed: while the caller's transaction is open the key is in progress, then it replays.
        BeginResult.Started first = (BeginResult.Started) keys.begin("t", "K", "fp");
        try (Connection tx = db.dataSource().getConnection()) {
            tx.setAutoCommit(false);
            keys.complete(tx, first, 201, body);
            assertThat(answered(() -> keys.begin("t", "K", "fp")))
                    .as("a begin while the completing transaction is open")
                    .isEqualTo(new BeginResult.InProgress(clock.instant().plus(LOCK_WAIT)));
            // The same mistake one step further: the request's error path releases the key outside the
            // transaction it left open, on the same thread; without a bound PostgreSQL waits forever.
            assertThat(answered(() -> catching(() -> keys.fail(first, true, 503, null))))
                    .isInstanceOf(OnceException.class)
                    .hasMessageContaining("waited longer than lockWait (PT0.2S)");
            tx.commit();
        }
        assertThat(keys.begin("t", "K", "fp")).isEqualTo(new BeginResult.Replay(201, body, false));

        // Rolled back: in progress while open, and after the rollback as before it: held, then taken over.
        BeginResult.Started second = (BeginResult.Started) keys.begin("t", "L", "fp");
        try (Connection tx = db.dataSource().getConnection()) {
            tx.setAutoCommit(false);
            keys.complete(tx, second, 201, body);
            assertThat(answered(() -> keys.begin("t", "L", "fp")))
                    .isEqualTo(new BeginResult.InProgress(clock.instant().plus(LOCK_WAIT)));
            tx.rollback();
        }
        assertThat(keys.begin("t", "L", "fp")).isEqualTo(new BeginResult.InProgress(second.lockedUntil()));
        clock.advance(LOCK);
        assertThat(keys.begin("t", "L", "fp"))
                .isInstanceOfSatisfying(
                        BeginResult.Started.class, s -> assertThat(s.token()).isEqualTo(2));
    }

    /**
     * A row locked without being changed, as a begin holds it between its read and its commit (a stalled
     * one): PostgreSQL's insert does not wait for a mere lock, so here the bound of the read for update
     * answers; MariaDB's insert waits for it already.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("databases")
    void aKeyRowLockedByAStalledBeginAnswersInProgressWithinTheBound(String name, Supplier<TestDatabase> database)
            throws Exception {
        MutableClock clock = MutableClock.startingNow();
        IdempotencyKeys keys = keys(name, database, clock);
        BeginResult.Started first = (BeginResult.Started) keys.begin("t", "K", "fp");
        try (Connection stalled = db.dataSource().getConnection()) {
            stalled.setAutoCommit(false);
            try (Statement s = stalled.createStatement();
                    ResultSet rs =
                            s.executeQuery("SELECT state FROM once_idempotency_key WHERE idem_key = 'K' FOR UPDATE")) {
                assertThat(rs.next()).isTrue();
            }
            assertThat(answered(() -> keys.begin("t", "K", "fp")))
                    .isEqualTo(new BeginResult.InProgress(clock.instant().plus(LOCK_WAIT)));
            stalled.rollback();
        }
        assertThat(keys.begin("t", "K", "fp")).isEqualTo(new BeginResult.InProgress(first.lockedUntil()));
    }

    /**
     * The request's own transaction ({@link KeyTransaction}) finishes its key as boundedly as the auto-commit
     * finish: a caller whose claim lapsed must not wait on the transaction holding the key's row, and none of
     * its transaction may commit, effect included.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("databases")
    void aKeyTransactionsFinishWaitsAtMostTheBoundAndRollsBackItsEffect(String name, Supplier<TestDatabase> database)
            throws Exception {
        MutableClock clock = MutableClock.startingNow();
        IdempotencyKeys keys = keys(name, database, clock);
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement()) {
            s.execute("CREATE TABLE effect (idem_key VARCHAR(10) NOT NULL, token BIGINT NOT NULL)");
        }
        byte[] stale = "stale".getBytes(StandardCharsets.UTF_8);
        byte[] fresh = "fresh".getBytes(StandardCharsets.UTF_8);

        // The claim lapsed; a successor took the key over, finished it in its transaction and has not committed.
        // MariaDB's update waits for the successor's row lock; PostgreSQL's reads the committed takeover and
        // refuses at once (StaleFencingTokenException).
        BeginResult.Started first = (BeginResult.Started) keys.begin("t", "K", "fp");
        try (KeyTransaction late = keys.transaction(first)) {
            effect(late.connection(), "K", first.token());
            clock.advance(LOCK);
            BeginResult.Started successor = (BeginResult.Started) keys.begin("t", "K", "fp");
            try (Connection tx = db.dataSource().getConnection()) {
                tx.setAutoCommit(false);
                effect(tx, "K", successor.token());
                keys.complete(tx, successor, 201, fresh);
                assertThat(answered(() -> catching(() -> late.complete(201, stale))))
                        .isInstanceOf(OnceException.class);
                tx.commit();
            }
        }
        assertThat(effects("K")).containsExactly(2L);
        assertThat(keys.begin("t", "K", "fp")).isEqualTo(new BeginResult.Replay(201, fresh, false));

        // A takeover under way (a begin holding the row it read, the claim still the caller's): both databases
        // wait for it; complete and a saved failure give up at the bound, and nothing of the caller's commits.
        for (String key : List.of("L", "M")) {
            BeginResult.Started started = (BeginResult.Started) keys.begin("t", key, "fp");
            try (KeyTransaction late = keys.transaction(started);
                    Connection taking = db.dataSource().getConnection()) {
                effect(late.connection(), key, started.token());
                taking.setAutoCommit(false);
                try (Statement s = taking.createStatement();
                        ResultSet rs = s.executeQuery(
                                "SELECT state FROM once_idempotency_key WHERE idem_key = '" + key + "' FOR UPDATE")) {
                    assertThat(rs.next()).isTrue();
                }
                assertThat(answered(() -> catching(() -> {
                            if (key.equals("L")) {
                                late.complete(201, stale);
                            } else {
                                late.fail(false, 422, stale);
                            }
                        })))
                        .isInstanceOf(OnceException.class)
                        .hasMessageContaining("idempotency key '" + key + "'")
                        .hasMessageContaining("waited longer than lockWait (PT0.2S)");
                taking.rollback();
                assertThatThrownBy(late::connection).isInstanceOf(IllegalStateException.class);
            }
            assertThat(effects(key)).as("the effect of key %s", key).isEmpty();
            assertThat(keys.begin("t", key, "fp")).isEqualTo(new BeginResult.InProgress(started.lockedUntil()));
        }
    }

    private static void effect(Connection c, String key, long token) throws Exception {
        try (Statement s = c.createStatement()) {
            s.executeUpdate("INSERT INTO effect (idem_key, token) VALUES ('" + key + "', " + token + ")");
        }
    }

    private List<Long> effects(String key) throws Exception {
        List<Long> tokens = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT token FROM effect WHERE idem_key = '" + key + "'")) {
            while (rs.next()) {
                tokens.add(rs.getLong(1));
            }
        }
        return tokens;
    }

    @Test
    void aLockWaitOutsideItsRangeIsRefusedNamingTheValue() {
        for (Duration bad : new Duration[] {null, Duration.ZERO, Duration.ofNanos(999_999), Duration.ofSeconds(61)}) {
            assertThatThrownBy(() -> IdempotencyKeys.builder().lockWait(bad))
                    .isInstanceOf(InvalidConfigurationException.class)
                    .hasMessageStartingWith("lockWait must be between 1ms and 1m, but was " + bad + ":");
        }
        assertThat(IdempotencyKeys.builder().lockWait(Duration.ofMillis(1))).isNotNull();
    }

    /** A call that may throw. */
    private interface Call {
        void run() throws Exception;
    }

    private static Exception catching(Call call) {
        try {
            call.run();
            return null;
        } catch (Exception e) {
            return e;
        }
    }

    /** What another request's call answered, on its own thread, within the lock wait and some slack. */
    private <T> T answered(Callable<T> call) throws Exception {
        long start = System.nanoTime();
        Future<T> result = otherRequest.submit(call);
        Duration bound = kept.plus(SLACK);
        try {
            T value = result.get(bound.toMillis(), TimeUnit.MILLISECONDS);
            System.out.printf("answered in %d ms%n", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
            return value;
        } catch (TimeoutException e) {
            throw new AssertionError("no answer within " + bound + ": it waits for the caller's open transaction");
        }
    }
}
