package dev.once.bench;

import dev.once.outbox.OutboxMessage;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The spring suite's per-record listeners called in a loop on this thread, without Kafka: the bytes
 * and CPU each listener call costs (interceptor or {@code @Transactional} proxy, engine, driver), paired
 * in alternating blocks. A copy of an event ten before it after every twentieth, as the suite publishes.
 * {@code java -cp once-bench/target/once-bench.jar dev.once.bench.SpringListenerProbe <jdbc url> [events per row]}
 * ({@code -Dprobe.only=once-record} for one row, under a profiler; {@code -Dprobe.warm=} warm-up events, default
 * as many as measured; {@code -Dprobe.jfr=<file> -XX:-UseTLAB}: every allocation of the measured calls with its
 * stack, in a JFR file). The last line, {@code PROBE ratio}, is
 * once's CPU and bytes per event over the hand-written {@code processed_events} listener's in the same
 * process: the figures to read on a loaded machine, where events/s say nothing (docs/benchmarks.md).
 */
final class SpringListenerProbe {

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    public static void main(String[] args) throws Exception {
        String url = args[0];
        int events = args.length > 1 ? Integer.parseInt(args[1]) : 20_000;
        try (BenchPostgres postgres = BenchPostgres.start(url);
                BenchPostgres.Db db = postgres.freshDatabase(2)) {
            try (Connection c = db.dataSource().getConnection();
                    Statement s = c.createStatement()) {
                for (String table : List.of("processed_events", "processed_events_plain")) {
                    s.execute("CREATE TABLE " + table + " (event_id text PRIMARY KEY,"
                            + " processed_at timestamptz NOT NULL DEFAULT now())");
                }
            }
            Map<String, Object> properties = new HashMap<>();
            properties.put("bench.records-topic", "probe-records");
            properties.put("bench.batches-topic", "probe-batches");
            properties.put("once.relay.enabled", "false");
            properties.put("once.retention.enabled", "false");
            properties.put("spring.main.banner-mode", "off");
            try (ConfigurableApplicationContext app = new SpringApplicationBuilder(SpringApp.class)
                    .web(org.springframework.boot.WebApplicationType.NONE)
                    .properties(properties)
                    .initializers(context -> context.getBeanFactory().registerSingleton("dataSource", db.dataSource()))
                    .run()) {
                SpringApp.OnceListeners once = app.getBean(SpringApp.OnceListeners.class);
                SpringApp.ProcessedEventsListener processed = app.getBean(SpringApp.ProcessedEventsListener.class);
                Map<String, Consumer<ConsumerRecord<String, String>>> rows = new LinkedHashMap<>();
                rows.put("once-record", once::on);
                rows.put("once-record-at-commit", once::onAtCommit);
                rows.put("processed-events", processed::on);
                String only = System.getProperty("probe.only");
                if (only != null) {
                    rows.keySet().retainAll(List.of(only.split(",")));
                }
                // warm-up: the same size, not measured
                run(rows, Integer.getInteger("probe.warm", events), "warm", false);
                String jfr = System.getProperty("probe.jfr");
                if (jfr == null) {
                    run(rows, events, "run", true);
                } else {
                    // every allocation of the measured run with its stack, when run with -XX:-UseTLAB (each
                    // object is then allocated outside a TLAB): sites counted exactly, not sampled
                    try (jdk.jfr.Recording recording = new jdk.jfr.Recording()) {
                        recording.enable("jdk.ObjectAllocationOutsideTLAB").withStackTrace();
                        recording.setToDisk(true);
                        recording.start();
                        run(rows, events, "run", true);
                        recording.stop();
                        recording.dump(java.nio.file.Path.of(jfr));
                    }
                }
            }
        }
    }

    private static void run(
            Map<String, Consumer<ConsumerRecord<String, String>>> rows, int events, String tag, boolean print) {
        int block = 1_000;
        Map<String, long[]> totals = new LinkedHashMap<>();
        Map<String, List<ConsumerRecord<String, String>>> records = new HashMap<>();
        for (String row : rows.keySet()) {
            records.put(row, records(tag + "-" + row + "-" + System.nanoTime(), events));
            // per row: fresh events' CPU ns, bytes, the wall ns of all calls, their count; copies' CPU, bytes, -, count
            totals.put(row, new long[8]);
        }
        for (int from = 0; from < events; from += block) {
            for (var e : rows.entrySet()) {
                List<ConsumerRecord<String, String>> mine = records.get(e.getKey());
                int to = Math.min(mine.size(), mine.size() * (from + block) / events);
                int start = mine.size() * from / events;
                long[] t = totals.get(e.getKey());
                long wall = System.nanoTime();
                for (int i = start; i < to; i++) {
                    ConsumerRecord<String, String> r = mine.get(i);
                    long cpu = THREADS.getCurrentThreadCpuTime();
                    long bytes = THREADS.getCurrentThreadAllocatedBytes();
                    e.getValue().accept(r);
                    int k = r.key() == null ? 0 : 4; // fresh events, then copies
                    t[k] += THREADS.getCurrentThreadCpuTime() - cpu;
                    t[k + 1] += THREADS.getCurrentThreadAllocatedBytes() - bytes;
                    t[k + 3]++;
                }
                t[2] += System.nanoTime() - wall;
            }
        }
        if (print) {
            for (var e : totals.entrySet()) {
                long[] t = e.getValue();
                System.out.printf(
                        Locale.ROOT,
                        "PROBE %s calls=%d cpu_us_per_event=%.1f bytes_per_event=%.0f wall_us_per_event=%.1f"
                                + " fresh: cpu_us=%.1f bytes=%.0f copy: cpu_us=%.1f bytes=%.0f%n",
                        e.getKey(),
                        t[3] + t[7],
                        (t[0] + t[4]) / 1e3 / events,
                        (double) (t[1] + t[5]) / events,
                        t[2] / 1e3 / events,
                        t[0] / 1e3 / t[3],
                        (double) t[1] / t[3],
                        t[4] / 1e3 / Math.max(1, t[7]),
                        (double) t[5] / Math.max(1, t[7]));
            }
            long[] processed = totals.get("processed-events");
            for (String row : List.of("once-record", "once-record-at-commit")) {
                long[] once = totals.get(row);
                if (once != null && processed != null) {
                    // paired blocks of one run: the ratio is what holds from run to run, not either figure alone
                    System.out.printf(
                            Locale.ROOT,
                            "PROBE ratio %s/processed-events cpu=%.3f bytes=%.3f (per event, fresh and copies)%n",
                            row,
                            (double) (once[0] + once[4]) / (processed[0] + processed[4]),
                            (double) (once[1] + once[5]) / (processed[1] + processed[5]));
                }
            }
        }
    }

    private static List<ConsumerRecord<String, String>> records(String prefix, int events) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long offset = 0;
        for (int i = 0; i < events; i++) {
            out.add(record(prefix, i, offset++, null));
            if (i % SpringSuite.COPY_EVERY == SpringSuite.COPY_EVERY - 1) {
                out.add(record(prefix, i - 10, offset++, "copy"));
            }
        }
        return out;
    }

    /** A copy carries the key "copy", so the probe can account for it apart. */
    private static ConsumerRecord<String, String> record(String prefix, int i, long offset, String key) {
        ConsumerRecord<String, String> r = new ConsumerRecord<>("probe-records", i % 6, offset, key, "1");
        r.headers().add(OutboxMessage.EVENT_ID_HEADER, (prefix + "-" + i).getBytes(StandardCharsets.UTF_8));
        return r;
    }
}
