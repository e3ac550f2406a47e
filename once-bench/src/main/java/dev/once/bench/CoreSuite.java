package dev.once.bench;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * Issue 2's benchmark: the naive consumer (the update alone), the hand-written floor (the same
 * claim and update in plain JDBC) and {@code once}, per message and 100 per transaction, at 1 and
 * 8 connections. The three run interleaved ({@link Throughput}), so drift in a shared machine's
 * load hits all three alike.
 */
final class CoreSuite implements Suite {

    static final int BATCH = 100;
    static final int[] CONNECTIONS = {1, 8};
    static final List<String> NAMES = List.of("naive", "floor", "once");
    static final String CONSUMER = "bench";

    // The floor's statements: the claim the engine makes (without its inline lock timeout, which a
    // hand-written loop would not bother with), on the same table.
    static final String FLOOR_CLAIM = "INSERT INTO once_inbox (consumer, event_id, processed_at)"
            + " VALUES (?, ?, ?) ON CONFLICT DO NOTHING";
    static final String FLOOR_CLAIM_ALL = "INSERT INTO once_inbox (consumer, event_id, processed_at)"
            + " SELECT ?, t.m, ? FROM unnest(?::varchar[]) WITH ORDINALITY AS t(m, n) ORDER BY t.n"
            + " ON CONFLICT DO NOTHING RETURNING event_id";

    @Override
    public String name() {
        return "core";
    }

    @Override
    public void run(Run run) throws Exception {
        Map<String, Throughput.Rate> results = new HashMap<>();
        for (String mode : List.of("single", "batch")) {
            for (int conns : CONNECTIONS) {
                List<BenchPostgres.Db> dbs = new ArrayList<>();
                try {
                    List<Throughput.Config> configs = new ArrayList<>();
                    for (String name : NAMES) {
                        BenchPostgres.Db db = run.postgres().freshDatabase(conns);
                        dbs.add(db);
                        configs.add(new Throughput.Config(name, conns, steps(name, db, mode.equals("batch"))));
                    }
                    run.postgres().checkpoint();
                    List<Throughput.Rate> rates = Throughput.measure(configs, run.settings().warmup(),
                            run.settings().measured(), run.settings().slice());
                    for (int i = 0; i < NAMES.size(); i++) {
                        results.put(key(NAMES.get(i), mode, conns), rates.get(i));
                        run.line(Run.bench(NAMES.get(i), mode, conns, batchOf(mode), rates.get(i).eventsPerSecond()));
                    }
                } finally {
                    dbs.forEach(BenchPostgres.Db::close);
                }
            }
        }
        run.section("Core: naive vs hand-written floor vs once", table(results, run.settings()));
    }

    static int batchOf(String mode) {
        return mode.equals("batch") ? BATCH : 1;
    }

    static String key(String name, String mode, int conns) {
        return name + "/" + mode + "/" + conns;
    }

    private static Throughput.StepFactory steps(String name, BenchPostgres.Db db, boolean batch) {
        return switch (name) {
            case "naive" -> i -> new Naive(db, new Throughput.Events(name, i), batch);
            case "floor" -> i -> new Floor(db, new Throughput.Events(name, i), batch);
            case "once" -> onceSteps(IdempotentConsumer.builder().dataSource(db.dataSource()).consumer(CONSUMER)
                    .handler(Ledger.ONCE_HANDLER).build(), batch);
            default -> throw new IllegalArgumentException("no configuration named '" + name + "'");
        };
    }

    /** {@code once}'s steps: {@code process} per event, or {@code processBatch} of {@value #BATCH}. */
    static Throughput.StepFactory onceSteps(IdempotentConsumer consumer, boolean batch) {
        return i -> {
            Throughput.Events events = new Throughput.Events("once", i);
            if (!batch) {
                return () -> {
                    Event e = events.next();
                    expectApplied(consumer.process(Delivery.of(e.id(), e.payload())));
                    return 1;
                };
            }
            return () -> {
                List<Delivery> deliveries = new ArrayList<>(BATCH);
                for (int k = 0; k < BATCH; k++) {
                    Event e = events.next();
                    deliveries.add(Delivery.of(e.id(), e.payload()));
                }
                for (Outcome o : consumer.processBatch(deliveries)) {
                    expectApplied(o);
                }
                return BATCH;
            };
        };
    }

