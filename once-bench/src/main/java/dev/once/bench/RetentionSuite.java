package dev.once.bench;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.retention.InboxPruner;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Retention at scale: an inbox of {@link #rows} old claims (made with {@code generate_series}),
 * its size per event (table + indexes, {@code pg_total_relation_size}), then the batched path
 * ingesting new events ({@code once} batch-set, {@value #BATCH} per transaction, {@value #WORKERS}
 * connections) alone and while {@link InboxPruner} deletes every old row in chunks: rows pruned
 * per second against events ingested per second, and the p99 of one batch's transaction (claim +
 * effect + commit) with and without pruning beside it.
 */
final class RetentionSuite implements Suite {

    static final int DEFAULT_ROWS = 10_000_000;
    static final int BATCH = 100;
    static final int WORKERS = 8;
    static final Duration ALONE = Duration.ofSeconds(10);

    private int rows;
    static final int QUICK_ROWS = 200_000;

    /** {@value #DEFAULT_ROWS} rows, or the system property {@code once.bench.retention.rows}. */
    RetentionSuite() {
        this(Integer.getInteger("once.bench.retention.rows", DEFAULT_ROWS));
    }

    RetentionSuite(int rows) {
        this.rows = rows;
    }

    @Override
    public String name() {
        return "retention";
    }

    /** What one run measured. */
    record Result(
            long rows,
            double bytesPerEvent,
            double pruneRowsPerSecond,
            long pruned,
            double ingestAlone,
            double ingestDuringPrune,
            double p99AloneMillis,
            double p99DuringPruneMillis) {

        double pruneOverIngest() {
            return pruneRowsPerSecond / ingestAlone;
        }

        double p99Ratio() {
            return p99DuringPruneMillis / p99AloneMillis;
        }
    }

    /** The opt-in partitioned inbox: one day partition of old claims dropped whole while ingesting. */
    record Dropped(long rows, double dropSeconds, double ingestAlone, double p99AloneMillis, double p99DuringMillis) {
        double rowsPerSecond() {
            return rows / dropSeconds;
        }
    }

    @Override
    public void run(Run run) throws Exception {
        if (run.settings().quick() && Integer.getInteger("once.bench.retention.rows") == null) {
            rows = Math.min(rows, QUICK_ROWS);
        }
        Result r;
        try (BenchPostgres.Db db = run.postgres().freshDatabase(WORKERS + 1)) {
            r = measure(db);
        }
        Dropped d;
        try (BenchPostgres.Db db = run.postgres().freshDatabase(WORKERS + 1)) {
            d = measurePartitioned(db, rows);
        }
        run.line(String.format(
                Locale.ROOT,
                "BENCH name=retention-partitioned rows=%d drop_s=%.2f drop_rows_per_s=%.0f ingest_events_per_s=%.0f"
                        + " drop_over_ingest=%.0f claim_p99_ms=%.1f claim_p99_during_drop_ms=%.1f",
                d.rows(),
                d.dropSeconds(),
                d.rowsPerSecond(),
                d.ingestAlone(),
                d.rowsPerSecond() / d.ingestAlone(),
                d.p99AloneMillis(),
                d.p99DuringMillis()));
        run.line(String.format(
                Locale.ROOT,
                "BENCH name=retention rows=%d bytes_per_event=%.0f prune_rows_per_s=%.0f"
                        + " ingest_events_per_s=%.0f ingest_during_prune_events_per_s=%.0f prune_over_ingest=%.1f"
                        + " claim_p99_ms=%.1f claim_p99_during_prune_ms=%.1f",
                r.rows(),
                r.bytesPerEvent(),
                r.pruneRowsPerSecond(),
                r.ingestAlone(),
                r.ingestDuringPrune(),
                r.pruneOverIngest(),
                r.p99AloneMillis(),
                r.p99DuringPruneMillis()));
        StringBuilder md = new StringBuilder();
        md.append(String.format(
                Locale.ROOT,
                "An inbox of %,d claims older than the retention (ids of 36 characters,"
                        + " made with `generate_series` in time order), then `once` batch-set (%d per transaction, %d connections)"
                        + " ingesting new events for %d s alone and again while `InboxPruner` (retention 7 d, chunks of %,d, the"
                        + " dialect's walk: `DELETE … WHERE ctid = ANY(ARRAY(SELECT ctid … WHERE processed_at < ? AND ctid > ?"
                        + " LIMIT … FOR UPDATE SKIP LOCKED))`, each chunk starting after the previous one's last row)"
                        + " deletes every old row.%n%n",
                r.rows(),
                BATCH,
                WORKERS,
                ALONE.toSeconds(),
                InboxPruner.DEFAULT_CHUNK_SIZE));
        md.append("| figure | value |\n|---|---|\n");
        md.append(
                String.format(Locale.ROOT, "| inbox bytes per event (table + indexes) | %.0f |%n", r.bytesPerEvent()));
        md.append(String.format(Locale.ROOT, "| pruned rows/s (while ingesting) | %,.0f |%n", r.pruneRowsPerSecond()));
        md.append(String.format(Locale.ROOT, "| ingest events/s alone | %,.0f |%n", r.ingestAlone()));
        md.append(String.format(Locale.ROOT, "| ingest events/s during pruning | %,.0f |%n", r.ingestDuringPrune()));
        md.append(String.format(Locale.ROOT, "| batch transaction p99 alone, ms | %.1f |%n", r.p99AloneMillis()));
        md.append(String.format(
                Locale.ROOT, "| batch transaction p99 during pruning, ms | %.1f |%n", r.p99DuringPruneMillis()));
        md.append('\n')
                .append(CoreSuite.check(
                        String.format(
                                Locale.ROOT,
                                "pruning deletes >= 10x faster than the batched path ingests: %.1fx",
                                r.pruneOverIngest()),
                        r.pruneOverIngest() >= 10));
        md.append(CoreSuite.check(
                String.format(Locale.ROOT, "claim p99 during pruning within 2x of without: %.2fx", r.p99Ratio()),
                r.p99Ratio() <= 2));
        md.append(String.format(
                Locale.ROOT,
                "%nThe opt-in partitioned inbox (README, retention section: partitioned by range of the event id):"
                        + " %,d old claims in one day's partition, dropped whole with `DROP TABLE` while the same"
                        + " batched path ingests.%n%n| figure | value |%n|---|---|%n"
                        + "| drop, s | %.2f |%n| dropped rows/s | %,.0f |%n| ingest events/s alone | %,.0f |%n"
                        + "| batch transaction p99 alone, ms | %.1f |%n| batch transaction p99 around the drop, ms | %.1f |%n%n",
                d.rows(),
                d.dropSeconds(),
                d.rowsPerSecond(),
                d.ingestAlone(),
                d.p99AloneMillis(),
                d.p99DuringMillis()));
        md.append(CoreSuite.check(
                String.format(
                        Locale.ROOT,
                        "dropping a partition deletes >= 10x faster than the batched path ingests: %.0fx",
                        d.rowsPerSecond() / d.ingestAlone()),
                d.rowsPerSecond() / d.ingestAlone() >= 10));
        md.append(CoreSuite.check(
                String.format(
                        Locale.ROOT,
                        "claim p99 around the drop within 2x of without: %.2fx",
                        d.p99DuringMillis() / d.p99AloneMillis()),
                d.p99DuringMillis() / d.p99AloneMillis() <= 2));
        run.section("Retention at scale", md.toString());
    }

    Result measure(BenchPostgres.Db db) throws Exception {
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement()) {
            // Old claims in time order, as a live inbox fills: the BRIN index on processed_at stays tight.
            s.execute("INSERT INTO once_inbox (consumer, event_id, processed_at) SELECT 'bench',"
                    + " md5(g::text)::uuid::text, now() - interval '30 days' + g * interval '1 ms'"
                    + " FROM generate_series(1, " + rows + ") g");
            s.execute("VACUUM ANALYZE once_inbox");
        }
        double bytesPerEvent = queryLong(db, "SELECT pg_total_relation_size('once_inbox')") / (double) rows;
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("bench")
                .batchHandler(Ledger.ONCE_BATCH_HANDLER)
                .meterRegistry(new SimpleMeterRegistry())
                .build();
        InboxPruner pruner = InboxPruner.builder()
                .dataSource(db.dataSource())
                .retention(Duration.ofDays(7))
                .meterRegistry(new SimpleMeterRegistry())
                .build();

        Ingest alone = ingest(consumer, "alone", () -> sleep(ALONE));
        long[] pruned = new long[1];
        long[] pruneNanos = new long[1];
        Ingest during = ingest(consumer, "during", () -> {
            long start = System.nanoTime();
            pruned[0] = pruner.prune();
            pruneNanos[0] = System.nanoTime() - start;
        });
        long oldLeft = queryLong(db, "SELECT count(*) FROM once_inbox WHERE processed_at < now() - interval '7 days'");
        long newLeft = queryLong(db, "SELECT count(*) FROM once_inbox WHERE processed_at >= now() - interval '7 days'");
        if (oldLeft != 0 || pruned[0] != rows || newLeft != alone.events() + during.events()) {
            throw new IllegalStateException("pruning left " + oldLeft + " old rows and deleted " + pruned[0] + " of "
                    + rows + "; " + newLeft + " new claims are left of " + (alone.events() + during.events()));
        }
        return new Result(
                rows,
                bytesPerEvent,
                pruned[0] / (pruneNanos[0] / 1e9),
                pruned[0],
                alone.eventsPerSecond(),
                during.eventsPerSecond(),
                alone.p99Millis(),
                during.p99Millis());
    }

    /**
     * The README's partitioned inbox with {@code rows} old claims in one day partition, then ingest
     * alone and again around a {@code DROP TABLE} of that day (the ingested ids fit no day: they go
     * to the default partition). The window around the drop is as long as the one alone.
     */
    Dropped measurePartitioned(BenchPostgres.Db db, int rows) throws Exception {
        String day = "01a22ee6-b000"; // 2026-12-01T00:00Z as a UUIDv7 prefix
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement()) {
            for (String sql : List.of(
                    "CREATE TABLE once_inbox_c (LIKE once_inbox INCLUDING DEFAULTS)",
                    "ALTER TABLE once_inbox_c ALTER COLUMN event_id TYPE varchar(255) COLLATE \"C\"",
                    "CREATE TABLE once_inbox_p (LIKE once_inbox_c INCLUDING DEFAULTS) PARTITION BY RANGE (event_id)",
                    "DROP TABLE once_inbox_c",
                    "ALTER TABLE once_inbox_p ADD PRIMARY KEY (consumer, event_id)",
                    "DROP TABLE once_inbox",
                    "ALTER TABLE once_inbox_p RENAME TO once_inbox",
                    "CREATE TABLE once_inbox_default PARTITION OF once_inbox DEFAULT",
                    "CREATE TABLE once_inbox_20261201 PARTITION OF once_inbox FOR VALUES FROM ('" + day
                            + "') TO ('01a2340d-0c00')",
                    "INSERT INTO once_inbox (consumer, event_id, processed_at) SELECT 'bench', '" + day
                            + "-7000-8000-' || lpad(to_hex(g), 12, '0'), now() - interval '30 days'"
                            + " FROM generate_series(1, " + rows + ") g",
                    "VACUUM ANALYZE once_inbox")) {
                s.execute(sql);
            }
        }
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("bench")
                .batchHandler(Ledger.ONCE_BATCH_HANDLER)
                .meterRegistry(new SimpleMeterRegistry())
                .build();
        Ingest alone = ingest(consumer, "p-alone", () -> sleep(ALONE));
        long[] dropNanos = new long[1];
        Ingest during = ingest(consumer, "p-during", () -> {
            long start = System.nanoTime();
            try (Connection c = db.dataSource().getConnection();
                    Statement s = c.createStatement()) {
                s.execute("SET lock_timeout = '2s'"); // claims queue behind a waiting DROP: keep the wait short
                s.execute("DROP TABLE once_inbox_20261201");
            }
            dropNanos[0] = System.nanoTime() - start;
            sleep(ALONE.minusNanos(dropNanos[0]));
        });
        long left = queryLong(db, "SELECT count(*) FROM once_inbox");
        if (left != alone.events() + during.events()) {
            throw new IllegalStateException(
                    left + " claims left after the drop, " + (alone.events() + during.events()) + " ingested");
        }
        return new Dropped(rows, dropNanos[0] / 1e9, alone.eventsPerSecond(), alone.p99Millis(), during.p99Millis());
    }

    /** What the workers ingested while {@code meanwhile} ran. */
    record Ingest(long events, double seconds, double p99Millis) {
        double eventsPerSecond() {
            return events / seconds;
        }
    }

    private interface Meanwhile {
        void run() throws Exception;
    }

    private static Ingest ingest(IdempotentConsumer consumer, String label, Meanwhile meanwhile) throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong events = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(WORKERS);
        List<Future<long[]>> workers = new ArrayList<>();
        long start = System.nanoTime();
        try {
            for (int w = 0; w < WORKERS; w++) {
                Throughput.Events source = new Throughput.Events("retention-" + label, w);
                workers.add(pool.submit(() -> {
                    long[] latencies = new long[1 << 16];
                    int n = 0;
                    while (!stop.get()) {
                        List<Delivery> batch = new ArrayList<>(BATCH);
                        for (int k = 0; k < BATCH; k++) {
                            Event e = source.next();
                            batch.add(Delivery.of(e.id(), e.payload()));
                        }
                        long t = System.nanoTime();
                        for (Outcome o : consumer.processBatch(batch)) {
                            if (o.status() != Outcome.Status.APPLIED) {
                                throw new IllegalStateException(o.eventId() + " came out " + o.status(), o.failure());
                            }
                        }
                        if (n < latencies.length) {
                            latencies[n++] = System.nanoTime() - t;
                        }
                        events.addAndGet(BATCH);
                    }
                    return Arrays.copyOf(latencies, n);
                }));
            }
            meanwhile.run();
        } finally {
            stop.set(true);
            pool.shutdown();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        List<Long> all = new ArrayList<>();
        for (Future<long[]> f : workers) {
            for (long l : f.get()) {
                all.add(l);
            }
        }
        all.sort(null);
        double p99 = all.isEmpty() ? Double.NaN : all.get(Math.min(all.size() - 1, (int) (all.size() * 0.99))) / 1e6;
        return new Ingest(events.get(), seconds, p99);
    }

    private static void sleep(Duration d) throws InterruptedException {
        Thread.sleep(Math.max(0, d.toMillis()));
    }

    private static long queryLong(BenchPostgres.Db db, String sql) throws SQLException {
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }
}
