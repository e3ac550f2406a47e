package dev.once.bench;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Issue 7: {@code once} side by side with Apache Camel, Eventuate Tram and Spring Integration on
 * the same PostgreSQL, handler and workload. Throughput at 1 and 8 workers, one event per
 * transaction (and 100 per transaction for {@code once}), then the four correctness cases for each.
 */
final class PeersSuite implements Suite {

    static final int[] WORKERS = {1, 8};

    /** CoreSuite's hand-written BEGIN + plain-insert claim + effect + COMMIT, one held connection per worker. */
    static final String FLOOR = "floor-per-event";

    @Override
    public String name() {
        return "peers";
    }

    @Override
    public void run(Run run) throws Exception {
        List<Subject.Kind> kinds = Subjects.all();
        // Configurations in measuring order: every subject per message, then once batched.
        List<String[]> configs = new ArrayList<>();
        for (Subject.Kind k : kinds) {
            configs.add(new String[] {k.name(), "single"});
        }
        configs.add(new String[] {"once", "batch"});
        configs.add(new String[] {"once", "batch-set"});
        // The hand-written floor in the same run, so every subject's distance from it is a same-process ratio.
        configs.add(new String[] {FLOOR, "single"});

        Map<String, Double> results = new LinkedHashMap<>();
        Map<String, Throughput.Rate> rateOf = new LinkedHashMap<>();
        for (int workers : WORKERS) {
            List<BenchPostgres.Db> dbs = new ArrayList<>();
            List<Subject> subjects = new ArrayList<>();
            try {
                List<Throughput.Config> measured = new ArrayList<>();
                for (String[] config : configs) {
                    BenchPostgres.Db db = run.postgres().freshDatabase(workers);
                    dbs.add(db);
                    if (config[0].equals(FLOOR)) {
                        measured.add(new Throughput.Config(
                                FLOOR + "-single",
                                workers,
                                i -> new CoreSuite.Floor(db, new Throughput.Events(FLOOR, i), 1, FLOOR)));
                        continue;
                    }
                    Subject.Kind kind = Subjects.byName(config[0]);
                    kind.createStore(db.dataSource());
                    Subject subject =
                            config[1].equals("batch-set") ? onceBatchSet(db.dataSource()) : kind.open(db.dataSource());
                    subjects.add(subject);
                    measured.add(new Throughput.Config(
                            config[0] + "-" + config[1],
                            workers,
                            steps(kind.name(), subject, !config[1].equals("single"))));
                }
                run.postgres().checkpoint();
                List<Throughput.Rate> rates = Throughput.measure(
                        measured,
                        run.settings().warmup(),
                        run.settings().measured(),
                        run.settings().slice());
                for (int i = 0; i < configs.size(); i++) {
                    double x = rates.get(i).eventsPerSecond();
                    results.put(configs.get(i)[0] + "/" + configs.get(i)[1] + "/" + workers, x);
                    rateOf.put(configs.get(i)[0] + "/" + configs.get(i)[1] + "/" + workers, rates.get(i));
                    run.line(Run.bench(configs.get(i)[0], configs.get(i)[1], workers, null, x));
                }
            } finally {
                for (Subject s : subjects) {
                    s.close();
                }
                dbs.forEach(BenchPostgres.Db::close);
            }
        }

        Correctness correctness = new Correctness(run.postgres(), run.settings().quick());
        List<Correctness.Result> verdicts = new ArrayList<>();
        for (Subject.Kind kind : kinds) {
            for (String kase : Correctness.CASES) {
                long start = System.nanoTime();
                Correctness.Result result = correctness.run(kind, kase);
                verdicts.add(result);
                run.line(result.line());
                Run.progress(String.format(
                        Locale.ROOT,
                        "correctness %s %s took %.1f s",
                        kind.name(),
                        kase,
                        (System.nanoTime() - start) / 1e9));
            }
        }
        run.section(
                "Peers: Camel, Eventuate Tram, Spring Integration",
                report(kinds, results, rateOf, verdicts, run.settings()));
    }

    /** {@code once} with the set-based batch handler, {@code processBatch} of 100 per call. */
    private static Subject onceBatchSet(javax.sql.DataSource dataSource) {
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(dataSource)
                .consumer(Subjects.CONSUMER)
                .batchHandler(Ledger.ONCE_BATCH_HANDLER)
                .build();
        return new Subject() {
            @Override
            public boolean deliver(Event e) {
                return consumer.process(Delivery.of(e.id(), e.payload())).shouldAcknowledge();
            }

            @Override
            public List<Boolean> deliverBatch(List<Event> events) {
                List<Delivery> deliveries = new ArrayList<>(events.size());
                for (Event e : events) {
                    deliveries.add(Delivery.of(e.id(), e.payload()));
                }
                return consumer.processBatch(deliveries).stream()
                        .map(Outcome::shouldAcknowledge)
                        .toList();
            }
        };
    }