    private static void expectApplied(Outcome o) {
        if (o.status() != Outcome.Status.APPLIED) {
            throw new IllegalStateException("every benchmark event is new, but " + o.eventId() + " came out "
                    + o.status(), o.failure());
        }
    }

    /** The naive consumer: the update alone, auto-commit per event, or 100 per transaction. */
    private static final class Naive implements Throughput.Step, AutoCloseable {
        private final Connection c;
        private final PreparedStatement credit;
        private final Throughput.Events events;
        private final boolean batch;

        Naive(BenchPostgres.Db db, Throughput.Events events, boolean batch) throws SQLException {
            this.c = db.dataSource().getConnection();
            this.c.setAutoCommit(!batch);
            this.credit = c.prepareStatement(Ledger.CREDIT);
            this.events = events;
            this.batch = batch;
        }

        @Override
        public int run() throws SQLException {
            int n = batch ? BATCH : 1;
            for (int k = 0; k < n; k++) {
                Event e = events.next();
                String payload = e.payload();
                credit.setLong(1, Event.amount(payload));
                credit.setLong(2, Event.account(payload));
                credit.executeUpdate();
            }
            if (batch) {
                c.commit();
            }
            return n;
        }

        @Override
        public void close() throws SQLException {
            credit.close();
            c.setAutoCommit(true);
            c.close();
        }
    }

    /**
     * The floor: what a careful hand-written JDBC loop does for the same guarantee. One held
     * connection, prepared statements reused, claim then update in one transaction per event, or
     * one claim statement for 100 ids, then the updates, then one commit.
     */
    private static final class Floor implements Throughput.Step, AutoCloseable {
        private final Connection c;
        private final PreparedStatement claim;
        private final PreparedStatement claimAll;
        private final PreparedStatement credit;
        private final Throughput.Events events;
        private final boolean batch;

        Floor(BenchPostgres.Db db, Throughput.Events events, boolean batch) throws SQLException {
            this.c = db.dataSource().getConnection();
            this.c.setAutoCommit(false);
            this.claim = c.prepareStatement(FLOOR_CLAIM);
            this.claimAll = c.prepareStatement(FLOOR_CLAIM_ALL);
            this.credit = c.prepareStatement(Ledger.CREDIT);
            this.events = events;
            this.batch = batch;
        }

        @Override
        public int run() throws SQLException {
            return batch ? runBatch() : runOne();
        }

        private int runOne() throws SQLException {
            Event e = events.next();
            claim.setString(1, CONSUMER);
            claim.setString(2, e.id());
            claim.setTimestamp(3, new Timestamp(System.currentTimeMillis()));
            if (claim.executeUpdate() == 1) {
                credit(e.payload());
            }
            c.commit();
            return 1;
        }

        private int runBatch() throws SQLException {
            Event[] batch = new Event[BATCH];
            String[] ids = new String[BATCH];
            for (int k = 0; k < BATCH; k++) {
                batch[k] = events.next();
                ids[k] = batch[k].id();
            }
            Arrays.sort(ids);   // one lock order across workers, as the engine does
            Array array = c.createArrayOf("varchar", ids);
            claimAll.setString(1, CONSUMER);
            claimAll.setTimestamp(2, new Timestamp(System.currentTimeMillis()));
            claimAll.setArray(3, array);
            Set<String> claimed = new HashSet<>(BATCH * 2);
            try (ResultSet rs = claimAll.executeQuery()) {
                while (rs.next()) {
                    claimed.add(rs.getString(1));
                }
            }
            array.free();
            for (Event e : batch) {
                if (claimed.contains(e.id())) {
                    credit(e.payload());
                }
            }
            c.commit();
            return BATCH;
        }

