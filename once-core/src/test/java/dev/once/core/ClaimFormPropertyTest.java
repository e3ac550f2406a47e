package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.Outcome.Status;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.Transformer;

/**
 * The per-delivery claim of a transaction the engine owns takes one of two forms, chosen per delivery from
 * what the consumer saw lately: the plain insert (a copy fails it with a unique violation) or the
 * {@code ON CONFLICT} claim (a copy inserts nothing). As a state machine through the public API: random
 * sequences of new events, copies of earlier ones (sequential, in bursts, several at once behind a barrier),
 * each through one of two consumers of the same name (two processes: what one claimed, the other never saw),
 * some marked redelivered, some whose handler fails after its effect. The oracle after every step, per event:
 * the effect is applied once if any delivery of it succeeded, else not at all, and the inbox agrees; each
 * delivery's status is the one its history implies (APPLIED for the first success, DUPLICATE after, a failure
 * otherwise; copies at once: exactly one APPLIED); and the metrics count what was heard: deliveries by outcome,
 * duplicates, redeliveries. On PostgreSQL both forms must have been sent, and switched between in one sequence.
 */
class ClaimFormPropertyTest {

    static final int TRIES = 15;
    static final AtomicLong postgresSequences = new AtomicLong();
    static final AtomicLong mariadbSequences = new AtomicLong();
    // PostgreSQL sequences that sent both claim forms, and that went back to the plain insert after ON CONFLICT.
    static final AtomicLong bothForms = new AtomicLong();
    static final AtomicLong backToPlain = new AtomicLong();

    private static TestDatabase postgres;
    private static TestDatabase mariadb;
    private static ExecutorService pool;

    @AfterContainer
    static void stop() {
        if (postgres != null) {
            postgres.close();
        }
        if (mariadb != null) {
            mariadb.close();
        }
        if (pool != null) {
            pool.shutdownNow();
        }
        if (postgresSequences.get() > 0) {
            System.out.println("CHAOS name=claim-forms rounds=" + postgresSequences.get() + " both_forms="
                    + bothForms.get() + " back_to_plain=" + backToPlain.get()
                    + " lost=0 applied_twice=0 wrong_outcomes=0 db=postgres");
            assertThat(bothForms.get())
                    .as("sequences that sent both claim forms, of %s", postgresSequences.get())
                    .isPositive();
            assertThat(backToPlain.get())
                    .as(
                            "sequences that went back to the plain insert after ON CONFLICT, of %s",
                            postgresSequences.get())
                    .isPositive();
        }
        if (mariadbSequences.get() > 0) {
            System.out.println("CHAOS name=claim-forms rounds=" + mariadbSequences.get()
                    + " lost=0 applied_twice=0 wrong_outcomes=0 db=mariadb");
        }
    }

    @Property(tries = TRIES)
    void postgresClaimForms(@ForAll("chains") ActionChain<World> chain) {
        if (postgres == null) {
            postgres = tables(TestPostgres.shared().freshDatabase(8));
        }
        run(chain, postgres, true, postgresSequences);
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = TRIES)
    void mariadbClaimForms(@ForAll("chains") ActionChain<World> chain) {
        if (mariadb == null) {
            mariadb = tables(TestMariaDb.shared().freshDatabase(8));
        }
        run(chain, mariadb, false, mariadbSequences);
    }

    private static TestDatabase tables(TestDatabase db) {
        return db.execute("CREATE TABLE effects (event_id varchar(100) PRIMARY KEY, n int NOT NULL)");
    }

    private static void run(ActionChain<World> chain, TestDatabase db, boolean postgres, AtomicLong sequences) {
        if (pool == null) {
            pool = Executors.newFixedThreadPool(4);
        }
        World.next = new World(db, postgres);
        World world = chain.run();
        sequences.incrementAndGet();
        if (postgres) {
            List<Boolean> forms = world.forms();
            if (forms.contains(true) && forms.contains(false)) {
                bothForms.incrementAndGet();
            }
            int firstOnConflict = forms.indexOf(true);
            if (firstOnConflict >= 0
                    && forms.subList(firstOnConflict, forms.size()).contains(false)) {
                backToPlain.incrementAndGet();
            }
        }
    }

