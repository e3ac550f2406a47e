package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.OnceException;
import dev.once.StaleFencingTokenException;
import dev.once.jdbc.Dialects;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.IdempotencyResultTooLargeException;
import dev.once.keys.InvalidIdempotencyKeyException;
import dev.once.lease.Leases;
import dev.once.retention.IdempotencyKeyPruner;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class IdempotencyKeysTest {

    private static final Duration LOCK = Duration.ofSeconds(30);

    private TestDatabase db;
    private MutableClock clock;
    private IdempotencyKeys keys;

    @BeforeEach
    void setUp() {
        db = TestPostgres.shared().freshDatabase(20);
        clock = MutableClock.startingNow();
        keys = IdempotencyKeys.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .lockDuration(LOCK)
                .maxResultBytes(64 * 1024)
                .build();
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    /**
     * Issue 10, smaller: a DataSource that hands out the caller's own connection, inside its open
     * transaction (what a transaction-aware proxy does under {@code @Transactional}). Leases and keys
     * used to switch it to auto-commit (or begin and commit on it), committing the caller's
     * unfinished work; now they refuse the connection and the caller's rollback still undoes its work.
     */
    @Test
    void leasesAndKeysRefuseAConnectionInsideTheCallersTransaction() throws Exception {
        db.execute("CREATE TABLE callers_work (n int)");
        try (Connection caller = db.dataSource().getConnection()) {
            caller.setAutoCommit(false);
            try (Statement s = caller.createStatement()) {
                s.executeUpdate("INSERT INTO callers_work VALUES (1)");
            }
            DataSource bound = boundTo(caller);
            Leases leases = Leases.builder()
                    .dataSource(bound)
                    .dialect(Dialects.POSTGRESQL)
                    .clock(clock)
                    .build();
            IdempotencyKeys proxied = IdempotencyKeys.builder()
                    .dataSource(bound)
                    .dialect(Dialects.POSTGRESQL)
                    .clock(clock)
                    .build();
            List<String> refused = new ArrayList<>();
            for (Runnable call : List.<Runnable>of(
                    () -> leases.acquire("settlement", "w", Duration.ofSeconds(10)),
                    () -> proxied.begin("t", "k", "fp"),
                    () -> proxied.complete(new BeginResult.Started("t", "k", 1, clock.instant()), 200, null))) {
                try {
                    call.run();
                } catch (OnceException e) {
                    refused.add(e.getMessage());
                } catch (RuntimeException e) {
                    refused.add("failed otherwise: " + e);
                }
            }
            boolean stillInItsTransaction = !caller.getAutoCommit();
            if (stillInItsTransaction) {
                caller.rollback();
            }
            caller.setAutoCommit(true);
            assertThat(stillInItsTransaction)
                    .as("the caller's connection was left in its transaction")
                    .isTrue();
            assertThat(db.queryLong("SELECT count(*) FROM callers_work"))
                    .as("the caller's rolled back work committed")
                    .isZero();
            assertThat(refused).hasSize(3).allSatisfy(m -> assertThat(m).contains("auto-commit off"));
        }
    }

    /** The caller's connection, its close a no-op: the shape of a transaction-aware DataSource proxy. */
    private static DataSource boundTo(Connection connection) {
        Connection unclosable = (Connection) Proxy.newProxyInstance(
                Connection.class.getClassLoader(), new Class<?>[] {Connection.class}, (proxy, method, args) -> {
                    if (method.getName().equals("close")) {
                        return null;
                    }
                    try {
                        return method.invoke(connection, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        return (DataSource) Proxy.newProxyInstance(
                DataSource.class.getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                    if (method.getName().equals("getConnection")) {
                        return unclosable;
                    }
                    throw new UnsupportedOperationException(method.getName());
                });
    }

    @Test
    void sixteenConcurrentBeginsOfOneKeyStartExactlyOnce() throws Exception {
        int threads = 16;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            for (int round = 0; round < 10; round++) {
                String key = "pay-" + round;
                CyclicBarrier barrier = new CyclicBarrier(threads);
                List<Future<BeginResult>> results = new ArrayList<>();
                for (int i = 0; i < threads; i++) {
                    Callable<BeginResult> begin = () -> {
                        barrier.await();
                        return keys.begin("tenant-1", key, "fp");
                    };
                    results.add(pool.submit(begin));
                }
                int started = 0;
                int inProgress = 0;
                for (Future<BeginResult> f : results) {
                    BeginResult r = f.get();
                    if (r instanceof BeginResult.Started) {
                        started++;
                    } else if (r instanceof BeginResult.InProgress) {
                        inProgress++;
                    }
                }
                assertThat(started)
                        .as("exactly one of %d concurrent begins of %s started", threads, key)
                        .isEqualTo(1);
                assertThat(inProgress).as("the others see it in progress").isEqualTo(threads - 1);
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void replayReturnsTheSavedResultByteForByteIncludingASavedFailure() {
        byte[] body = new byte[4096];
        new Random(42).nextBytes(body); // every byte value, NULs included
        BeginResult.Started s = (BeginResult.Started) keys.begin("t", "charge-1", "fp-1");
        keys.complete(s, 201, body);
        BeginResult replay = keys.begin("t", "charge-1", "fp-1");
        assertThat(replay).isEqualTo(new BeginResult.Replay(201, body, false));
        assertThat(((BeginResult.Replay) replay).body()).isEqualTo(body);

        BeginResult.Started declined = (BeginResult.Started) keys.begin("t", "charge-2", "fp-2");
        byte[] problem = "{\"error\":\"card_declined\"}".getBytes(StandardCharsets.UTF_8);
        keys.fail(declined, false, 402, problem);
        assertThat(keys.begin("t", "charge-2", "fp-2"))
                .as("a saved failure is replayed, not retried")
                .isEqualTo(new BeginResult.Replay(402, problem, true));

        BeginResult.Started empty = (BeginResult.Started) keys.begin("t", "charge-3", "fp-3");
        keys.complete(empty, 204, null);
        assertThat(keys.begin("t", "charge-3", "fp-3")).isEqualTo(new BeginResult.Replay(204, new byte[0], false));
    }

    @Test
    void aKeyReusedForADifferentRequestIsAMismatch() {
        BeginResult.Started s =
                (BeginResult.Started) keys.begin("t", "k", IdempotencyKeys.fingerprint("POST", "/a", "1"));
        assertThat(keys.begin("t", "k", IdempotencyKeys.fingerprint("POST", "/a", "2")))
                .as("in progress, other body")
                .isEqualTo(new BeginResult.Mismatch("t", "k"));
        keys.complete(s, 200, new byte[] {1});
        assertThat(keys.begin("t", "k", IdempotencyKeys.fingerprint("POST", "/a", "2")))
                .as("finished, other body")
                .isEqualTo(new BeginResult.Mismatch("t", "k"));
        assertThat(IdempotencyKeys.fingerprint("ab", "c")).isNotEqualTo(IdempotencyKeys.fingerprint("a", "bc"));
    }

    @Test
    void aWorkerWhoseClaimExpiredCannotOverwriteItsSuccessorsResult() {
        BeginResult.Started first = (BeginResult.Started) keys.begin("t", "slow", "fp");
        assertThat(keys.begin("t", "slow", "fp")).isInstanceOf(BeginResult.InProgress.class);

        clock.advance(LOCK.plusMillis(1)); // the first worker stalls past its claim
        BeginResult.Started second = (BeginResult.Started) keys.begin("t", "slow", "fp");
        assertThat(second.token()).isGreaterThan(first.token());
        keys.complete(second, 200, "second".getBytes(StandardCharsets.UTF_8));

        assertThatThrownBy(() -> keys.complete(first, 200, "first".getBytes(StandardCharsets.UTF_8)))
                .isInstanceOfSatisfying(StaleFencingTokenException.class, e -> {
                    assertThat(e.token()).isEqualTo(first.token());
                    assertThat(e.newest()).isEqualTo(second.token());
                });
        assertThatThrownBy(() -> keys.fail(first, false, 500, null)).isInstanceOf(StaleFencingTokenException.class);
        assertThat(keys.begin("t", "slow", "fp"))
                .isEqualTo(new BeginResult.Replay(200, "second".getBytes(StandardCharsets.UTF_8), false));
    }

    /**
     * Found by {@link IdempotencyKeysStateMachineTest}: a key pruned after its claim lapsed and claimed
     * anew started again at token 1, and the stalled first caller's complete (token 1) was taken as the
     * successor's, for another request's key at that; the successor's own complete was then refused.
     */
    @Test
    void aCallerStalledPastThePruneCannotFinishTheKeysNextClaim() {
        BeginResult.Started stalled = (BeginResult.Started) keys.begin("t", "pruned", "fp");
        clock.advance(Duration.ofHours(25));
        IdempotencyKeyPruner pruner = IdempotencyKeyPruner.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .build();
        assertThat(pruner.prune()).isEqualTo(1);
        BeginResult.Started next = (BeginResult.Started) keys.begin("t", "pruned", "other request");
        assertThat(next.token()).isEqualTo(stalled.token());

        assertThatThrownBy(() -> keys.complete(stalled, 200, "stalled".getBytes(StandardCharsets.UTF_8)))
                .isInstanceOfSatisfying(
                        StaleFencingTokenException.class,
                        e -> assertThat(e)
                                .hasMessageContaining("pruned after this claim lapsed and has been claimed anew"));
        keys.complete(next, 201, "next".getBytes(StandardCharsets.UTF_8));
        assertThat(keys.begin("t", "pruned", "other request"))
                .isEqualTo(new BeginResult.Replay(201, "next".getBytes(StandardCharsets.UTF_8), false));
        assertThatThrownBy(() -> keys.complete(next, 201, null)).hasMessageContaining("already finished");
    }

    @Test
    void aRetryableFailureLetsTheNextRequestStartAgain() {
        BeginResult.Started first = (BeginResult.Started) keys.begin("t", "flaky", "fp");
        keys.fail(first, true, 503, "upstream down".getBytes(StandardCharsets.UTF_8));
        BeginResult again = keys.begin("t", "flaky", "fp");
        assertThat(again)
                .isInstanceOfSatisfying(
                        BeginResult.Started.class, s -> assertThat(s.token()).isEqualTo(first.token() + 1));
        assertThatThrownBy(() -> keys.complete(first, 200, null)).isInstanceOf(StaleFencingTokenException.class);
    }

    /**
     * Two scopes, the same keys, eight threads. A thousand keys, not ten: scope isolation is a matter of the
     * statements (a begin that ignores its scope replays the other scope's result at the first key), and a
     * thousand keeps eight threads inserting and reading at once; ten thousand cost 23 s of a loaded run.
     */
    @Test
    void scopesNeverSeeEachOthersResultsOverAThousandCollidingKeys() throws Exception {
        int n = 1_000;
        ExecutorService pool = Executors.newFixedThreadPool(8);
        AtomicInteger wrong = new AtomicInteger();
        try {
            List<Future<?>> work = new ArrayList<>();
            for (int w = 0; w < 8; w++) {
                int worker = w;
                work.add(pool.submit(() -> {
                    for (int i = worker; i < n; i += 8) {
                        String key = "order-" + i;
                        for (String scope : List.of("tenant-a", "tenant-b")) {
                            BeginResult r = keys.begin(scope, key, scope + ":" + i);
                            if (!(r instanceof BeginResult.Started s)) {
                                wrong.incrementAndGet();
                                continue;
                            }
                            keys.complete(s, 200, (scope + "/" + i).getBytes(StandardCharsets.UTF_8));
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : work) {
                f.get();
            }
            assertThat(wrong).as("a key used in one scope is fresh in another").hasValue(0);
            List<Future<?>> check = new ArrayList<>();
            for (int w = 0; w < 8; w++) {
                int worker = w;
                check.add(pool.submit(() -> {
                    for (int i = worker; i < n; i += 8) {
                        for (String scope : List.of("tenant-a", "tenant-b")) {
                            BeginResult r = keys.begin(scope, "order-" + i, scope + ":" + i);
                            byte[] own = (scope + "/" + i).getBytes(StandardCharsets.UTF_8);
                            if (!r.equals(new BeginResult.Replay(200, own, false))) {
                                wrong.incrementAndGet();
                            }
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : check) {
                f.get();
            }
            assertThat(wrong).as("each scope replays its own result").hasValue(0);
        } finally {
            pool.shutdownNow();
        }
        assertThat(db.queryLong("SELECT count(*) FROM once_idempotency_key")).isEqualTo(2L * n);
    }

    @Test
    void keysAndResultsAreCappedWithClearErrors() {
        assertThatThrownBy(() -> keys.begin("t", "k".repeat(IdempotencyKeys.MAX_KEY_LENGTH + 1), "fp"))
                .isInstanceOf(InvalidIdempotencyKeyException.class)
                .hasMessageContaining("1 to 255")
                .hasMessageContaining("256 characters");
        assertThatThrownBy(() -> keys.begin("t", " ", "fp")).isInstanceOf(InvalidIdempotencyKeyException.class);
        assertThatThrownBy(() -> keys.begin("", "k", "fp"))
                .isInstanceOf(InvalidIdempotencyKeyException.class)
                .hasMessageContaining("scope");
        assertThatThrownBy(() -> keys.begin("t", "k\n", "fp"))
                .isInstanceOf(InvalidIdempotencyKeyException.class)
                .hasMessageContaining("control");

        BeginResult.Started s = (BeginResult.Started) keys.begin("t", "big", "fp");
        assertThatThrownBy(() -> keys.complete(s, 200, new byte[64 * 1024 + 1]))
                .isInstanceOfSatisfying(IdempotencyResultTooLargeException.class, e -> {
                    assertThat(e.size()).isEqualTo(64 * 1024 + 1);
                    assertThat(e.max()).isEqualTo(64 * 1024);
                });
        assertThat(keys.begin("t", "big", "fp"))
                .as("nothing saved, still processing")
                .isInstanceOf(BeginResult.InProgress.class);
        keys.complete(s, 200, new byte[64 * 1024]);
        assertThat(keys.begin("t", "big", "fp")).isInstanceOf(BeginResult.Replay.class);
    }

    @Test
    void thePrunerDeletesExpiredKeysAndSparesHeldClaims() {
        BeginResult.Started done = (BeginResult.Started) keys.begin("t", "old-done", "fp");
        keys.complete(done, 200, null);
        keys.begin("t", "old-held", "fp");
        clock.advance(Duration.ofHours(25));
        keys.begin("t", "old-held", "fp"); // taken over: held again, now
        keys.begin("t", "fresh", "fp");
        IdempotencyKeyPruner pruner = IdempotencyKeyPruner.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .chunkSize(1)
                .build();
        assertThat(pruner.prune()).isEqualTo(1);
        assertThat(keys.begin("t", "old-done", "fp"))
                .as("pruned: starts afresh")
                .isInstanceOf(BeginResult.Started.class);
        assertThat(keys.begin("t", "old-held", "fp")).isInstanceOf(BeginResult.InProgress.class);
    }
}
