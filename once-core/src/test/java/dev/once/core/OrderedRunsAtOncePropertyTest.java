package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.StreamPositions;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.math.BigInteger;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;

/**
 * Ordered runs of a few streams in waves of transactions open at the same time, on PostgreSQL and MariaDB: first
 * runs of new streams (of one stream twice, of several streams at once), replays and stale runs behind the stored
 * position, runs ahead of it, each run with event ids of its own so that only the stream's position fence stands
 * between a replayed position and its second effect. Some runs hold their transaction open after the fence until the
 * other held runs of the wave (one per stream) have passed theirs: a run of one stream must never wait for a run of
 * another. Each run is the caller's transaction ({@link ManualTransactions}), which records the run in a history
 * table after the fence, under the stream's row lock, so that the history's order of a stream is its commit order.
 * After every wave: each stream's committed runs, in commit order, start after the previous one ended (its position
 * never moved backwards, no position was applied twice), its effects are exactly those runs' positions, its stored
 * position is the last run's last, a refused run is behind the stream and its handler was never called (the handler
 * notes its calls outside the transaction, where a rollback cannot undo them), and a run alone from where the stream
 * stands is applied.
 */
class OrderedRunsAtOncePropertyTest {

    private static final int STREAMS = 3;

    /** How long a held run waits for the other held runs to pass their fences: far below any lock wait timeout. */
    private static final long HOLD_SECONDS = 10;

    /**
     * A run of stream {@code stream}: where it starts against the stream's stored position at the start of its wave
     * (behind: a replay or a stale run; ahead: the broker moved on), how long, and whether it holds its transaction
     * open after its fence until the wave's other held runs passed theirs.
     */
    record Run(int stream, int offset, int length, boolean held) {
        @Override
        public String toString() {
            return "s" + stream + "(" + (offset >= 0 ? "+" : "") + offset + ", " + length + (held ? ", held)" : ")");
        }
    }

    /** What a run did: its positions, outcomes, whether it committed, whether it waited out its hold. */
    private record Result(Run run, int from, int to, List<Outcome> outcomes, boolean committed, boolean waitedOut) {
        @Override
        public String toString() {
            return run + " p" + from + ".." + to + " " + (committed ? "committed" : "rolled back")
                    + (waitedOut ? " (waited out its hold)" : "") + " "
                    + outcomes.stream().map(o -> o.status().toString()).toList();
        }
    }

    @Provide
    Arbitrary<List<List<Run>>> waves() {
        Arbitrary<Run> run = Combinators.combine(
                        Arbitraries.integers().between(0, STREAMS - 1),
                        Arbitraries.integers().between(-3, 2),
                        Arbitraries.integers().between(1, 3),
                        Arbitraries.of(true, false))
                .as(Run::new);
        return run.list().ofMinSize(1).ofMaxSize(4).list().ofMinSize(1).ofMaxSize(6);
    }

