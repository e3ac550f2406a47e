package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.StreamPositions;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.math.BigInteger;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * First runs of distinct new streams (no stored position yet) in transactions open at the same time, on PostgreSQL
 * and MariaDB: each is applied, none waits for another. On MariaDB the fence once locked the missing stream's gap
 * (InnoDB's locking reads of a missing key), so that the first runs of new streams in one gap deadlocked or one
 * waited {@code innodb_lock_wait_timeout} for the other's commit.
 */
class NewStreamsAtOnceTest {

    private static final int STREAMS = 4;

    /**
     * How long a run may wait for the others: below {@code innodb_lock_wait_timeout} (50 s), so a run held at
     * the fence still fails the barrier, and long enough for four first runs on a machine under load (10 s
     * timed out once at load 19).
     */
    private static final long MOMENT_SECONDS = 25;

    static Stream<Arguments> databases() {
        return Stream.of(
                Arguments.of("PostgreSQL", (Supplier<TestDatabase>)
                        () -> TestPostgres.shared().freshDatabase(2 * STREAMS)),
                Arguments.of("MariaDB", (Supplier<TestDatabase>)
                        () -> TestMariaDb.shared().freshDatabase(2 * STREAMS)));
    }

    private static StreamPositions firstRunOf(int stream) {
        return new StreamPositions("q#g" + stream, List.of(BigInteger.valueOf(7)));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("databases")
    void firstRunsOfNewStreamsInTheEnginesTransactionsAtOnceAreAllApplied(String name, Supplier<TestDatabase> fresh)
            throws Exception {
        try (TestDatabase db = fresh.get()) {
            // every handler waits until all have started: their transactions reach the fence together. A second
            // run of a handler is the engine's retry of a transaction the database rolled back (a deadlock victim)
            CyclicBarrier started = new CyclicBarrier(STREAMS);
            Map<String, Integer> handled = new ConcurrentHashMap<>();
            IdempotentConsumer engine = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("fifo")
                    .handler((d, tx) -> {
                        if (handled.merge(d.eventId(), 1, Integer::sum) == 1) {
                            started.await(MOMENT_SECONDS, TimeUnit.SECONDS);
                        }
                    })
                    .build();
            List<CompletableFuture<Outcome>> runs = new ArrayList<>();
            for (int i = 0; i < STREAMS; i++) {
                int stream = i;
                runs.add(CompletableFuture.supplyAsync(
                        () -> engine.processInOrder(List.of(Delivery.of("e" + stream, "ok")), firstRunOf(stream))
                                .get(0),
                        OwnThreads.each()));
            }
            long began = System.nanoTime();
            List<Outcome> outcomes = new ArrayList<>();
            for (CompletableFuture<Outcome> run : runs) {
                outcomes.add(run.get(2 * MOMENT_SECONDS + 60, TimeUnit.SECONDS));
            }
            long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - began);

            assertThat(outcomes)
                    .as("%s, after %d s", outcomes, seconds)
                    .extracting(Outcome::status)
                    .containsOnly(Status.APPLIED);
            assertThat(handled)
                    .as("handler runs by event: retried after a deadlock?")
                    .allSatisfy((id, n) -> assertThat(n).isOne());
            assertThat(seconds).as("waited on each other").isLessThan(MOMENT_SECONDS);
            assertThat(db.queryLong("SELECT count(*) FROM once_stream_position WHERE position = 7"))
                    .isEqualTo(STREAMS);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("databases")
    void firstRunsOfNewStreamsInCallersTransactionsOpenAtOnceAreAllApplied(String name, Supplier<TestDatabase> fresh)
            throws Exception {
        try (TestDatabase db = fresh.get()) {
            ManualTransactions manual = new ManualTransactions();
            IdempotentConsumer engine = IdempotentConsumer.builder()
                    .transactions(manual)
                    .dialect(name.equals("MariaDB") ? Dialects.MARIADB : Dialects.POSTGRESQL)
                    .consumer("fifo")
                    .handler((d, tx) -> {})
                    .build();
            // each transaction runs its stream, then stays open until every one has run its own
            CountDownLatch ran = new CountDownLatch(STREAMS);
            List<CompletableFuture<String>> runs = new ArrayList<>();
            for (int i = 0; i < STREAMS; i++) {
                int stream = i;
                runs.add(CompletableFuture.supplyAsync(
                        () -> {
                            try (Connection c = db.dataSource().getConnection()) {
                                c.setAutoCommit(false);
                                try (ManualTransactions.Scope tx = manual.join(c)) {
                                    long began = System.nanoTime();
                                    Outcome o = engine.processInOrder(
                                                    List.of(Delivery.of("e" + stream, "ok")), firstRunOf(stream))
                                            .get(0);
                                    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began);
                                    ran.countDown();
                                    boolean all = ran.await(MOMENT_SECONDS, TimeUnit.SECONDS);
                                    tx.commit();
                                    c.setAutoCommit(true);
                                    return o.status() + " in " + millis + " ms"
                                            + (all ? "" : ", the others still running");
                                }
                            } catch (Exception e) {
                                return e.toString();
                            }
                        },
                        OwnThreads.each()));
            }
            List<String> results = new ArrayList<>();
            for (CompletableFuture<String> run : runs) {
                results.add(run.get(2 * MOMENT_SECONDS + 60, TimeUnit.SECONDS));
            }

            assertThat(results)
                    .as("each run while the others' transactions are open")
                    .allMatch(
                            r -> r.startsWith(Status.APPLIED + " in ") && !r.endsWith("still running"),
                            "applied at once");
            assertThat(db.queryLong("SELECT count(*) FROM once_stream_position WHERE position = 7"))
                    .isEqualTo(STREAMS);
        }
    }
}
