package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
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
 * {@link ClaimTiming#AT_COMMIT} as a state machine: random sequences of deliveries of a few events,
 * each copy with a handler that may apply, throw after its effect, swallow a failed statement, or
 * fail on the order row a copy already wrote, alone or several copies at once, and some through a
 * consumer of the same name that claims first (a rolling deploy switching the setting). The oracle
 * after every step, per event: its effect counter is 0 or 1 and equals its claim and outbox rows;
 * nothing reported APPLIED or DUPLICATE (acknowledged) is missing; at most one delivery was APPLIED.
 */
class ClaimAtCommitPropertyTest {

    static final int TRIES = 10;
    static final AtomicLong postgresSequences = new AtomicLong();
    static final AtomicLong mariadbSequences = new AtomicLong();

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
        for (String db : List.of("postgres", "mariadb")) {
            long n = db.equals("postgres") ? postgresSequences.get() : mariadbSequences.get();
            if (n > 0) {
                System.out.println("CHAOS name=claim-at-commit rounds=" + n
                        + " lost=0 applied_twice=0 phantom=0 wrong_outcomes=0 db=" + db);
            }
        }
    }

    @Property(tries = TRIES)
    void postgresClaimAtCommit(@ForAll("chains") ActionChain<World> chain) {
        if (postgres == null) {
            postgres = tables(TestPostgres.shared().freshDatabase(8));
        }
        run(chain, postgres, true, postgresSequences);
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = TRIES)
    void mariadbClaimAtCommit(@ForAll("chains") ActionChain<World> chain) {
        if (mariadb == null) {
            mariadb = tables(TestMariaDb.shared().freshDatabase(8));
        }
        run(chain, mariadb, false, mariadbSequences);
    }

    private static TestDatabase tables(TestDatabase db) {
        return db.execute(
                "CREATE TABLE effects (event_id varchar(100) PRIMARY KEY, n int NOT NULL)",
                "CREATE TABLE orders (id varchar(100) PRIMARY KEY)");
    }

    private static void run(ActionChain<World> chain, TestDatabase db, boolean postgres, AtomicLong sequences) {
        if (pool == null) {
            pool = Executors.newFixedThreadPool(4);
        }
        World.next = new World(db, postgres);
        chain.run();
        sequences.incrementAndGet();
    }

    /** What one copy's handler does. */
    enum Behaviour {
        APPLY,
        THROW_AFTER_EFFECT,
        SWALLOW_FAILED_STATEMENT,
        ORDER_ROW_FIRST
    }

    /** One copy: which event, what its handler does, and whether it goes through the claim-first consumer. */
    record Copy(int event, Behaviour behaviour, boolean claimFirst) {}

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        Arbitrary<Copy> copies = Combinators.combine(
                        Arbitraries.integers().between(0, 3),
                        Arbitraries.of(Behaviour.class),
                        Arbitraries.integers().between(0, 4).map(i -> i == 0))
                .as(Copy::new);
        return ActionChain.<World>startWith(() -> World.next)
                .withAction(4, action(copies.map(c -> Transformer.mutate("deliver " + c, w -> w.deliver(List.of(c))))))
                .withAction(
                        2,
                        action(copies.list()
                                .ofMinSize(2)
                                .ofMaxSize(4)
                                .map(cs -> Transformer.mutate(
                                        "at once " + cs,
                                        w -> w.deliver(cs.stream()
                                                .map(c -> new Copy(cs.get(0).event(), c.behaviour(), c.claimFirst()))
                                                .toList())))))
                .withMaxTransformations(15);
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
        final String prefix = "r" + ROUNDS.incrementAndGet() + "-";
        final Map<Integer, List<Status>> heard = new HashMap<>();
        final Map<Behaviour, IdempotentConsumer> atCommit = new HashMap<>();
        final Map<Behaviour, IdempotentConsumer> claimFirst = new HashMap<>();

        World(TestDatabase db, boolean postgres) {
            this.db = db;
            this.postgres = postgres;
            for (Behaviour b : Behaviour.values()) {
                atCommit.put(b, consumer(ClaimTiming.AT_COMMIT, b));
                claimFirst.put(b, consumer(ClaimTiming.BEFORE_HANDLER, b));
            }
        }

        private IdempotentConsumer consumer(ClaimTiming timing, Behaviour behaviour) {
            return IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("effects")
                    .claimTiming(timing)
                    .handler(handler(behaviour))
                    .meterRegistry(new io.micrometer.core.instrument.simple.SimpleMeterRegistry())
                    .build();
        }

        private Handler handler(Behaviour behaviour) {
            String effect = postgres
                    ? "INSERT INTO effects (event_id, n) VALUES (?, 1) ON CONFLICT (event_id) DO UPDATE SET n = effects.n + 1"
                    : "INSERT INTO effects (event_id, n) VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1";
            return (d, tx) -> {
                Connection c = tx.connection();
                if (behaviour == Behaviour.ORDER_ROW_FIRST) {
                    try (PreparedStatement ps = c.prepareStatement("INSERT INTO orders (id) VALUES (?)")) {
                        ps.setString(1, d.eventId());
                        ps.executeUpdate();
                    }
                }
                try (PreparedStatement ps = c.prepareStatement(effect)) {
                    ps.setString(1, d.eventId());
                    ps.executeUpdate();
                }
                tx.outbox().add("receipts", null, new byte[] {1}, Map.of(), "receipt:" + d.eventId());
                if (behaviour == Behaviour.SWALLOW_FAILED_STATEMENT) {
                    try (Statement s = c.createStatement()) {
                        s.execute("SELECT * FROM no_such_table");
                    } catch (SQLException ignored) {
                        // the user's bug: PostgreSQL aborts the transaction, MariaDB goes on
                    }
                }
                if (behaviour == Behaviour.THROW_AFTER_EFFECT) {
                    throw new IllegalStateException("failed after the effect");
                }
            };
        }

        void deliver(List<Copy> copies) {
            try {
                List<Future<Outcome>> outcomes = new ArrayList<>();
                CyclicBarrier together = new CyclicBarrier(copies.size());
                for (Copy copy : copies) {
                    IdempotentConsumer consumer = (copy.claimFirst() ? claimFirst : atCommit).get(copy.behaviour());
                    Delivery d = Delivery.of(prefix + copy.event(), "x");
                    outcomes.add(pool.submit(() -> {
                        together.await(10, TimeUnit.SECONDS);
                        return consumer.process(d);
                    }));
                }
                for (int i = 0; i < copies.size(); i++) {
                    heard.computeIfAbsent(copies.get(i).event(), e -> new ArrayList<>())
                            .add(outcomes.get(i).get(60, TimeUnit.SECONDS).status());
                }
                check();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }

        private void check() throws SQLException {
            for (Map.Entry<Integer, List<Status>> e : heard.entrySet()) {
                String id = prefix + e.getKey();
                long effect = count("SELECT coalesce(max(n), 0) FROM effects WHERE event_id = ?", id);
                long claims = count("SELECT count(*) FROM once_inbox WHERE event_id = ?", id);
                long outbox = count("SELECT count(*) FROM once_outbox WHERE idempotency_key = ?", "receipt:" + id);
                List<Status> statuses = e.getValue();
                assertThat(effect)
                        .as("%s applied at most once, heard %s", id, statuses)
                        .isLessThanOrEqualTo(1);
                assertThat(claims)
                        .as("%s claimed iff applied, heard %s", id, statuses)
                        .isEqualTo(effect);
                assertThat(outbox)
                        .as("%s's outbox rows, heard %s", id, statuses)
                        .isEqualTo(effect);
                assertThat(statuses.stream().filter(s -> s == Status.APPLIED).count())
                        .as("%s reported APPLIED at most once: %s", id, statuses)
                        .isLessThanOrEqualTo(1);
                if (statuses.contains(Status.APPLIED) || statuses.contains(Status.DUPLICATE)) {
                    assertThat(effect)
                            .as("%s acknowledged but not applied: %s", id, statuses)
                            .isEqualTo(1);
                }
            }
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