    private static Throughput.StepFactory steps(String name, Subject subject, boolean batch) {
        return i -> {
            Throughput.Events events = new Throughput.Events(name, i);
            if (!batch) {
                return () -> {
                    Event e = events.next();
                    if (!subject.deliver(e)) {
                        throw new IllegalStateException(name + " did not acknowledge new event " + e.id());
                    }
                    return 1;
                };
            }
            return () -> {
                List<Event> list = new ArrayList<>(CoreSuite.BATCH);
                for (int k = 0; k < CoreSuite.BATCH; k++) {
                    list.add(events.next());
                }
                if (subject.deliverBatch(list).contains(Boolean.FALSE)) {
                    throw new IllegalStateException(name + " did not acknowledge a batch of new events");
                }
                return CoreSuite.BATCH;
            };
        };
    }

    private static String report(
            List<Subject.Kind> kinds,
            Map<String, Double> r,
            Map<String, Throughput.Rate> rates,
            List<Correctness.Result> verdicts,
            Run.Settings settings) {
        StringBuilder md = new StringBuilder();
        md.append("Same PostgreSQL, same ledger handler (`")
                .append(Ledger.CREDIT)
                .append("`), each dedupe store in the")
                .append(" same fresh schema as the ledger. One event per transaction unless batched; all rows of one")
                .append(" worker count run interleaved (see settings). Workers = threads = pool connections.\n\n");
        md.append("What runs:\n\n");
        for (Subject.Kind k : kinds) {
            md.append("- **")
                    .append(k.name())
                    .append("**: ")
                    .append(k.description())
                    .append('\n');
        }
        md.append("- **")
                .append(FLOOR)
                .append("**: no library, the core suite's hand-written floor: one held connection per worker,")
                .append(" statements prepared once, BEGIN + the claim as a plain `INSERT` into `once_inbox` (a copy's")
                .append(" unique violation rolls back) + the same `UPDATE` + COMMIT; throughput only.\n");
        md.append(
                "\n| subject | mode | events/s, 1 worker | events/s, 8 workers | vs once per-message, 1 | vs once per-message, 8 |\n");
        md.append("|---|---|---|---|---|---|\n");
        List<String> rows = new ArrayList<>();
        for (Subject.Kind k : kinds) {
            rows.add(k.name() + "/single");
        }
        rows.add("once/batch");
        rows.add("once/batch-set");
        rows.add(FLOOR + "/single");
        for (String row : rows) {
            double one = r.get(row + "/1");
            double eight = r.get(row + "/8");
            md.append(String.format(
                    Locale.ROOT,
                    "| %s | %s | %,.0f | %,.0f | %.2f | %.2f |%n",
                    row.split("/")[0],
                    row.split("/")[1],
                    one,
                    eight,
                    one / r.get("once/single/1"),
                    eight / r.get("once/single/8")));
        }
        String fastest = null;
        for (Subject.Kind k : kinds) {
            if (!k.name().startsWith("once")
                    && (fastest == null || r.get(k.name() + "/single/8") > r.get(fastest + "/single/8"))) {
                fastest = k.name();
            }
        }
        double fastest8 = r.get(fastest + "/single/8");
        double batchRatio = r.get("once/batch-set/8") / fastest8;
        double singleRatio = r.get("once/single/8") / fastest8;
        double batchPaired = rates.get("once/batch-set/8").pairedRatio(rates.get(fastest + "/single/8"));
        double singlePaired = rates.get("once/single/8").pairedRatio(rates.get(fastest + "/single/8"));
        md.append("\nTargets (fastest peer at 8 workers: ")
                .append(fastest)
                .append("; \"paired\" is the median over")
                .append(" turns of the ratio between turns adjacent in time):\n\n");
        md.append(CoreSuite.check(
                String.format(
                        Locale.ROOT,
                        "once batched (batch handler, 100/tx) >= 10x the fastest peer at 8 workers: %.1fx (paired %.1fx)",
                        batchRatio,
                        batchPaired),
                batchRatio >= 10));
        md.append(CoreSuite.check(
                String.format(
                        Locale.ROOT,
                        "once per-message >= 1.1x the fastest peer at 8 workers: %.2fx (paired %.2fx)",
                        singleRatio,
                        singlePaired),
                singleRatio >= 1.1));
        double single1 = r.get("once/single/1");
        String fastest1 = null;
        for (Subject.Kind k : kinds) {
            if (!k.name().startsWith("once")
                    && (fastest1 == null || r.get(k.name() + "/single/1") > r.get(fastest1 + "/single/1"))) {
                fastest1 = k.name();
            }
        }
        md.append(CoreSuite.check(
                String.format(
                        Locale.ROOT,
                        "once per-message >= 1.1x the fastest peer at 1 worker (%s): %.2fx (paired %.2fx)",
                        fastest1,
                        single1 / r.get(fastest1 + "/single/1"),
                        rates.get("once/single/1").pairedRatio(rates.get(fastest1 + "/single/1"))),
                single1 / r.get(fastest1 + "/single/1") >= 1.1));
        for (int workers : WORKERS) {
            String peer = workers == 1 ? fastest1 : fastest;
            String at = "once-at-commit/single/" + workers;
            double x = r.get(at) / r.get(peer + "/single/" + workers);
            md.append(CoreSuite.check(
                    String.format(
                            Locale.ROOT,
                            "once per-message with the claim at commit (ClaimTiming.AT_COMMIT) >= 1.1x the fastest peer"
                                    + " at %d worker%s (%s): %.2fx (paired %.2fx)",
                            workers,
                            workers == 1 ? "" : "s",
                            peer,
                            x,
                            rates.get(at).pairedRatio(rates.get(peer + "/single/" + workers))),
                    x >= 1.1));
        }
        for (int workers : WORKERS) {
            Throughput.Rate floor = rates.get(FLOOR + "/single/" + workers);
            StringBuilder line = new StringBuilder();
            for (Subject.Kind k : kinds) {
                Throughput.Rate rate = rates.get(k.name() + "/single/" + workers);
                line.append(line.length() == 0 ? "" : ", ")
                        .append(String.format(
                                Locale.ROOT,
                                "%s %.2f (paired %.2f)",
                                k.name(),
                                rate.eventsPerSecond() / floor.eventsPerSecond(),
                                rate.pairedRatio(floor)));
            }
            md.append(String.format(
                    Locale.ROOT,
                    "- (for reference) per message / the hand-written %s in this run, %d worker%s: %s%n",
                    FLOOR,
                    workers,
                    workers == 1 ? "" : "s",
                    line));
        }
        md.append("\nThe client's share per event, one event per transaction (CPU time and heap allocated by the"
                + " worker threads while measured; driver, pool and framework included, the server not):\n\n"
                + "| subject | workers | client CPU µs / event | bytes allocated / event |\n|---|---|---|---|\n");
        for (int workers : WORKERS) {
            for (Subject.Kind k : kinds) {
                Throughput.Rate rate = rates.get(k.name() + "/single/" + workers);
                md.append(String.format(
                        Locale.ROOT,
                        "| %s | %d | %.1f | %,.0f |%n",
                        k.name(),
                        workers,
                        rate.cpuMicrosPerEvent(),
                        rate.bytesPerEvent()));
            }
        }

        md.append("\nCorrectness: applied twice / lost, per case (")
                .append(settings.quick() ? Correctness.ROUNDS / 10 : Correctness.ROUNDS)
                .append(" rounds for each case but the concurrent one;")
                .append(" concurrent duplicate is ")
                .append(settings.quick() ? Correctness.CONCURRENT_ROUNDS / 10 : Correctness.CONCURRENT_ROUNDS)
                .append(" rounds of ")
                .append(Correctness.THREADS)
                .append(" threads behind a barrier).\n\n");
        md.append("| subject |");
        for (String kase : Correctness.CASES) {
            md.append(' ').append(kase).append(" |");
        }
        md.append("\n|---|");
        md.append("---|".repeat(Correctness.CASES.size()));
        md.append('\n');
        for (Subject.Kind k : kinds) {
            md.append("| ").append(k.name()).append(" |");
            for (Correctness.Result v : verdicts) {
                if (v.subject().equals(k.name())) {
                    md.append(' ')
                            .append(v.appliedTwice())
                            .append(" / ")
                            .append(v.lost())
                            .append(" |");
                }
            }
            md.append('\n');
        }
        md.append("""

                How each case is made (the same harness code for every subject, `dev.once.bench.Correctness`):
                - sequential_duplicate: deliver, acknowledge, deliver the same event again.
                - crash_after_commit: the subject returns (its transaction committed), the ack is dropped, the
                  subject is closed and opened again (a restart with empty memory), the event is redelivered.
                - concurrent_duplicate: 8 threads behind a `CyclicBarrier` deliver the same event at once; every
                  copy that is not acknowledged (an exception or a not-acknowledge outcome) is redelivered.
                - identical_payloads: two events with different ids and identical payloads (same account, same
                  amount): both must apply.
                - crash_before_commit (beyond the issue's four): the process dies inside the handler, after the
                  subject's dedupe step and before the effect commits (an injected `Error` at the same point in
                  every handler, so no `catch (Exception)` cleanup runs, as in a real crash); the subject restarts
                  and the event is redelivered. A dedupe record committed in a transaction of its own stays
                  behind and the redelivery is skipped: the effect is lost.
                Every round credits an account of its own by 1, so balances count applications exactly.
                """);
        long bad = verdicts.stream()
                .filter(v -> v.subject().startsWith("once"))
                .mapToLong(v -> v.appliedTwice() + v.lost())
                .sum();
        md.append('\n')
                .append(CoreSuite.check(
                        "once applies nothing twice and loses nothing: " + bad + " effects wrong", bad == 0));
        return md.toString();
    }
}
