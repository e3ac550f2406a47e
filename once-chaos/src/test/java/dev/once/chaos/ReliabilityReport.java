package dev.once.chaos;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Writes RELIABILITY.md from the {@code CHAOS …} lines the fault tests recorded
 * ({@value Chaos#LINES}): each guarantee, the fault that tests it, the figure, the commit it ran on.
 * Run by the {@code reliability} profile of once-testkit (see README.md, "Reliability"):
 * {@code ReliabilityReport --reset LINES} before the tests, {@code ReliabilityReport LINES OUT} after.
 */
public final class ReliabilityReport {

    /** What a figure's name stands for: the guarantee, the fault injected, the test. */
    private record Claim(String guarantee, String fault, String test) {}

    private static final Map<String, Claim> CLAIMS = new LinkedHashMap<>();

    static {
        CLAIMS.put(
                "unknown-commit",
                new Claim(
                        "A commit whose outcome the client cannot know is never acknowledged, and its redelivery is absorbed (R2)",
                        "COMMIT request or the server's reply dropped at random, both sides reset (`FaultProxy`)",
                        "UnknownCommitOutcomeTest"));
        CLAIMS.put(
                "caller-transactions",
                new Claim(
                        "Where once joins the caller's transaction, what committed is applied, sent and reported APPLIED once; what rolled back (whole or to a savepoint) is absent and reported not applied (issue 19)",
                        "random sequences of begin, savepoint, rollback-to, release, commit, rollback, nested process(), processBatch with a savepoint per record and the caller's own outbox rows, and rollbacks on the connection itself (whole, or to a savepoint of its own) after process(), through ManualTransactions on plain JDBC (jqwik ActionChain; the oracle is the input)",
                        "CallerTransactionPropertyTest"));
        CLAIMS.put(
                "network-faults",
                new Claim(
                        "No event lost or applied twice through database-link faults under load; throughput comes back (R8)",
                        "link frozen 2 s, every connection reset, +200 ms per round trip for 2 s, with 10% duplicates",
                        "NetworkFaultsUnderLoadTest"));
        CLAIMS.put(
                "broker-link-",
                new Claim(
                        "No event lost or applied twice through broker-link faults under load; throughput comes back (R8)",
                        "`FaultProxy` between the consumer and RabbitMQ, Kafka (the broker advertises the proxy), NATS JetStream or Pub/Sub (Google's emulator): frozen 2 s, every connection reset, +200 ms per round trip for 2 s, with 10% duplicates",
                        "BrokerLinkFaultsTest"));
        CLAIMS.put(
                "kernel-faults",
                new Claim(
                        "No event lost or applied twice through kernel packet drops on the database link (R8)",
                        "PostgreSQL in a network namespace behind a veth pair; `tc` drops every packet both ways for 2 s (statements and commits time out), netem loss and delay where the kernel has it, 256 kbit/s for 2 s",
                        "KernelNetworkFaultsTest"));
        CLAIMS.put(
                "failover",
                new Claim(
                        "Nothing acknowledged is lost through a database failover with a synchronous standby, nothing applied twice (R14)",
                        "two PostgreSQL servers with streaming replication, one multi-host URL (`targetServerType=primary`); replication partitioned, the primary SIGKILLed, the standby promoted",
                        "DatabaseFailoverTest"));
        CLAIMS.put(
                "kafka-broker-failure",
                new Claim(
                        "Input = output through Kafka broker failures (R13)",
                        "3-broker KRaft cluster, replication 3, min.insync.replicas 2; one broker stopped mid-run (controlled shutdown, leaders move), restarted, then a second bounce",
                        "KafkaBrokerFailureTest"));
        CLAIMS.put(
                "galera-consumers",
                new Claim(
                        "Multi-primary: the same event claimed on two Galera nodes at once applies once; nothing acknowledged is lost when a node dies",
                        "three MariaDB Galera nodes of the test's own, a consumer writing through each; each raced event delivered to two nodes at once (certification conflict at commit, 1213, retried, ends DUPLICATE); 10% duplicates; one node SIGKILLed mid-run, its consumer's multi-host URL moves on",
                        "GaleraClusterTest"));
        CLAIMS.put(
                "galera-fence",
                new Claim(
                        "A superseded fencing token is refused on a Galera node that has not yet applied the newer one",
                        "the old holder writes through a node still applying a large write that the new holder's fence committed behind",
                        "GaleraClusterTest"));
        CLAIMS.put(
                "galera-lease",
                new Claim(
                        "A lease raced on two Galera nodes has one holder at a time; of two exclusive relays on two nodes, one publishes each row once",
                        "two nodes acquire one lapsed lease at the same instant, round after round (both run locally, certification refuses one: 1213, tried again, refused); then two relays, one per node, drain the outbox under one lease",
                        "GaleraClusterTest"));
        CLAIMS.put(
                "patroni-failover",
                new Claim(
                        "Nothing acknowledged is lost through a Patroni failover in synchronous mode, nothing applied twice (R14)",
                        "Patroni + etcd, two members, `synchronous_mode: true`; consumers on a multi-host URL (`targetServerType=primary`); replication partitioned, the leader's Patroni and PostgreSQL SIGKILLed, Patroni promotes the replica",
                        "PatroniFailoverTest"));
        CLAIMS.put(
                "many-",
                new Claim(
                        "Many consumer processes: no event lost or applied twice through rolling restarts, SIGKILLs and a broker bounce",
                        "four consumer JVMs in one Kafka group over 3 brokers (12 partitions, replication 3, `min.insync.replicas=2`), or competing on one RabbitMQ queue / one NATS JetStream durable consumer; 10% duplicates; rolling restarts, a SIGKILL, a Kafka broker bounce",
                        "ManyConsumerProcessesTest"));
        CLAIMS.put(
                "prune-race",
                new Claim(
                        "Pruning never lets a copy inside the redelivery horizon apply twice; a shorter retention is refused (R12)",
                        "`InboxPruner` deleting half of a large inbox while every raced event is redelivered during and after",
                        "PruningRacesRedeliveriesTest"));
        CLAIMS.put(
                "hostile-",
                new Claim(
                        "Identifiers are refused with a message naming them or stored and read back exactly (S3)",
                        "1,000 generated hostile strings: SQL metacharacters, quotes, NUL, RTL marks, lone surrogates, 10 kB, near twins",
                        "HostileInputTest"));
        CLAIMS.put(
                "secrets-in-logs",
                new Claim(
                        "A secret in payloads, headers, outbox rows or saved results never appears in a log line (S5)",
                        "every SLF4J logger at TRACE in a child JVM, every logging path exercised",
                        "SecretsNeverLoggedTest"));
        CLAIMS.put(
                "model-",
                new Claim(
                        "The protocol itself: claim → effect → commit → ack, and lease + fencing token (R11)",
                        "SPIN, exhaustive: crashes at every step, redelivery, concurrent duplicates, paused lease holders",
                        "SpinModelTest"));
    }

    private ReliabilityReport() {}

    public static void main(String[] args) throws IOException, InterruptedException {
        if (args.length == 2 && args[0].equals("--reset")) {
            Files.deleteIfExists(Path.of(args[1]));
            return;
        }
        if (args.length != 2) {
            throw new IllegalArgumentException("usage: ReliabilityReport --reset LINES | ReliabilityReport LINES OUT");
        }
        Path lines = Path.of(args[0]);
        Path out = Path.of(args[1]);
        List<String> all = Files.exists(lines) ? Files.readAllLines(lines, StandardCharsets.UTF_8) : List.of();
        String kept = Files.exists(out) ? keptSections(Files.readString(out, StandardCharsets.UTF_8)) : "";
        Files.writeString(out, render(all) + kept, StandardCharsets.UTF_8);
        System.out.println("wrote " + args[1] + " from " + all.size() + " CHAOS lines");
    }

    static String render(List<String> lines) throws IOException, InterruptedException {
        List<Map<String, String>> real = new ArrayList<>();
        List<Map<String, String>> breaks = new ArrayList<>();
        for (String line : lines) {
            Map<String, String> f = parse(line);
            (f.containsKey("break") ? breaks : real).add(f);
        }
        StringBuilder md = new StringBuilder();
        md.append("# Reliability\n\n")
                .append("Generated by `ReliabilityReport` from the fault tests' `CHAOS` lines; do not edit by hand.\n")
                .append("Regenerate with the command in README.md, section \"Reliability\".\n\n")
                .append("- commit: `")
                .append(git("rev-parse", "--short", "HEAD"))
                .append('`')
                .append(git("status", "--porcelain").isBlank() ? "" : " (with uncommitted changes)")
                .append('\n')
                .append("- run: ")
                .append(ZonedDateTime.now().format(DateTimeFormatter.ISO_OFFSET_DATE_TIME))
                .append('\n')
                .append("- machine: ")
                .append(Runtime.getRuntime().availableProcessors())
                .append(" cores, load average ")
                .append(loadAverage())
                .append(", Java ")
                .append(System.getProperty("java.version"))
                .append('\n')
                .append("- scale: ")
                .append(System.getProperty(Chaos.SCALE_PROPERTY, "1"))
                .append(" × the CI counts\n\n")
                .append(
                        "`lost` = acknowledged (or published) events whose effect is missing; `applied_twice` = events whose\n")
                .append(
                        "effect is in the database more than once. For models, `rounds` is the number of states SPIN explored.\n\n");
        md.append("## Guarantees\n\n| guarantee | fault | test | figure |\n|---|---|---|---|\n");
        // One row per test and database: a test that records several figures on one database (the
        // hostile-input test's one per identifier kind, the broker-link test's one per broker) lists
        // them in one cell instead of repeating its guarantee and fault on every line.
        for (Map.Entry<String, Claim> c : CLAIMS.entrySet()) {
            // A set: a test that records the same figure twice (two methods, or a rerun appending to the
            // same lines file) shows it once.
            Map<String, Set<String>> figuresByDb = new LinkedHashMap<>();
            for (Map<String, String> f : real) {
                if (f.get("name").startsWith(c.getKey())) {
                    figuresByDb
                            .computeIfAbsent(f.getOrDefault("db", ""), db -> new LinkedHashSet<>())
                            .add(figure(f));
                }
            }
            figuresByDb.forEach((db, figures) -> md.append("| ")
                    .append(c.getValue().guarantee())
                    .append(" | ")
                    .append(c.getValue().fault())
                    .append(" | `")
                    .append(c.getValue().test())
                    .append('`')
                    .append(db.isEmpty() ? "" : " (" + db + ")")
                    .append(" | ")
                    .append(String.join("<br>", figures))
                    .append(" |\n"));
        }
        md.append("\n## Each test can fail: the deliberate breaks\n\n")
                .append(
                        "The same scenario against a consumer or configuration broken on purpose; each figure must be non-zero.\n\n")
                .append("| test | break | figure |\n|---|---|---|\n");
        for (Map<String, String> f : breaks) {
            md.append("| ")
                    .append(f.get("name"))
                    .append(" | ")
                    .append(f.get("break"))
                    .append(" | ")
                    .append(figure(f))
                    .append(" |\n");
        }
        md.append(
                        "\n## Holes found\n\nFigures with `hole_…` fields count inputs that hit a hole found by these tests and not yet\n")
                .append(
                        "closed (see `HostileInputTest.Hole`); the strict variants of those tests, which allow no hole, run and pass.\n");
        return md.toString();
    }

    /** The sections {@link #render} writes; any other {@code ## } section of the report is kept by hand. */
    private static final List<String> GENERATED =
            List.of("## Guarantees", "## Each test can fail: the deliberate breaks", "## Holes found");

    /**
     * The sections of an existing report that this class does not write (tables of tests outside the
     * fault suite, kept by hand), in their order, so a regeneration does not drop them.
     */
    static String keptSections(String report) {
        StringBuilder kept = new StringBuilder();
        boolean keeping = false;
        for (String line : report.split("\n", -1)) {
            if (line.startsWith("## ")) {
                keeping = !GENERATED.contains(line.strip());
            }
            if (keeping) {
                kept.append(line).append('\n');
            }
        }
        return kept.isEmpty() ? "" : "\n" + kept.toString().stripTrailing() + "\n";
    }

    private static String figure(Map<String, String> f) {
        StringBuilder b = new StringBuilder("`");
        f.forEach((k, v) -> {
            if (!k.equals("break")) {
                b.append(b.length() > 1 ? " " : "").append(k).append('=').append(v);
            }
        });
        return b.append('`').toString().replace("|", "\\|");
    }

    static Map<String, String> parse(String line) {
        Map<String, String> f = new LinkedHashMap<>();
        for (String part : line.substring(line.indexOf("CHAOS") + 5).trim().split(" ")) {
            int eq = part.indexOf('=');
            if (eq > 0) {
                f.put(part.substring(0, eq), part.substring(eq + 1));
            }
        }
        return f;
    }

    private static String loadAverage() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
        } catch (IOException e) {
            return "unknown";
        }
    }

    private static String git(String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of("git"));
        command.addAll(List.of(args));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        return p.waitFor() == 0 ? out : "unknown";
    }
}
