package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.StreamPositions;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.math.BigInteger;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * {@link StreamPositions} against what brokers and processes do to one ordered stream: random runs, each a stretch
 * of the stream starting at or behind where it is applied (a redelivery, a stale batch, a process that held its
 * messages past their lease), some held in their handler while the next run comes (the process cut off from the
 * broker that wakes up late), overlapping ones, duplicates. The held run holds the stream's row lock from its fence,
 * before its handler, to its commit: the next run waits for it before its own handler, then follows it or is
 * refused. After every run: the effects, in commit order, follow the stream's positions strictly, nothing is applied
 * twice, a delivery is refused only when the stream had passed it, and a run that starts where the stream stands
 * with nothing held applies whole.
 */
class StreamPositionsPropertyTest {

    private static final int STREAM = 12;
    private static final String HELD_RUN = "held-run";
    private static final String CREATE =
            "CREATE TABLE effect (seq bigserial PRIMARY KEY, event_id text NOT NULL," + " position int NOT NULL)";

    /**
     * A run: where it starts against the stream's applied position (behind it: a redelivery or a stale batch; ahead:
     * the broker moved the messages between on, a redrive), how long, and whether its handler waits for the next run.
     */
    record Run(int offset, int length, boolean held) {
        @Override
        public String toString() {
            return "run(" + (offset >= 0 ? "+" : "") + offset + ", " + length + (held ? ", held)" : ")");
        }
    }

    @Provide
    Arbitrary<List<Run>> runs() {
        return Combinators.combine(
                        Arbitraries.integers().between(-3, 2),
                        Arbitraries.integers().between(1, 4),
                        Arbitraries.integers().between(0, 3).map(i -> i == 0))
                .as(Run::new)
                .list()
                .ofMinSize(2)
                .ofMaxSize(10);
    }