    @Property(tries = 15)
    void postgresRunsAtOnceKeepEveryStreamInOrder(@ForAll("waves") List<List<Run>> waves) throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(12)) {
            db.execute(
                    "CREATE TABLE effect (stream int NOT NULL, position int NOT NULL, event_id text NOT NULL)",
                    "CREATE TABLE history (seq bigserial PRIMARY KEY, stream int NOT NULL, first_position int NOT"
                            + " NULL, last_position int NOT NULL)");
            runWaves(db, Dialects.POSTGRESQL, waves);
        }
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = 15)
    void mariaDbRunsAtOnceKeepEveryStreamInOrder(@ForAll("waves") List<List<Run>> waves) throws Exception {
        try (TestDatabase db = TestMariaDb.shared().freshDatabase(12)) {
            db.execute(
                    "CREATE TABLE effect (stream int NOT NULL, position int NOT NULL, event_id varchar(100) NOT NULL)"
                            + " ENGINE=InnoDB",
                    "CREATE TABLE history (seq bigint AUTO_INCREMENT PRIMARY KEY, stream int NOT NULL, first_position"
                            + " int NOT NULL, last_position int NOT NULL) ENGINE=InnoDB");
            runWaves(db, Dialects.MARIADB, waves);
        }
    }

    private static void runWaves(TestDatabase db, Dialect dialect, List<List<Run>> waves) throws Exception {
        ManualTransactions manual = new ManualTransactions();
        Set<String> called = ConcurrentHashMap.newKeySet();
        IdempotentConsumer engine = IdempotentConsumer.builder()
                .transactions(manual)
                .dialect(dialect)
                .consumer("fifo")
                .handler((d, tx) -> {
                    called.add(d.eventId()); // outside the transaction, as an HTTP call: no rollback undoes it
                    String[] streamAndPosition = d.payloadText().split(":");
                    try (PreparedStatement ps = tx.connection()
                            .prepareStatement("INSERT INTO effect (stream, position, event_id) VALUES (?, ?, ?)")) {
                        ps.setInt(1, Integer.parseInt(streamAndPosition[0]));
                        ps.setInt(2, Integer.parseInt(streamAndPosition[1]));
                        ps.setString(3, d.eventId());
                        ps.executeUpdate();
                    }
                })
                .build();
        List<String> done = new ArrayList<>();
        ExecutorService threads = Executors.newCachedThreadPool();
        try {
            for (int w = 0; w < waves.size(); w++) {
                List<Run> wave = waves.get(w);
                Map<Integer, Long> before = stored(db);
                Set<Integer> holding = new HashSet<>();
                List<Boolean> holds = new ArrayList<>();
                for (Run run : wave) {
                    holds.add(run.held() && holding.add(run.stream())); // at most one held run per stream
                }
                CountDownLatch go = new CountDownLatch(1);
                CountDownLatch passed = new CountDownLatch(holding.size());
                List<CompletableFuture<Result>> running = new ArrayList<>();
                for (int i = 0; i < wave.size(); i++) {
                    Run run = wave.get(i);
                    int from = (int) Math.max(1, before.getOrDefault(run.stream(), 0L) + 1 + run.offset());
                    String label = "w" + w + "r" + i;
                    boolean held = holds.get(i);
                    running.add(CompletableFuture.supplyAsync(
                            () -> run(db, manual, engine, run, from, label, held, go, passed), threads));
                }
                go.countDown();
                List<Result> results = new ArrayList<>();
                for (CompletableFuture<Result> r : running) {
                    results.add(r.get(2 * HOLD_SECONDS + 60, TimeUnit.SECONDS));
                }
                done.add("wave " + w + " from " + before + ": " + results);
                check(db, before, results, called, done);
            }
        } finally {
            threads.shutdownNow();
        }
    }

    private static Result run(
            TestDatabase db,
            ManualTransactions manual,
            IdempotentConsumer engine,
            Run run,
            int from,
            String label,
            boolean held,
            CountDownLatch go,
            CountDownLatch passed) {
        int to = from + run.length() - 1;
        List<Delivery> deliveries = new ArrayList<>();
        List<BigInteger> positions = new ArrayList<>();
        for (int p = from; p <= to; p++) {
            // an id of the run's own: only the fence refuses a position applied before
            deliveries.add(Delivery.of(label + "-s" + run.stream() + "p" + p, run.stream() + ":" + p));
            positions.add(BigInteger.valueOf(p));
        }
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                go.await();
                List<Outcome> outcomes;
                try {
                    outcomes = engine.processInOrder(deliveries, new StreamPositions("s" + run.stream(), positions));
                } finally {
                    if (held) {
                        passed.countDown();
                    }
                }
                boolean waitedOut = held && !passed.await(HOLD_SECONDS, TimeUnit.SECONDS);
                boolean applied = outcomes.stream().allMatch(o -> o.status() == Status.APPLIED);
                if (applied) {
                    // under the stream's row lock, which the fence took: the history's order is the commit order
                    try (PreparedStatement ps = c.prepareStatement(
                            "INSERT INTO history (stream, first_position, last_position) VALUES (?, ?, ?)")) {
                        ps.setInt(1, run.stream());
                        ps.setInt(2, from);
                        ps.setInt(3, to);
                        ps.executeUpdate();
                    }
                    tx.commit();
                } else {
                    tx.rollback();
                }
                c.setAutoCommit(true);
                return new Result(run, from, to, outcomes, applied, waitedOut);
            }
        } catch (Exception e) {
            throw new IllegalStateException(run + " from " + from + ": " + e, e);
        }
    }

    private static void check(
            TestDatabase db, Map<Integer, Long> before, List<Result> results, Set<String> called, List<String> done)
            throws Exception {
        Map<Integer, Long> after = stored(db);
        for (Result r : results) {
            assertThat(r.waitedOut())
                    .as(
                            "%s held its transaction open %d s for the held runs of other streams to pass their fences:"
                                    + " one waited for it (a lock of one stream's fence held another's); %s",
                            r, HOLD_SECONDS, done)
                    .isFalse();
            if (!r.committed()) {
                assertThat(r.outcomes())
                        .as("a run not applied is refused: the stream had passed it; %s", done)
                        .anySatisfy(o -> {
                            assertThat(o.status()).isEqualTo(Status.FAILED_PERMANENT);
                            assertThat(o.failure()).hasMessageContaining("already applied up to position");
                        });
                assertThat(after.get(r.run().stream()))
                        .as("%s refused: the stream is at or past its first position; %s", r, done)
                        .isNotNull()
                        .isGreaterThanOrEqualTo((long) r.from());
                assertThat(r.outcomes().stream()
                                .map(Outcome::eventId)
                                .filter(called::contains)
                                .toList())
                        .as(
                                "a refused run's handler is never called: the stream's fence comes before it, so what"
                                        + " the handler does outside the transaction never happens for a position"
                                        + " the stream has passed; %s; %s",
                                r, done)
                        .isEmpty();
            }
        }
        if (results.size() == 1 && results.get(0).run().offset() >= 0) {
            assertThat(results.get(0).committed())
                    .as("a run alone from where its stream stands is applied; %s", done)
                    .isTrue();
        }
        Map<Integer, List<Integer>> effects = effects(db);
        Map<Integer, List<int[]>> history = history(db);
        for (int s = 0; s < STREAMS; s++) {
            List<int[]> runs = history.getOrDefault(s, List.of());
            List<Integer> expected = new ArrayList<>();
            int end = 0;
            for (int[] run : runs) {
                assertThat(run[0])
                        .as(
                                "s%d's committed runs in commit order %s: each after the last one's end (%d): the position"
                                        + " never moves backwards, no position is applied twice; %s",
                                s, ranges(runs), end, done)
                        .isGreaterThan(end);
                for (int p = run[0]; p <= run[1]; p++) {
                    expected.add(p);
                }
                end = run[1];
            }
            assertThat(effects.getOrDefault(s, List.of()))
                    .as("s%d's effects: the positions of its committed runs, each once; %s", s, done)
                    .containsExactlyInAnyOrderElementsOf(expected);
            assertThat(after.get(s))
                    .as("s%d's stored position: its last committed run's last; %s", s, done)
                    .isEqualTo(runs.isEmpty() ? null : (long) end);
            if (before.containsKey(s)) {
                assertThat(after.get(s))
                        .as("s%d's stored position never moves backwards; %s", s, done)
                        .isGreaterThanOrEqualTo(before.get(s));
            }
        }
    }

    private static String ranges(List<int[]> runs) {
        return runs.stream().map(r -> r[0] + ".." + r[1]).toList().toString();
    }

    private static Map<Integer, Long> stored(TestDatabase db) throws Exception {
        Map<Integer, Long> stored = new HashMap<>();
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement ps = c.prepareStatement(
                        "SELECT stream, position FROM once_stream_position WHERE consumer = 'fifo'");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                stored.put(Integer.parseInt(rs.getString(1).substring(1)), rs.getLong(2));
            }
        }
        return stored;
    }

    private static Map<Integer, List<Integer>> effects(TestDatabase db) throws Exception {
        Map<Integer, List<Integer>> effects = new HashMap<>();
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT stream, position FROM effect");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                effects.computeIfAbsent(rs.getInt(1), s -> new ArrayList<>()).add(rs.getInt(2));
            }
        }
        return effects;
    }

    /** Each stream's committed runs, first and last position, in commit order. */
    private static Map<Integer, List<int[]>> history(TestDatabase db) throws Exception {
        Map<Integer, List<int[]>> history = new HashMap<>();
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement ps =
                        c.prepareStatement("SELECT stream, first_position, last_position FROM history ORDER BY seq");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                history.computeIfAbsent(rs.getInt(1), s -> new ArrayList<>())
                        .add(new int[] {rs.getInt(2), rs.getInt(3)});
            }
        }
        return history;
    }
}
