package dev.once.bench;

import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.MismatchPolicy;
import dev.once.Outcome;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The naive consumer (the update alone), the best hand-written JDBC for each configuration (the
 * floor), the old per-event floor and {@code once}, one event per transaction and 100 or 500 per
 * transaction, at 1 and 8 connections. The configurations of one group run interleaved
 * ({@link Throughput}), so drift in a shared machine's load hits all alike.
 *
 * <p>Floors, per configuration:
 * <ul>
 *   <li>single, {@code floor}: claim and update in one statement (a data-modifying CTE) in
 *       auto-commit: one round trip and one commit per event, the least a durable claim costs.</li>
 *   <li>single, {@code floor-per-event}: the old floor, claim + update + commit (three round trips); the
 *       claim a plain insert, a copy's unique violation rolled back.</li>
 *   <li>single, {@code floor-checked}: {@code once}'s own statements written by hand: claim + update +
 *       the claim check sent with the {@code COMMIT} in one round trip ({@link #FLOOR_CHECK_AND_COMMIT}),
 *       so {@code once / floor-checked} is what the engine costs around its SQL and
 *       {@code floor-checked / floor-per-event} what the check costs the server.</li>
 *   <li>batch, {@code floor-set}: one {@code unnest} claim of the sorted ids, one set-based
 *       {@code UPDATE … FROM unnest(?::bigint[], ?::bigint[])} of the claimed events pre-aggregated per
 *       account and sorted, one commit.</li>
 *   <li>batch, {@code floor-pipelined}: one {@code unnest} claim, one JDBC batch of the updates (pgjdbc
 *       pipelines it in one round trip), one commit.</li>
 *   <li>batch, {@code floor-per-event}: the old floor, one {@code unnest} claim, one
 *       {@code executeUpdate} per event, one commit.</li>
 * </ul>
 * The floor a row is compared with is the faster of {@code floor-set} and {@code floor-pipelined}.
 */
final class CoreSuite implements Suite {

    static final int BATCH = 100;
    static final int[] BATCH_SIZES = {100, 500};
    static final int[] CONNECTIONS = {1, 8};
    static final List<String> SINGLE =
            List.of("naive", "floor", "floor-per-event", "floor-checked", "once", "floor-at-commit", "once-at-commit");
    static final List<String> BATCHED =
            List.of("naive", "floor-set", "floor-pipelined", "floor-per-event", "once", "once-set");
    static final String CONSUMER = "bench";
    // With --fingerprint: once again, keeping payload fingerprints, measured with the rest of its group.
    static final String FINGERPRINT = "-fingerprint";

    // The floor's statements, on the same table, stamped by the server (now(): no bind at all, the
    // cheapest a hand-written loop can do). The per-event claim is the plain insert a careful hand
    // writes (and Eventuate Tram sends): a copy fails on the key and its transaction rolls back; ON
    // CONFLICT costs the server more on every claim (see PostgresDialect.claimNew).
    static final String FLOOR_CLAIM = "INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES (?, ?, now())";
    static final String FLOOR_CLAIM_ALL = "INSERT INTO once_inbox (consumer, event_id, processed_at)"
            + " SELECT ?, t.m, now() FROM unnest(?::varchar[]) WITH ORDINALITY AS t(m, n) ORDER BY t.n"
            + " ON CONFLICT DO NOTHING RETURNING event_id";
    // The batch floors claim as the engine's owned batches do on PostgreSQL: a plain insert first (no
    // speculative insertion, no RETURNING: every id new is the common case), FLOOR_CLAIM_ALL only after a
    // unique violation rolled it back.
    static final String FLOOR_CLAIM_ALL_NEW = "INSERT INTO once_inbox (consumer, event_id, processed_at)"
            + " SELECT ?, t.m, now() FROM unnest(?::varchar[]) WITH ORDINALITY AS t(m, n) ORDER BY t.n";
    // One statement, one round trip: the update runs only when the claim inserted a row. In
    // auto-commit the statement is its own transaction, so claim and effect commit together.
    static final String FLOOR_CLAIM_AND_CREDIT = "WITH claim AS (INSERT INTO once_inbox (consumer, event_id,"
            + " processed_at) VALUES (?, ?, now()) ON CONFLICT DO NOTHING RETURNING 1)"
            + " UPDATE account SET balance = balance + ? WHERE id = ? AND EXISTS (SELECT 1 FROM claim)";

    // ClaimTiming.AT_COMMIT's shape by hand: the effect first (with BEGIN), then the claim as a plain
    // insert and the COMMIT in one round trip; a unique violation (a copy) rolls the effect back.
    static final String FLOOR_CLAIM_AND_COMMIT =
            "INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES (?, ?, now()); COMMIT";

    // The engine's claim check folded into the commit, as PostgresDialect.verifyClaimAndCommit writes it.
    static final String FLOOR_CHECK_AND_COMMIT = "SELECT 1 / count(*) FROM once_inbox WHERE consumer = ?"
            + " AND event_id = ? AND xmin::text::bigint = txid_current_if_assigned() % 4294967296; COMMIT";

    @Override
    public String name() {
        return "core";
    }

    /** A group of configurations measured together: one mode family, connection count and batch size. */
    record Group(String family, int conns, int batch) {
        List<String> names(boolean fingerprint) {
            List<String> names = new ArrayList<>(family.equals("single") ? SINGLE : BATCHED);
            if (fingerprint) {
                names.add("once" + FINGERPRINT);
                if (!family.equals("single")) {
                    names.add("once-set" + FINGERPRINT);
                }
            }
            return names;
        }
    }

    static List<Group> groups() {
        List<Group> groups = new ArrayList<>();
        for (int conns : CONNECTIONS) {
            groups.add(new Group("single", conns, 1));
        }
        for (int batch : BATCH_SIZES) {
            for (int conns : CONNECTIONS) {
                groups.add(new Group("batch", conns, batch));
            }
        }
        return groups;
    }

    @Override
    public void run(Run run) throws Exception {
        Map<String, Throughput.Rate> results = new HashMap<>();
        boolean fingerprint = run.settings().fingerprint();
        for (Group g : groups()) {
            List<String> names = g.names(fingerprint);
            List<BenchPostgres.Db> dbs = new ArrayList<>();
            try {
                List<Throughput.Config> configs = new ArrayList<>();
                for (String name : names) {
                    BenchPostgres.Db db = run.postgres().freshDatabase(g.conns());
                    dbs.add(db);
                    configs.add(new Throughput.Config(name, g.conns(), steps(name, db, g.batch())));
                }
                run.postgres().checkpoint();
                List<Throughput.Rate> rates = Throughput.measure(
                        configs,
                        run.settings().warmup(),
                        run.settings().measured(),
                        run.settings().slice());
                for (int i = 0; i < names.size(); i++) {
                    String name = names.get(i);
                    results.put(key(name, g), rates.get(i));
                    run.line(Run.bench(
                            benchName(name),
                            mode(name, g),
                            g.conns(),
                            g.batch(),
                            rates.get(i).eventsPerSecond()));
                }
            } finally {
                dbs.forEach(BenchPostgres.Db::close);
            }
        }
        run.section("Core: naive vs hand-written floor vs once", table(results));
        if (fingerprint) {
            run.section("Core: the cost of payload fingerprints", fingerprintTable(results));
        }
    }

    private static String fingerprintTable(Map<String, Throughput.Rate> rates) {
        StringBuilder md = new StringBuilder();
        md.append("Events/s of `once` with `onMismatch(MismatchPolicy.COUNT)` (the claim keeps a payload")
                .append(" fingerprint) against `once` without, in the same interleaved group; every event is new, so")
                .append(" this is the applied path (a duplicate costs one more read).\n\n")
                .append("| mode | conns | events/tx | once | with fingerprint | ratio | ratio, paired |\n")
                .append("|---|---|---|---|---|---|---|\n");
        for (Group g : groups()) {
            for (String name : g.family().equals("single") ? List.of("once") : List.of("once", "once-set")) {
                Throughput.Rate plain = rates.get(key(name, g));
                Throughput.Rate with = rates.get(key(name + FINGERPRINT, g));
                md.append(String.format(
                        Locale.ROOT,
                        "| %s | %d | %d | %,.0f | %,.0f | %.3f | %.3f |%n",
                        mode(name, g),
                        g.conns(),
                        g.batch(),
                        plain.eventsPerSecond(),
                        with.eventsPerSecond(),
                        with.eventsPerSecond() / plain.eventsPerSecond(),
                        with.pairedRatio(plain)));
            }
        }
        return md.toString();
    }

    /** The name in the BENCH line: {@code once-set} is {@code once} in mode {@code batch-set}. */
    static String benchName(String name) {
        return name.equals("once-set") ? "once" : name.equals("once-set" + FINGERPRINT) ? "once" + FINGERPRINT : name;
    }

    static String mode(String name, Group g) {
        if (g.family().equals("single")) {
            return "single";
        }
        return switch (name) {
            case "once-set", "once-set" + FINGERPRINT, "floor-set" -> "batch-set";
            case "floor-pipelined" -> "batch-pipelined";
            default -> "batch";
        };
    }

    /** The target line per connection count: {@code name} at least 0.95x {@code floor} in one event per transaction. */
    private static void perMessageTarget(
            StringBuilder md, Map<String, Throughput.Rate> rates, String name, String floor, String target) {
        for (int conns : CONNECTIONS) {
            Group single = new Group("single", conns, 1);
            double r = eps(rates, name, single) / eps(rates, floor, single);
            double p = rates.get(key(name, single)).pairedRatio(rates.get(key(floor, single)));
            md.append(check(
                    String.format(Locale.ROOT, "%s (%s) at %d conns: %.3f (paired %.3f)", target, floor, conns, r, p),
                    r >= 0.95));
        }
    }

    static String key(String name, Group g) {
        return name + "/" + g.family() + "/" + g.conns() + "/" + g.batch();
    }

    private static Throughput.StepFactory steps(String name, BenchPostgres.Db db, int batch) {
        return switch (name) {
            case "naive" -> i -> new Naive(db, new Throughput.Events(name, i), batch);
            case "floor", "floor-set", "floor-pipelined", "floor-per-event", "floor-checked", "floor-at-commit" ->
                i -> new Floor(db, new Throughput.Events(name, i), batch, name);
            case "once" ->
                onceSteps(
                        IdempotentConsumer.builder()
                                .dataSource(db.dataSource())
                                .consumer(CONSUMER)
                                .handler(Ledger.ONCE_HANDLER)
                                .build(),
                        batch);
            case "once-at-commit" ->
                onceSteps(
                        IdempotentConsumer.builder()
                                .dataSource(db.dataSource())
                                .consumer(CONSUMER)
                                .claimTiming(ClaimTiming.AT_COMMIT)
                                .handler(Ledger.ONCE_HANDLER)
                                .build(),
                        batch);
            case "once-set" ->
                onceSteps(
                        IdempotentConsumer.builder()
                                .dataSource(db.dataSource())
                                .consumer(CONSUMER)
                                .batchHandler(Ledger.ONCE_BATCH_HANDLER)
                                .build(),
                        batch);
            case "once" + FINGERPRINT ->
                onceSteps(
                        IdempotentConsumer.builder()
                                .dataSource(db.dataSource())
                                .consumer(CONSUMER)
                                .handler(Ledger.ONCE_HANDLER)
                                .onMismatch(MismatchPolicy.COUNT)
                                .build(),
                        batch);
            case "once-set" + FINGERPRINT ->
                onceSteps(
                        IdempotentConsumer.builder()
                                .dataSource(db.dataSource())
                                .consumer(CONSUMER)
                                .batchHandler(Ledger.ONCE_BATCH_HANDLER)
                                .onMismatch(MismatchPolicy.COUNT)
                                .build(),
                        batch);
            default -> throw new IllegalArgumentException("no configuration named '" + name + "'");
        };
    }

    /** {@code once}'s steps: {@code process} per event when {@code batch} is 1, else {@code processBatch}. */
    static Throughput.StepFactory onceSteps(IdempotentConsumer consumer, int batch) {
        return i -> {
            Throughput.Events events = new Throughput.Events("once", i);
            if (batch == 1) {
                return () -> {
                    Event e = events.next();
                    expectApplied(consumer.process(Delivery.of(e.id(), e.payload())));
                    return 1;
                };
            }
            return () -> {
                List<Delivery> deliveries = new ArrayList<>(batch);
                for (int k = 0; k < batch; k++) {
                    Event e = events.next();
                    deliveries.add(Delivery.of(e.id(), e.payload()));
                }
                for (Outcome o : consumer.processBatch(deliveries)) {
                    expectApplied(o);
                }
                return batch;
            };
        };
    }

    private static void expectApplied(Outcome o) {
        if (o.status() != Outcome.Status.APPLIED) {
            throw new IllegalStateException(
                    "every benchmark event is new, but " + o.eventId() + " came out " + o.status(), o.failure());
        }
    }

    /** The naive consumer: the update alone, auto-commit per event, or one transaction per batch. */
    private static final class Naive implements Throughput.Step, AutoCloseable {
        private final Connection c;
        private final PreparedStatement credit;
        private final Throughput.Events events;
        private final int batch;

        Naive(BenchPostgres.Db db, Throughput.Events events, int batch) throws SQLException {
            this.c = db.dataSource().getConnection();
            this.c.setAutoCommit(batch == 1);
            this.credit = c.prepareStatement(Ledger.CREDIT);
            this.events = events;
            this.batch = batch;
        }

        @Override
        public int run() throws SQLException {
            for (int k = 0; k < batch; k++) {
                Event e = events.next();
                String payload = e.payload();
                credit.setLong(1, Event.amount(payload));
                credit.setLong(2, Event.account(payload));
                credit.executeUpdate();
            }
            if (batch > 1) {
                c.commit();
            }
            return batch;
        }

        @Override
        public void close() throws SQLException {
            credit.close();
            c.setAutoCommit(true);
            c.close();
        }
    }

    /**
     * A floor: what a careful hand-written JDBC loop does for the same guarantee, one held
     * connection, statements prepared once. The variant names the shape (see the class comment).
     */
    static final class Floor implements Throughput.Step, AutoCloseable {
        private final Connection c;
        private final PreparedStatement claim;
        private final PreparedStatement checkAndCommit;
        private final PreparedStatement claimAndCommit;
        private final PreparedStatement claimAndCredit;
        private final PreparedStatement claimAll;
        private final PreparedStatement claimAllNew;
        private final PreparedStatement credit;
        private final PreparedStatement creditAll;
        private final Throughput.Events events;
        private final int batch;
        private final String variant;

        Floor(BenchPostgres.Db db, Throughput.Events events, int batch, String variant) throws SQLException {
            this.c = db.dataSource().getConnection();
            this.c.setAutoCommit(variant.equals("floor"));
            this.claim = c.prepareStatement(FLOOR_CLAIM);
            this.checkAndCommit = c.prepareStatement(FLOOR_CHECK_AND_COMMIT);
            this.claimAndCommit = c.prepareStatement(FLOOR_CLAIM_AND_COMMIT);
            this.claimAndCredit = c.prepareStatement(FLOOR_CLAIM_AND_CREDIT);
            this.claimAll = c.prepareStatement(FLOOR_CLAIM_ALL);
            this.claimAllNew = c.prepareStatement(FLOOR_CLAIM_ALL_NEW);
            this.credit = c.prepareStatement(Ledger.CREDIT);
            this.creditAll = c.prepareStatement(Ledger.CREDIT_ALL);
            this.events = events;
            this.batch = batch;
            this.variant = variant;
        }

        @Override
        public int run() throws SQLException {
            if (batch > 1) {
                return runBatch();
            }
            return switch (variant) {
                case "floor" -> runOneStatement();
                case "floor-at-commit" -> runClaimAtCommit();
                default -> runOne();
            };
        }

        private int runClaimAtCommit() throws SQLException {
            Event e = events.next();
            credit(e.payload());
            claimAndCommit.setString(1, CONSUMER);
            claimAndCommit.setString(2, e.id());
            try {
                claimAndCommit.execute(); // the server ran the COMMIT: the driver's commit sends nothing
            } catch (SQLException x) {
                if (!"23505".equals(x.getSQLState())) {
                    throw x;
                }
                c.rollback(); // a copy: its effect goes with the rollback
                return 1;
            }
            c.commit();
            return 1;
        }

        private int runOneStatement() throws SQLException {
            Event e = events.next();
            claimAndCredit.setString(1, CONSUMER);
            claimAndCredit.setString(2, e.id());
            claimAndCredit.setLong(3, e.amount());
            claimAndCredit.setLong(4, e.account());
            claimAndCredit.executeUpdate();
            return 1;
        }

        private int runOne() throws SQLException {
            Event e = events.next();
            claim.setString(1, CONSUMER);
            claim.setString(2, e.id());
            try {
                claim.executeUpdate();
            } catch (SQLException x) {
                if (!"23505".equals(x.getSQLState())) {
                    throw x;
                }
                c.rollback(); // a copy claimed before: nothing else was done
                return 1;
            }
            credit(e.payload());
            if (variant.equals("floor-checked")) {
                checkAndCommit.setString(1, CONSUMER); // 1 consumer
                checkAndCommit.setString(2, e.id()); // 2 event_id
                checkAndCommit.execute(); // the server ran the COMMIT: the driver's commit sends nothing
            }
            c.commit();
            return 1;
        }

        private int runBatch() throws SQLException {
            Event[] events = new Event[batch];
            String[] ids = new String[batch];
            for (int k = 0; k < batch; k++) {
                events[k] = this.events.next();
                ids[k] = events[k].id();
            }
            Arrays.sort(ids); // one lock order across workers, as the engine does
            Array array = c.createArrayOf("varchar", ids);
            Set<String> claimed = new HashSet<>(batch * 2);
            try {
                claimAllNew.setString(1, CONSUMER);
                claimAllNew.setArray(2, array);
                claimAllNew.executeUpdate();
                claimed.addAll(Arrays.asList(ids));
            } catch (SQLException e) {
                if (!"23505".equals(e.getSQLState())) {
                    throw e;
                }
                c.rollback(); // one id was claimed before: claim again, learning which were new
                claimAll.setString(1, CONSUMER);
                claimAll.setArray(2, array);
                try (ResultSet rs = claimAll.executeQuery()) {
                    while (rs.next()) {
                        claimed.add(rs.getString(1));
                    }
                }
            }
            array.free();
            switch (variant) {
                case "floor-set" -> {
                    // Pre-aggregated per account (an UPDATE … FROM applies one joined row per target
                    // row, so two credits of one account in the batch must be summed first) and
                    // sorted, so concurrent batches lock accounts in one order.
                    TreeMap<Long, Long> perAccount = new TreeMap<>();
                    for (Event e : events) {
                        if (claimed.contains(e.id())) {
                            perAccount.merge(e.account(), e.amount(), Long::sum);
                        }
                    }
                    Ledger.creditAll(c, creditAll, perAccount);
                }
                case "floor-pipelined" -> {
                    for (Event e : events) {
                        if (claimed.contains(e.id())) {
                            credit.setLong(1, e.amount());
                            credit.setLong(2, e.account());
                            credit.addBatch();
                        }
                    }
                    credit.executeBatch();
                }
                default -> {
                    for (Event e : events) {
                        if (claimed.contains(e.id())) {
                            credit(e.payload());
                        }
                    }
                }
            }
            c.commit();
            return batch;
        }

        private void credit(String payload) throws SQLException {
            credit.setLong(1, Event.amount(payload));
            credit.setLong(2, Event.account(payload));
            credit.executeUpdate();
        }

        @Override
        public void close() throws SQLException {
            claim.close();
            checkAndCommit.close();
            claimAndCredit.close();
            claimAll.close();
            credit.close();
            creditAll.close();
            if (!c.getAutoCommit()) {
                c.rollback();
            }
            c.setAutoCommit(true);
            c.close();
        }
    }

    private static String table(Map<String, Throughput.Rate> rates) {
        StringBuilder md = new StringBuilder();
        md.append("Events/s. The configurations of one row run interleaved (see settings), each on a fresh schema.")
                .append(" Floors (hand-written JDBC, one held connection, statements prepared once): single `floor` is")
                .append(" the claim and the update in one statement (a data-modifying CTE) in auto-commit, one round")
                .append(" trip per event; `floor-per-event` is the old floor, claim (a plain insert; a copy's unique"
                        + " violation rolls back) + update + commit. Batched `floor-set`")
                .append(
                        " is one `unnest` claim of the sorted ids + one `UPDATE … FROM unnest(?::bigint[], ?::bigint[])`")
                .append(
                        " pre-aggregated per account and sorted + one commit; `floor-pipelined` is the same claim + one")
                .append(" JDBC batch of the updates + one commit; `floor-per-event` (the old floor) is the claim + one")
                .append(" `executeUpdate` per event + one commit. The floor of a batched row is the faster of")
                .append(" `floor-set` and `floor-pipelined`. `once` runs the per-event `Handler` (`process`, or")
                .append(" `processBatch` with one `UPDATE` per event); `once batch-set` runs a `BatchHandler` applying")
                .append(
                        " the batch with the same set-based `UPDATE` as `floor-set`. \"paired\" is the median over turns")
                .append(" of the ratio between turns adjacent in time, the figure least moved by load drift.\n\n");
        md.append("One event per transaction:\n\n");
        md.append(
                        "| conns | naive | floor | floor-per-event | floor-checked | once | once / floor | once / floor, paired")
                .append(" | once / floor-per-event | once / floor-per-event, paired | once / floor-checked, paired")
                .append(" | once / naive |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (Group g : groups()) {
            if (!g.family().equals("single")) {
                continue;
            }
            md.append(String.format(
                    Locale.ROOT,
                    "| %d | %,.0f | %,.0f | %,.0f | %,.0f | %,.0f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |%n",
                    g.conns(),
                    eps(rates, "naive", g),
                    eps(rates, "floor", g),
                    eps(rates, "floor-per-event", g),
                    eps(rates, "floor-checked", g),
                    eps(rates, "once", g),
                    eps(rates, "once", g) / eps(rates, "floor", g),
                    rates.get(key("once", g)).pairedRatio(rates.get(key("floor", g))),
                    eps(rates, "once", g) / eps(rates, "floor-per-event", g),
                    rates.get(key("once", g)).pairedRatio(rates.get(key("floor-per-event", g))),
                    rates.get(key("once", g)).pairedRatio(rates.get(key("floor-checked", g))),
                    eps(rates, "once", g) / eps(rates, "naive", g)));
        }
        md.append("\nThe client's share, one event per transaction: CPU time and heap allocated per event by the")
                .append(" worker threads while measured (JVM thread counters; the driver and pool included, the")
                .append(" server not). Load moves these far less than the rates.\n\n")
                .append(
                        "| conns | configuration | client CPU µs / event | bytes allocated / event |\n|---|---|---|---|\n");
        for (Group g : groups()) {
            if (!g.family().equals("single")) {
                continue;
            }
            for (String name : SINGLE) {
                Throughput.Rate r = rates.get(key(name, g));
                md.append(String.format(
                        Locale.ROOT,
                        "| %d | %s | %.1f | %,.0f |%n",
                        g.conns(),
                        name,
                        r.cpuMicrosPerEvent(),
                        r.bytesPerEvent()));
            }
        }
        md.append("\nThe claim at commit (`ClaimTiming.AT_COMMIT`: the handler first, then the claim as a plain insert")
                .append(
                        " in the COMMIT's round trip, two round trips per event instead of three) beside the same shape")
                .append(" written by hand (`floor-at-commit`) and the default claim-first path:\n\n")
                .append("| conns | floor-at-commit | once-at-commit | once-at-commit / floor-at-commit, paired")
                .append(" | once-at-commit / floor-per-event, paired | once-at-commit / once, paired |\n")
                .append("|---|---|---|---|---|---|\n");
        for (Group g : groups()) {
            if (!g.family().equals("single")) {
                continue;
            }
            Throughput.Rate atCommit = rates.get(key("once-at-commit", g));
            md.append(String.format(
                    Locale.ROOT,
                    "| %d | %,.0f | %,.0f | %.3f | %.3f | %.3f |%n",
                    g.conns(),
                    eps(rates, "floor-at-commit", g),
                    eps(rates, "once-at-commit", g),
                    atCommit.pairedRatio(rates.get(key("floor-at-commit", g))),
                    atCommit.pairedRatio(rates.get(key("floor-per-event", g))),
                    atCommit.pairedRatio(rates.get(key("once", g)))));
        }
        md.append("\nBatched:\n\n");
        md.append("| conns | events/tx | naive | floor-set | floor-pipelined | floor-per-event | once | once batch-set")
                .append(" | batch-set / floor | batch-set / floor, paired | batch-set / once per-message |")
                .append(" once / floor-per-event |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (Group g : groups()) {
            if (g.family().equals("single")) {
                continue;
            }
            Group single = new Group("single", g.conns(), 1);
            md.append(String.format(
                    Locale.ROOT,
                    "| %d | %d | %,.0f | %,.0f | %,.0f | %,.0f | %,.0f | %,.0f | %.3f | %.3f | %.1fx | %.3f |%n",
                    g.conns(),
                    g.batch(),
                    eps(rates, "naive", g),
                    eps(rates, "floor-set", g),
                    eps(rates, "floor-pipelined", g),
                    eps(rates, "floor-per-event", g),
                    eps(rates, "once", g),
                    eps(rates, "once-set", g),
                    eps(rates, "once-set", g) / floor(rates, g),
                    rates.get(key("once-set", g)).pairedRatio(rates.get(key(floorName(rates, g), g))),
                    eps(rates, "once-set", g) / eps(rates, "once", single),
                    eps(rates, "once", g) / eps(rates, "floor-per-event", g)));
        }
        md.append("\nTargets:\n\n");
        Group target = new Group("batch", 8, BATCH);
        double ratio = eps(rates, "once-set", target) / floor(rates, target);
        double paired =
                rates.get(key("once-set", target)).pairedRatio(rates.get(key(floorName(rates, target), target)));
        String text = String.format(
                Locale.ROOT,
                "once batch-set, %d/tx, 8 conns >= 0.95x the hand-written floor (%s):" + " %.3f (paired %.3f)",
                BATCH,
                floorName(rates, target),
                ratio,
                paired);
        md.append(
                ratio < 0.95 && paired >= 0.95
                        ? "- met on the paired ratio only: " + text + "\n"
                        : check(text, ratio >= 0.95));
        perMessageTarget(
                md,
                rates,
                "once",
                "floor-per-event",
                "once per-message >= 0.95x the hand-written" + " BEGIN + claim + effect + COMMIT");
        perMessageTarget(
                md,
                rates,
                "once-at-commit",
                "floor-at-commit",
                "once per-message with the claim at commit" + " >= 0.95x the same shape by hand");
        for (int conns : CONNECTIONS) {
            double x = eps(rates, "once-set", new Group("batch", conns, BATCH))
                    / eps(rates, "once", new Group("single", conns, 1));
            md.append(check(
                    String.format(
                            Locale.ROOT,
                            "once batch-set, %d/tx >= 10x once per-message at %d conns: %.1fx",
                            BATCH,
                            conns,
                            x),
                    x >= 10));
        }
        for (Group g : groups()) {
            String floorName = g.family().equals("single") ? "floor" : floorName(rates, g);
            String name = g.family().equals("single") ? "once" : "once-set";
            double r = eps(rates, name, g) / eps(rates, floorName, g);
            md.append(String.format(
                    Locale.ROOT,
                    "- (for reference) %s %s, %d conns, %d/tx vs %s: %.3f%n",
                    benchName(name),
                    mode(name, g),
                    g.conns(),
                    g.batch(),
                    floorName,
                    r));
        }
        return md.toString();
    }

    private static double eps(Map<String, Throughput.Rate> rates, String name, Group g) {
        return rates.get(key(name, g)).eventsPerSecond();
    }

    /** The faster of the set-based and the pipelined floor of a batched group. */
    private static String floorName(Map<String, Throughput.Rate> rates, Group g) {
        return eps(rates, "floor-set", g) >= eps(rates, "floor-pipelined", g) ? "floor-set" : "floor-pipelined";
    }

    private static double floor(Map<String, Throughput.Rate> rates, Group g) {
        return eps(rates, floorName(rates, g), g);
    }

    static String check(String text, boolean met) {
        return "- " + (met ? "met" : "**missed**") + ": " + text + "\n";
    }
}