    /**
     * One delivery: of a new event, or of an earlier one ({@code pick} modulo the events so far), through
     * process 0 or 1, marked redelivered or not, its handler failing after the effect or not.
     */
    record Copy(boolean fresh, int pick, int process, boolean redelivered, boolean fails) {}

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        Arbitrary<Integer> picks = Arbitraries.integers().between(0, 1000);
        Arbitrary<Integer> processes = Arbitraries.integers().between(0, 1);
        Arbitrary<Boolean> redelivered = Arbitraries.integers().between(0, 3).map(i -> i == 0);
        Arbitrary<Boolean> fails = Arbitraries.integers().between(0, 5).map(i -> i == 0);
        Arbitrary<Copy> fresh = Combinators.combine(picks, processes, redelivered, fails)
                .as((p, proc, r, f) -> new Copy(true, p, proc, r, f));
        Arbitrary<Copy> copy = Combinators.combine(picks, processes, redelivered, fails)
                .as((p, proc, r, f) -> new Copy(false, p, proc, r, f));
        return ActionChain.<World>startWith(() -> World.next)
                .withAction(6, action(fresh.list().ofMinSize(1).ofMaxSize(12).map(cs -> step("new", cs, false))))
                .withAction(4, action(copy.list().ofMinSize(1).ofMaxSize(12).map(cs -> step("copies", cs, false))))
                .withAction(
                        2,
                        action(Combinators.combine(
                                        Arbitraries.oneOf(fresh, copy),
                                        copy.list().ofMinSize(1).ofMaxSize(3))
                                .as((first, more) -> {
                                    List<Copy> all = new ArrayList<>();
                                    all.add(first);
                                    all.addAll(more);
                                    return step("at once", all, true);
                                })))
                .withMaxTransformations(20);
    }

    private static Transformer<World> step(String what, List<Copy> copies, boolean atOnce) {
        return Transformer.mutate(what + " " + copies, w -> w.deliver(copies, atOnce));
    }

    private static Action<World> action(Arbitrary<Transformer<World>> transformers) {
        return new Action.Independent<>() {
            @Override
            public Arbitrary<Transformer<World>> transformer() {
                return transformers;
            }
        };
    }

    static final class World {
        static World next;
        static final AtomicLong ROUNDS = new AtomicLong();

        final TestDatabase db;
        final boolean postgres;
        final String prefix = "f" + ROUNDS.incrementAndGet() + "-";
        final CountingDataSource counting;
        final List<IdempotentConsumer> processes = new ArrayList<>();
        final List<MeterRegistry> registries = new ArrayList<>();
        final List<String> events = new ArrayList<>();
        // Per event: whether a delivery of it has been applied, and every status heard for it.
        final Map<String, Boolean> applied = new HashMap<>();
        final Map<String, List<Status>> heard = new HashMap<>();
        final Map<Status, Long> statuses = new EnumMap<>(Status.class);
        long redeliveries;

        World(TestDatabase db, boolean postgres) {
            this.db = db;
            this.postgres = postgres;
            this.counting = new CountingDataSource(db.dataSource());
            for (int i = 0; i < 2; i++) {
                MeterRegistry registry = new SimpleMeterRegistry();
                registries.add(registry);
                processes.add(IdempotentConsumer.builder()
                        .dataSource(counting.dataSource())
                        .consumer("effects")
                        .handler(handler())
                        .meterRegistry(registry)
                        .build());
            }
        }

        private Handler handler() {
            String effect = postgres
                    ? "INSERT INTO effects (event_id, n) VALUES (?, 1) ON CONFLICT (event_id) DO UPDATE SET n = effects.n + 1"
                    : "INSERT INTO effects (event_id, n) VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1";
            return (d, tx) -> {
                try (PreparedStatement ps = tx.connection().prepareStatement(effect)) {
                    ps.setString(1, d.eventId());
                    ps.executeUpdate();
                }
                if (new String(d.payload(), StandardCharsets.UTF_8).equals("fail")) {
                    throw new IllegalStateException("failed after the effect");
                }
            };
        }

        /** The claim form of each per-delivery claim sent so far, in order: true for ON CONFLICT. */
        List<Boolean> forms() {
            List<Boolean> forms = new ArrayList<>();
            for (String sql : counting.prepared()) {
                String s = sql.toLowerCase(Locale.ROOT);
                if (s.startsWith("insert into \"once_inbox\"") && !s.contains("unnest")) {
                    forms.add(s.contains("on conflict"));
                }
            }
            return forms;
        }

        void deliver(List<Copy> copies, boolean atOnce) {
            List<String> ids = new ArrayList<>();
            for (Copy copy : copies) {
                String id;
                if (copy.fresh() || events.isEmpty()) {
                    id = prefix + events.size();
                    events.add(id);
                } else {
                    id = events.get(copy.pick() % events.size());
                }
                ids.add(atOnce ? ids.isEmpty() ? id : ids.get(0) : id);
            }
            try {
                if (atOnce) {
                    together(copies, ids);
                } else {
                    for (int i = 0; i < copies.size(); i++) {
                        Status status = deliver(copies.get(i), ids.get(i));
                        expectAlone(ids.get(i), copies.get(i), status);
                    }
                }
                check();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }

        /** A delivery alone: its status follows from whether the event was applied before and whether it fails. */
        private void expectAlone(String id, Copy copy, Status status) {
            boolean before = applied.getOrDefault(id, false);
            Status expected = before ? Status.DUPLICATE : copy.fails() ? Status.FAILED_RETRYABLE : Status.APPLIED;
            assertThat(status)
                    .as(
                            "%s delivered alone (applied before: %s, fails: %s), heard %s",
                            id, before, copy.fails(), heard.get(id))
                    .isEqualTo(expected);
            if (status == Status.APPLIED) {
                applied.put(id, true);
            }
        }

        /** Copies of one event behind a barrier: exactly one succeeding copy applies it, unless it was applied before. */
        private void together(List<Copy> copies, List<String> ids) throws Exception {
            String id = ids.get(0);
            boolean before = applied.getOrDefault(id, false);
            CyclicBarrier barrier = new CyclicBarrier(copies.size());
            List<Future<Status>> futures = new ArrayList<>();
            for (Copy copy : copies) {
                futures.add(pool.submit(() -> {
                    barrier.await(10, TimeUnit.SECONDS);
                    return deliver(copy, id);
                }));
            }
            List<Status> got = new ArrayList<>();
            for (Future<Status> f : futures) {
                got.add(f.get(60, TimeUnit.SECONDS));
            }
            long succeeding = copies.stream().filter(c -> !c.fails()).count();
            long appliedNow = got.stream().filter(s -> s == Status.APPLIED).count();
            if (before) {
                assertThat(got).as("%s at once after it was applied", id).containsOnly(Status.DUPLICATE);
            } else {
                assertThat(appliedNow)
                        .as(
                                "%s at once (%s copies succeed): APPLIED exactly once if any succeeds: %s",
                                id, succeeding, got)
                        .isEqualTo(succeeding > 0 ? 1 : 0);
            }
            for (int i = 0; i < copies.size(); i++) {
                Status s = got.get(i);
                if (copies.get(i).fails()) {
                    assertThat(s)
                            .as("%s failing copy at once: %s", id, got)
                            .isIn(Status.FAILED_RETRYABLE, Status.DUPLICATE);
                } else if (s != Status.APPLIED) {
                    assertThat(s).as("%s succeeding copy at once: %s", id, got).isEqualTo(Status.DUPLICATE);
                }
            }
            if (appliedNow > 0) {
                applied.put(id, true);
            }
        }

        private Status deliver(Copy copy, String id) {
            Delivery d = Delivery.builder(id)
                    .payload(copy.fails() ? "fail" : "ok")
                    .redelivered(copy.redelivered())
                    .build();
            Status status = processes.get(copy.process()).process(d).status();
            synchronized (this) { // copies at once report from the pool's threads
                heard.computeIfAbsent(id, e -> new ArrayList<>()).add(status);
                statuses.merge(status, 1L, Long::sum);
                if (copy.redelivered()) {
                    redeliveries++;
                }
            }
            return status;
        }

        private void check() throws SQLException {
            for (String id : events) {
                long want = applied.getOrDefault(id, false) ? 1 : 0;
                assertThat(count("SELECT coalesce(max(n), 0) FROM effects WHERE event_id = ?", id))
                        .as("%s's effect: applied %s times, heard %s", id, want, heard.get(id))
                        .isEqualTo(want);
                assertThat(count("SELECT count(*) FROM once_inbox WHERE event_id = ?", id))
                        .as("%s claimed iff applied, heard %s", id, heard.get(id))
                        .isEqualTo(want);
            }
            for (Status s : Status.values()) {
                assertThat(counted("once.deliveries", "outcome", s.name().toLowerCase(Locale.ROOT)))
                        .as("once.deliveries outcome=%s", s)
                        .isEqualTo(statuses.getOrDefault(s, 0L));
            }
            assertThat(counted("once.duplicates", null, null))
                    .as("once.duplicates: deliveries whose effect was not repeated")
                    .isEqualTo(statuses.getOrDefault(Status.DUPLICATE, 0L));
            assertThat(counted("once.redeliveries", null, null))
                    .as("once.redeliveries: deliveries marked redelivered")
                    .isEqualTo(redeliveries);
        }

        private long counted(String name, String tag, String value) {
            double sum = 0;
            for (MeterRegistry r : registries) {
                var search = r.find(name);
                if (tag != null) {
                    search = search.tag(tag, value);
                }
                sum += search.counters().stream().mapToDouble(c -> c.count()).sum();
            }
            return Math.round(sum);
        }

        private long count(String sql, String id) throws SQLException {
            try (Connection c = db.dataSource().getConnection();
                    PreparedStatement ps = c.prepareStatement(sql)) {
                ps.setString(1, id);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    return rs.getLong(1);
                }
            }
        }
    }
}
