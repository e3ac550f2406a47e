package dev.once.bench;

import dev.once.bench.jmh.GuardBench;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.openjdk.jmh.profile.GCProfiler;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;

/**
 * The guarded connection's cost per statement ({@link GuardBench}, JMH), against the driver's own
 * connection, a reflective {@link java.lang.reflect.Proxy} variant, and one loopback round trip on
 * the run's PostgreSQL. JMH forks a JVM of its own, given the database through a system property.
 */
final class GuardSuite implements Suite {

    @Override
    public String name() {
        return "guard";
    }

    @Override
    public void run(Run run) throws Exception {
        boolean quick = run.settings().quick();
        ChainedOptionsBuilder options = new OptionsBuilder()
                .include(GuardBench.class.getName() + "\\.")
                // Bytes allocated per operation: deterministic where time per operation is not (a loaded machine).
                .addProfiler(GCProfiler.class)
                .forks(1)
                .jvmArgsAppend(
                        "-D" + GuardBench.URL_PROPERTY + "=" + run.postgres().jdbcUrl())
                .warmupIterations(quick ? 2 : 5)
                .warmupTime(TimeValue.seconds(1))
                .measurementIterations(quick ? 3 : 10)
                .measurementTime(TimeValue.seconds(1));
        Collection<RunResult> results = new Runner(options.build()).run();
        // sql parameter -> benchmark -> ns/op (and its error)
        Map<String, Map<String, double[]>> bySql = new LinkedHashMap<>();
        for (RunResult r : results) {
            String bench = r.getParams().getBenchmark();
            bench = bench.substring(bench.lastIndexOf('.') + 1);
            String sql = r.getParams().getParam("sql");
            double score = r.getPrimaryResult().getScore();
            double error = r.getPrimaryResult().getScoreError();
            Result<?> alloc = r.getSecondaryResults().get("gc.alloc.rate.norm");
            double bytes = alloc == null ? Double.NaN : alloc.getScore();
            bySql.computeIfAbsent(sql, k -> new LinkedHashMap<>()).put(bench, new double[] {score, error, bytes});
            run.line(String.format(
                    Locale.ROOT,
                    "BENCH name=guard bench=%s sql_chars=%d ns_per_op=%.0f error=%.0f bytes_per_op=%.0f",
                    bench,
                    sql.length(),
                    score,
                    Double.isNaN(error) ? 0 : error,
                    bytes));
        }
        StringBuilder md = new StringBuilder();
        md.append("JMH ")
                .append(Versions.of("org.openjdk.jmh", "jmh-core"))
                .append(" (`dev.once.bench.jmh.GuardBench`, average time, 1 fork, ")
                .append(quick ? "2 + 3" : "5 + 10")
                .append(" one-second iterations): what a handler's statement costs on the client through")
                .append(
                        " `tx.connection()` (the guarded connection, which lexes the SQL for transaction control when it")
                .append(" is prepared) against the driver's own connection and against a `java.lang.reflect.Proxy`")
                .append(" that forwards every call and runs the same lexer (issue 24). A statement here is prepare +")
                .append(" two `setLong` + close on a real pgjdbc connection, all client-side; `roundTrip` is one")
                .append(
                        " prepared `SELECT 1` executed on the run's PostgreSQL, what every statement costs on top. B/op is")
                .append(
                        " JMH's `gc.alloc.rate.norm` (bytes allocated per operation), which load does not move; time per")
                .append(
                        " operation on a loaded machine carries the descheduling of its thread (see the error column of")
                .append(" the result lines).\n\n")
                .append("| statement | raw ns | guarded ns | proxy ns | guard's cost ns | proxy's cost ns |")
                .append(" round trip ns | guard's cost / round trip | raw B/op | guarded B/op | proxy B/op |\n")
                .append("|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (Map.Entry<String, Map<String, double[]>> e : bySql.entrySet()) {
            Map<String, double[]> b = e.getValue();
            double raw = b.get("prepareRaw")[0];
            double guarded = b.get("prepareGuarded")[0];
            double proxy = b.get("prepareProxy")[0];
            double rt = b.get("roundTrip")[0];
            md.append(String.format(
                    Locale.ROOT,
                    "| %d chars | %,.0f | %,.0f | %,.0f | %,.0f | %,.0f | %,.0f | %.4f | %.0f | %.0f | %.0f |%n",
                    e.getKey().length(),
                    raw,
                    guarded,
                    proxy,
                    guarded - raw,
                    proxy - raw,
                    rt,
                    (guarded - raw) / rt,
                    b.get("prepareRaw")[2],
                    b.get("prepareGuarded")[2],
                    b.get("prepareProxy")[2]));
        }
        md.append("\nThe statements: the ledger's `")
                .append(Ledger.CREDIT)
                .append("` and a data-modifying CTE with a string literal (the guard reads the first word of each")
                .append(
                        " statement for transaction control and scans the text for the inbox's name). The guard reads a")
                .append(" string once per consumer and remembers it when harmless, so the benchmark, which prepares")
                .append(" the same string over and over as a `JdbcTemplate` body does on every event, measures that")
                .append(" steady state: the read is a set lookup.\n");
        run.section("Guarded connection: cost per statement (JMH)", md.toString());
    }
}
