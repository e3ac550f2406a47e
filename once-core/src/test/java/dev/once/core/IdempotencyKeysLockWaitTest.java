package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
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

    @Test
    void aLockWaitOutsideItsRangeIsRefusedNamingTheValue() {
        for (Duration bad : new Duration[] {null, Duration.ZERO, Duration.ofNanos(999_999), Duration.ofSeconds(61)}) {
            assertThatThrownBy(() -> IdempotencyKeys.builder().lockWait(bad))
                    .isInstanceOf(InvalidConfigurationException.class)
                    .hasMessageStartingWith("lockWait must be between 1ms and 1m, but was " + bad + ":");
        }
        assertThat(IdempotencyKeys.builder().lockWait(Duration.ofMillis(1))).isNotNull();
    }

    private static RuntimeException catching(Runnable call) {
        try {
            call.run();
            return null;
        } catch (RuntimeException e) {
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