        private void credit(String payload) throws SQLException {
            credit.setLong(1, Event.amount(payload));
            credit.setLong(2, Event.account(payload));
            credit.executeUpdate();
        }

        @Override
        public void close() throws SQLException {
            claim.close();
            claimAll.close();
            credit.close();
            c.rollback();
            c.setAutoCommit(true);
            c.close();
        }
    }

    private static String table(Map<String, Throughput.Rate> rates, Run.Settings settings) {
        Map<String, Double> r = new HashMap<>();
        rates.forEach((k, v) -> r.put(k, v.eventsPerSecond()));
        StringBuilder md = new StringBuilder();
        md.append("Events/s. Naive, floor and once of one row run interleaved (see settings), each on a fresh schema.")
                .append(" The floor is a hand-written JDBC loop: one held connection, statements prepared once,")
                .append(" `INSERT … ON CONFLICT DO NOTHING` claim + the update + commit per event, or one")
                .append(" `unnest` claim of 100 sorted ids + 100 updates + one commit per batch. \"paired\" is the median")
                .append(" over turns of the ratio between turns adjacent in time, the figure least moved by load drift.\n\n");
        md.append("| mode | conns | events/tx | naive | floor | once | once / floor | once / floor, paired")
                .append(" | once / naive | floor / naive |\n");
        md.append("|---|---|---|---|---|---|---|---|---|---|\n");
        for (String mode : List.of("single", "batch")) {
            for (int conns : CONNECTIONS) {
                double naive = r.get(key("naive", mode, conns));
                double floor = r.get(key("floor", mode, conns));
                double once = r.get(key("once", mode, conns));
                double paired = rates.get(key("once", mode, conns)).pairedRatio(rates.get(key("floor", mode, conns)));
                md.append(String.format(Locale.ROOT,
                        "| %s | %d | %d | %,.0f | %,.0f | %,.0f | %.3f | %.3f | %.3f | %.3f |%n",
                        mode, conns, batchOf(mode), naive, floor, once, once / floor, paired, once / naive,
                        floor / naive));
            }
        }
        md.append("\nTargets:\n\n");
        for (String mode : List.of("single", "batch")) {
            for (int conns : CONNECTIONS) {
                double ratio = r.get(key("once", mode, conns)) / r.get(key("floor", mode, conns));
                double paired = rates.get(key("once", mode, conns)).pairedRatio(rates.get(key("floor", mode, conns)));
                String text = String.format(Locale.ROOT,
                        "once within 5%% of the floor, %s, %d conns: %.3f (paired %.3f)", mode, conns, ratio, paired);
                md.append(ratio < 0.95 && paired >= 0.95 ? "- met on the paired ratio only: " + text + "\n"
                        : check(text, ratio >= 0.95));
            }
        }
        double perMessage8 = r.get(key("once", "single", 8)) / r.get(key("naive", "single", 8));
        double floor8 = r.get(key("floor", "single", 8)) / r.get(key("naive", "single", 8));
        md.append(check(String.format(Locale.ROOT, "once per-message at 8 conns >= 0.70 of naive: %.3f"
                + " (the hand-written floor itself: %.3f)", perMessage8, floor8), perMessage8 >= 0.70));
        double batched1 = r.get(key("once", "batch", 1)) / r.get(key("once", "single", 1));
        md.append(check(String.format(Locale.ROOT, "once batched at 1 conn >= 15x once per-message at 1 conn: %.1fx",
                batched1), batched1 >= 15));
        double batched8 = r.get(key("once", "batch", 8)) / r.get(key("once", "single", 8));
        md.append(String.format(Locale.ROOT, "- (for reference) once batched vs per-message at 8 conns: %.1fx%n",
                batched8));
        return md.toString();
    }

    static String check(String text, boolean met) {
        return "- " + (met ? "met" : "**missed**") + ": " + text + "\n";
    }
}