    @Property(tries = 25)
    void effectsFollowTheStreamWhateverRunsCommitAndWhen(@ForAll("runs") List<Run> runs) throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(4)) {
            db.execute(CREATE);
            IdempotentConsumer engine = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("stream")
                    .lockTimeout(Duration.ofMillis(200))
                    .handler((d, tx) -> {
                        CountDownLatch gate = gate();
                        if (gate != null) {
                            held.countDown();
                            gate.await(30, TimeUnit.SECONDS);
                        }
                        try (PreparedStatement ps = tx.connection()
                                .prepareStatement("INSERT INTO effect (event_id, position) VALUES (?, ?)")) {
                            ps.setString(1, d.eventId());
                            ps.setInt(2, Integer.parseInt(d.payloadText()));
                            ps.executeUpdate();
                        }
                    })
                    .build();
            List<String> done = new ArrayList<>();
            CompletableFuture<List<Outcome>> waiting = null;
            CountDownLatch release = null;
            for (Run run : runs) {
                int applied = appliedUpTo(db);
                int from = Math.max(1, applied + 1 + run.offset());
                int to = Math.min(STREAM, from + run.length() - 1);
                if (from > to) {
                    continue;
                }
                boolean alone = waiting == null;
                if (run.held() && waiting == null) {
                    release = new CountDownLatch(1);
                    held = new CountDownLatch(1);
                    gates = release;
                    int f = from;
                    int t = to;
                    waiting = CompletableFuture.supplyAsync(
                            () -> process(engine, f, t), r -> new Thread(r, HELD_RUN).start());
                    // the run is in its handler, or finished without reaching it (a duplicate: nothing to hold)
                    waitFor(held, waiting);
                    done.add(run + " e" + from + "..e" + to + " waits");
                    continue;
                }
                List<Outcome> outcomes;
                if (waiting != null) {
                    // the held run's transaction holds the stream's row lock: this run waits for it (or for a claim
                    // of the held run's, which its lock timeout ends) before its own handler
                    int f = from;
                    int t = to;
                    CompletableFuture<List<Outcome>> next =
                            CompletableFuture.supplyAsync(() -> process(engine, f, t), OwnThreads.each());
                    await().atMost(30, TimeUnit.SECONDS).until(() -> next.isDone() || waitsForALock(db));
                    release.countDown();
                    List<Outcome> late = waiting.get(30, TimeUnit.SECONDS);
                    done.add("  the waiting run returns " + statuses(late));
                    check(db, late, Integer.parseInt(late.get(0).eventId().substring(1)), done);
                    waiting = null;
                    gates = null;
                    outcomes = next.get(30, TimeUnit.SECONDS);
                } else {
                    outcomes = process(engine, from, to);
                }
                done.add(run + " e" + from + "..e" + to + " " + statuses(outcomes));
                check(db, outcomes, from, done);
                if (alone && run.offset() >= 0) {
                    assertThat(outcomes)
                            .as("a run from where the stream stands, nothing held: applied whole; %s", done)
                            .allMatch(o -> o.status() == Status.APPLIED);
                }
            }
            if (waiting != null) {
                release.countDown();
                List<Outcome> late = waiting.get(30, TimeUnit.SECONDS);
                check(db, late, Integer.parseInt(late.get(0).eventId().substring(1)), done);
            }
        }
    }

    // the held run's handler calls (on its own thread) wait at this gate until the next run is done
    private volatile CountDownLatch gates;
    private volatile CountDownLatch held = new CountDownLatch(0);

    private CountDownLatch gate() {
        return Thread.currentThread().getName().equals(HELD_RUN) ? gates : null;
    }

    private static void waitFor(CountDownLatch held, CompletableFuture<?> run) throws InterruptedException {
        while (!held.await(10, TimeUnit.MILLISECONDS) && !run.isDone()) {
            // the run reaches its handler, or ends without it
        }
    }

    private static boolean waitsForALock(TestDatabase db) {
        return db.queryLong("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        + " AND wait_event_type = 'Lock'")
                > 0;
    }

    private static List<Outcome> process(IdempotentConsumer engine, int from, int to) {
        List<Delivery> ds = new ArrayList<>();
        List<BigInteger> positions = new ArrayList<>();
        for (int i = from; i <= to; i++) {
            ds.add(Delivery.of("e" + i, Integer.toString(i)));
            positions.add(BigInteger.valueOf(i));
        }
        return engine.processInOrder(ds, new StreamPositions("s", positions));
    }

    /** After a run of deliveries from position {@code from}: the invariants. */
    private static void check(TestDatabase db, List<Outcome> outcomes, int from, List<String> done) throws Exception {
        List<Integer> effects = effects(db);
        for (int i = 1; i < effects.size(); i++) {
            assertThat(effects.get(i))
                    .as("effects in commit order %s follow the stream; %s", effects, done)
                    .isGreaterThan(effects.get(i - 1));
        }
        int applied = effects.isEmpty() ? 0 : effects.get(effects.size() - 1);
        for (int i = 0; i < outcomes.size(); i++) {
            Outcome o = outcomes.get(i);
            int position = from + i;
            if (o.status() == Status.FAILED_PERMANENT) {
                assertThat(o.failure()).hasMessageContaining("already applied up to position");
                assertThat(position)
                        .as("e%d refused only when the stream had passed it; effects %s; %s", position, effects, done)
                        .isLessThan(applied);
                assertThat(effects)
                        .as("a refused event is not applied; %s", done)
                        .doesNotContain(position);
            }
            if (o.status() == Status.APPLIED || o.status() == Status.DUPLICATE) {
                assertThat(effects).as("e%d %s; %s", position, o.status(), done).contains(position);
            }
        }
    }

    private static List<Integer> effects(TestDatabase db) throws Exception {
        List<Integer> positions = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT position FROM effect ORDER BY seq");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                positions.add(rs.getInt(1));
            }
        }
        return positions;
    }

    private static int appliedUpTo(TestDatabase db) {
        return (int) db.queryLong("SELECT coalesce(max(position), 0) FROM effect");
    }

    private static String statuses(List<Outcome> outcomes) {
        return outcomes.stream()
                .map(o -> o.eventId() + ":" + o.status())
                .toList()
                .toString();
    }
}
