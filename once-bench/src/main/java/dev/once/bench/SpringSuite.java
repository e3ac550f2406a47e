package dev.once.bench;

import dev.once.outbox.OutboxMessage;
import dev.once.testkit.kafka.TestKafka;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Future;
import javax.sql.DataSource;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.listener.MessageListenerContainer;

/**
 * Spring listeners (issue 21 item 2): {@link SpringApp}, a Spring Boot 4 application on once's starter,
 * consumes the Kafka suite's embedded broker into the harness's PostgreSQL with each of its listeners
 * in turn: once per record, once per poll, once per poll with a set-wise effect, a
 * {@code processed_events} insert in a {@code @Transactional} listener, and no dedupe. The per-record
 * listeners read one topic, the batch listeners a larger one; both carry every event once plus a copy of
 * one in {@value #COPY_EVERY} on the same partition, a few records later, as a producer retry leaves it.
 *
 * <p>Each row runs until its listener has returned for every delivery of its topic (counted by the
 * container's interceptors, outside the listener's body and transaction: {@link SpringApp.Meter}), the
 * per-record rows in interleaved slices, then the end state is checked from the database: the ledger's
 * credits during the row's slices equal the distinct events (every delivery for the no-dedupe row), and
 * the claims (or {@code processed_events} rows) equal them too. A row that loses or doubles an effect
 * throws, so a fast wrong row cannot win. A first application context runs every
 * row on topics half (batch rows: a quarter) the size to warm the JVM; the measured one starts after it.
 */
final class SpringSuite implements Suite {

    static final int COPY_EVERY = 20;
    static final int PARTITIONS = 6;
    static final int MAX_POLL_RECORDS = 500;

    /** The rows, in the order they run and are reported. */
    static final List<String> ROWS = List.of(
            SpringApp.ONCE_RECORD,
            SpringApp.ONCE_RECORD_AT_COMMIT,
            SpringApp.PROCESSED_EVENTS,
            SpringApp.PROCESSED_EVENTS_PLAIN,
            SpringApp.NO_DEDUPE,
            SpringApp.ONCE_BATCH,
            SpringApp.ONCE_BATCH_JDBC,
            SpringApp.ONCE_BATCH_SET);

    /** One row: distinct events, deliveries its listener returned from, their rate, and what the end state held. */
    record Row(
            String name,
            long events,
            long deliveries,
            double seconds,
            long cpuNanos,
            long allocatedBytes,
            long credited,
            long marks) {
        double eventsPerSecond() {
            return events / seconds;
        }

        /** CPU time of the listener's thread per distinct event, in microseconds. */
        double cpuMicrosPerEvent() {
            return cpuNanos / 1e3 / events;
        }

        /** Bytes the listener's thread allocated per distinct event. */
        double bytesPerEvent() {
            return (double) allocatedBytes / events;
        }

        String line() {
            return String.format(
                    Locale.ROOT,
                    "BENCH name=spring-%s mode=%s conns=1 events_per_s=%.0f cpu_us_per_event=%.0f alloc_bytes_per_event=%.0f",
                    name,
                    name.contains("batch") ? "batch" : "per-message",
                    eventsPerSecond(),
                    cpuMicrosPerEvent(),
                    bytesPerEvent());
        }
    }

    private final int recordEvents;
    private final int batchEvents;

    SpringSuite() {
        // 20,000 per record: once's listener path (interceptor, engine, Spring's synchronizations) needs
        // several thousand calls before C2 has compiled it; at 5,000 the rows compared cold code.
        this(20_000, 40_000);
    }

    /** {@code recordEvents} distinct events for the per-record rows, {@code batchEvents} for the batch rows. */
    SpringSuite(int recordEvents, int batchEvents) {
        this.recordEvents = recordEvents;
        this.batchEvents = batchEvents;
    }

    @Override
    public String name() {
        return "spring";
    }

    /**
     * The rows to run: {@link #ROWS}, or those the system property {@code once.bench.spring.rows} names
     * (comma-separated, to profile one row beside another while changing it; a run of some rows prints
     * their result lines and leaves BENCHMARKS.md's section as it is, as its checks compare every row).
     */
    static List<String> selectedRows() {
        String only = System.getProperty("once.bench.spring.rows");
        if (only == null || only.isBlank()) {
            return ROWS;
        }
        List<String> named = List.of(only.trim().split("\\s*,\\s*"));
        for (String row : named) {
            if (!ROWS.contains(row)) {
                throw new IllegalArgumentException(
                        "once.bench.spring.rows names '" + row + "', expected some of " + String.join(",", ROWS));
            }
        }
        return ROWS.stream().filter(named::contains).toList();
    }

    @Override
    public void run(Run run) throws Exception {
        SpringSuite sized = run.settings().quick() ? new SpringSuite(2_000, 10_000) : this;
        List<String> selected = selectedRows();
        List<Row> rows;
        try (TestKafka kafka = TestKafka.start();
                BenchPostgres.Db db = run.postgres().freshDatabase(2)) {
            Run.progress("spring: " + sized.recordEvents + " / " + sized.batchEvents + " events, embedded broker at "
                    + kafka.bootstrapServers());
            rows = sized.measure(kafka, db.dataSource(), selected);
        }
        if (!selected.equals(ROWS)) {
            for (Row r : rows) {
                run.line(r.line());
            }
            return;
        }
        StringBuilder md = new StringBuilder();
        md.append("A Spring Boot ")
                .append(Versions.version("spring-boot"))
                .append(" application (`dev.once.bench.SpringApp`: once's starter, Boot's `JdbcTemplate`,"
                        + " `DataSourceTransactionManager` and Kafka container factory, spring-kafka ")
                .append(Versions.version("spring-kafka"))
                .append(") consuming the embedded Kafka broker into PostgreSQL, one listener container"
                        + " (concurrency 1, ")
                .append(PARTITIONS)
                .append(" partitions, `max.poll.records=")
                .append(MAX_POLL_RECORDS)
                .append("`, ack mode `BATCH`) and one connection at a time, after a warm-up context ran every row"
                        + " on topics half (batch rows: a quarter) the size. The per-record rows take turns in ")
                .append(ROUNDS)
                .append(" rounds, a slice of their topic each, the row that starts a round rotating; the batch"
                        + " rows run after them, one after the other. Before every slice the ledger is vacuumed"
                        + " and the server checkpointed. Per-record rows: ")
                .append(String.format(Locale.ROOT, "%,d", sized.recordEvents))
                .append(" events; batch rows: ")
                .append(String.format(Locale.ROOT, "%,d", sized.batchEvents))
                .append("; each topic carries a copy of one event in ")
                .append(COPY_EVERY)
                .append(", on its partition a few records later. The effect: one account of 1,000 credited per"
                        + " event (`UPDATE account … WHERE id = ?`; the set-wise row one `UPDATE … FROM unnest`"
                        + " per poll). events/s: distinct events applied per second, from the first record"
                        + " handed to the listener to the last one it returned from (counted by the container's"
                        + " record and batch interceptors, outside the listener's transaction); CPU: the listener thread's CPU time over the same span (poll, listener"
                        + " adapter, interceptor, JDBC driver, body) per event; bytes: what that thread allocated"
                        + " over the span per event (the same whatever else the machine runs).\n\n"
                        + "| row | listener | events/s | CPU µs / event | bytes allocated / event | deliveries | credited | claims / marks |\n"
                        + "|---|---|---|---|---|---|---|---|\n");
        for (Row r : rows) {
            run.line(r.line());
            md.append("| ")
                    .append(r.name())
                    .append(" | ")
                    .append(describe(r.name()))
                    .append(" | ")
                    .append(Math.round(r.eventsPerSecond()))
                    .append(" | ")
                    .append(Math.round(r.cpuMicrosPerEvent()))
                    .append(" | ")
                    .append(Math.round(r.bytesPerEvent()))
                    .append(" | ")
                    .append(r.deliveries())
                    .append(" | ")
                    .append(r.credited())
                    .append(" | ")
                    .append(r.name().equals(SpringApp.NO_DEDUPE) ? "–" : Long.toString(r.marks()))
                    .append(" |\n");
            run.line(String.format(
                    Locale.ROOT,
                    "CORRECTNESS name=spring-%s events=%d deliveries=%d credited=%d marks=%d ok=true",
                    r.name(),
                    r.events(),
                    r.deliveries(),
                    r.credited(),
                    r.marks()));
        }
        double perRecord = rate(rows, SpringApp.ONCE_RECORD) / rate(rows, SpringApp.PROCESSED_EVENTS);
        double atCommit = rate(rows, SpringApp.ONCE_RECORD_AT_COMMIT) / rate(rows, SpringApp.PROCESSED_EVENTS);
        double perRecordPlain = rate(rows, SpringApp.ONCE_RECORD) / rate(rows, SpringApp.PROCESSED_EVENTS_PLAIN);
        double batch = rate(rows, SpringApp.ONCE_BATCH) / rate(rows, SpringApp.ONCE_RECORD);
        double batchJdbc = rate(rows, SpringApp.ONCE_BATCH_JDBC) / rate(rows, SpringApp.ONCE_RECORD);
        md.append('\n')
                .append(CoreSuite.check(
                        String.format(
                                Locale.ROOT,
                                "once per record >= 1.0x the `processed_events` listener: %.2f",
                                perRecord),
                        perRecord >= 1.0))
                .append(CoreSuite.check(
                        String.format(
                                Locale.ROOT,
                                "once per record >= 1.0x the best hand-written listener (`processed_events` as a plain"
                                        + " insert): %.2f",
                                perRecordPlain),
                        perRecordPlain >= 1.0))
                .append(CoreSuite.check(
                        String.format(
                                Locale.ROOT,
                                "once per record with the claim at commit >= 1.0x the `processed_events` listener:"
                                        + " %.2f",
                                atCommit),
                        atCommit >= 1.0))
                .append(CoreSuite.check(
                        String.format(
                                Locale.ROOT,
                                "once batch listener, its updates one JDBC batch, >= 5x the once per-record listener:"
                                        + " %.2f",
                                batchJdbc),
                        batchJdbc >= 5.0))
                .append(CoreSuite.check(
                        String.format(
                                Locale.ROOT,
                                "once batch listener, a round trip per update, >= 5x the once per-record listener:"
                                        + " %.2f (its body's own round trip per record bounds it)",
                                batch),
                        batch >= 5.0))
                .append(String.format(
                        Locale.ROOT,
                        "- (for reference) once batch set-wise / once per record: %.2fx; no dedupe / once per"
                                + " record: %.2fx (no dedupe credits every copy: %d extra)%n",
                        rate(rows, SpringApp.ONCE_BATCH_SET) / rate(rows, SpringApp.ONCE_RECORD),
                        rate(rows, SpringApp.NO_DEDUPE) / rate(rows, SpringApp.ONCE_RECORD),
                        row(rows, SpringApp.NO_DEDUPE).credited()
                                - row(rows, SpringApp.NO_DEDUPE).events()));
        md.append("- correctness, every row: the container stopped, credits = distinct events (no dedupe:"
                + " = deliveries) and claims (`once_inbox` rows of the consumer) or `processed_events` rows ="
                + " distinct events; a row that differs fails the suite\n");
        run.section("Spring listeners: @IdempotentListener vs processed_events vs no dedupe", md.toString());
    }

    private static String describe(String row) {
        return switch (row) {
            case SpringApp.ONCE_RECORD -> "`@IdempotentListener`, `ConsumerRecord` per call";
            case SpringApp.ONCE_RECORD_AT_COMMIT -> "as once-record, `claimTiming = AT_COMMIT`";
            case SpringApp.ONCE_BATCH -> "`@IdempotentListener`, `List<ConsumerRecord>` per poll, update per record";
            case SpringApp.ONCE_BATCH_JDBC -> "as once-batch, the updates sent as one JDBC batch (`batchUpdate`)";
            case SpringApp.ONCE_BATCH_SET -> "`@IdempotentListener`, `List<ConsumerRecord>` per poll, set-wise update";
            case SpringApp.PROCESSED_EVENTS -> "`@Transactional`, `processed_events` insert + update, per record";
            case SpringApp.PROCESSED_EVENTS_PLAIN ->
                "as processed-events, a plain insert (a copy: `DuplicateKeyException`, rolled back)";
            case SpringApp.NO_DEDUPE -> "plain listener, update in auto-commit, per record";
            default -> throw new IllegalArgumentException(row);
        };
    }

    private static Row row(List<Row> rows, String name) {
        return rows.stream().filter(r -> r.name().equals(name)).findFirst().orElseThrow();
    }

    private static double rate(List<Row> rows, String name) {
        return row(rows, name).eventsPerSecond();
    }

    /** Warms up on small topics, then measures every row; each row's end state is checked. */
    List<Row> measure(TestKafka kafka, DataSource ds, List<String> selected) throws Exception {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement()) {
            for (String table : List.of("processed_events", "processed_events_plain")) {
                s.execute("CREATE TABLE " + table + " (event_id text PRIMARY KEY,"
                        + " processed_at timestamptz NOT NULL DEFAULT now())");
            }
        }
        // Half the measured events per row: the per-record rows run at a few hundred events/s here, and
        // with a tenth the engine's and Spring's per-call code was still largely interpreted when measured
        // (C2 compiles after ~10,000 calls): once per record measured 0.48x processed_events after 500
        // warm-up events, 0.81x after 1,000 with twice the measured events.
        Run.progress("spring: warm-up");
        runApplication(kafka, ds, selected, Math.max(100, recordEvents / 2), Math.max(200, batchEvents / 4));
        Run.progress("spring: measured");
        return runApplication(kafka, ds, selected, recordEvents, batchEvents);
    }

    private static List<Row> runApplication(
            TestKafka kafka, DataSource ds, List<String> selected, int recordEvents, int batchEvents) throws Exception {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement()) {
            // The same start for every table a row writes: the warm-up's marks and claims gone, the
            // ledger compacted (TRUNCATE, not DELETE, for once's inbox too: a DELETE left once's index full
            // of dead entries while processed_events started empty).
            s.execute("TRUNCATE processed_events, processed_events_plain, once_inbox");
            s.execute("UPDATE account SET balance = 0");
            s.execute("VACUUM FULL ANALYZE account");
        }
        String records = kafka.createTopic("spring-records", PARTITIONS);
        String batches = kafka.createTopic("spring-batches", PARTITIONS);
        int recordDeliveries = publish(kafka, records, recordEvents);
        int batchDeliveries = publish(kafka, batches, batchEvents);
        Map<String, Object> properties = new HashMap<>();
        properties.put("bench.records-topic", records);
        properties.put("bench.batches-topic", batches);
        properties.put("spring.kafka.bootstrap-servers", kafka.bootstrapServers());
        properties.put("spring.kafka.consumer.auto-offset-reset", "earliest");
        properties.put("spring.kafka.consumer.max-poll-records", Integer.toString(MAX_POLL_RECORDS));
        properties.put("once.relay.enabled", "false");
        properties.put("once.retention.enabled", "false");
        properties.put("spring.main.banner-mode", "off");
        try (ConfigurableApplicationContext app = new SpringApplicationBuilder(SpringApp.class)
                .web(org.springframework.boot.WebApplicationType.NONE)
                .properties(properties)
                .initializers(context -> context.getBeanFactory().registerSingleton("dataSource", ds))
                .run()) {
            KafkaListenerEndpointRegistry registry = app.getBean(KafkaListenerEndpointRegistry.class);
            SpringApp.Meter meter = app.getBean(SpringApp.Meter.class);
            Map<String, Tally> tallies = new LinkedHashMap<>();
            for (String name : selected) {
                boolean batch = name.contains("batch");
                int events = batch ? batchEvents : recordEvents;
                int deliveries = batch ? batchDeliveries : recordDeliveries;
                tallies.put(name, new Tally(name, events, deliveries, registry.getListenerContainer(name)));
            }
            List<Tally> perRecord = selected.stream()
                    .filter(n -> !n.contains("batch"))
                    .map(tallies::get)
                    .toList();
            // The per-record rows take turns, a slice of their topic each, the row that starts a round
            // rotating: a checkpoint, an autovacuum or the JIT finishing late then hits every row alike
            // instead of whichever ran first (each row in turn put once-record first, right after the
            // warm-up's cleanup).
            for (int round = 1; round <= ROUNDS; round++) {
                for (int k = 0; k < perRecord.size(); k++) {
                    Tally t = perRecord.get((round - 1 + k) % perRecord.size());
                    slice(t, meter, ds, (long) t.deliveries * round / ROUNDS);
                }
            }
            for (String name : selected) {
                if (name.contains("batch")) {
                    Tally t = tallies.get(name);
                    slice(t, meter, ds, t.deliveries);
                }
            }
            List<Row> rows = new ArrayList<>();
            for (Tally t : tallies.values()) {
                rows.add(t.checked(ds));
            }
            return rows;
        }
    }

    /** Per-record rows are measured in this many interleaved slices. */
    static final int ROUNDS = 4;

    /** What one row has done over its slices, and its container. */
    private static final class Tally {
        final String name;
        final int events;
        final int deliveries;
        final MessageListenerContainer container;
        long handled;
        double seconds;
        long cpuNanos;
        long allocatedBytes;
        long credited;

        Tally(String name, int events, int deliveries, MessageListenerContainer container) {
            this.name = name;
            this.events = events;
            this.deliveries = deliveries;
            this.container = container;
        }

        /** Credits the row must leave: every distinct event, or every delivery without dedupe. */
        long target() {
            return name.equals(SpringApp.NO_DEDUPE) ? deliveries : events;
        }

        /** The row's end state, checked: every delivery handled, credits and claims or marks as the row promises. */
        Row checked(DataSource ds) throws SQLException {
            long marks;
            try (Connection c = ds.getConnection();
                    Statement s = c.createStatement()) {
                marks = name.equals(SpringApp.PROCESSED_EVENTS)
                        ? single(s, "SELECT count(*) FROM processed_events")
                        : name.equals(SpringApp.PROCESSED_EVENTS_PLAIN)
                                ? single(s, "SELECT count(*) FROM processed_events_plain")
                                : single(
                                        s, "SELECT count(*) FROM once_inbox WHERE consumer = '" + consumer(name) + "'");
            }
            boolean ok = credited == target()
                    && handled == deliveries
                    && (name.equals(SpringApp.NO_DEDUPE) ? marks == 0 : marks == events);
            if (!ok) {
                throw new IllegalStateException(String.format(
                        Locale.ROOT,
                        "spring row %s is wrong: %d distinct events, %d deliveries, %d handled, credited %d,"
                                + " claims or marks %d",
                        name,
                        events,
                        deliveries,
                        handled,
                        credited,
                        marks));
            }
            Run.progress(String.format(Locale.ROOT, "spring: %s %.0f events/s", name, events / seconds));
            return new Row(name, events, deliveries, seconds, cpuNanos, allocatedBytes, credited, marks);
        }
    }

    /**
     * Runs one row's listener until it has returned for {@code upTo} deliveries in all, then stops it (a
     * stopped container finishes the records it holds, so a slice may overshoot; the next starts from the
     * committed offsets). Before each slice the ledger is vacuumed and the server checkpointed, the same for every
     * row; the slice's credits are the ledger's growth while it ran, as only its container runs.
     */
    private static void slice(Tally t, SpringApp.Meter meter, DataSource ds, long upTo) throws Exception {
        if (t.handled >= upTo) {
            return;
        }
        long before;
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement()) {
            s.execute("VACUUM ANALYZE account");
            s.execute("CHECKPOINT");
            before = single(s, "SELECT coalesce(sum(balance), 0) FROM account");
        }
        meter.reset();
        t.container.start();
        try {
            long seen = -1;
            long progressAt = System.nanoTime();
            while (t.handled + meter.handled() < upTo) {
                long now = meter.handled();
                if (now != seen) {
                    seen = now;
                    progressAt = System.nanoTime();
                } else if (System.nanoTime() - progressAt > 60_000_000_000L) {
                    throw new IllegalStateException("spring row " + t.name + " stalled at " + (t.handled + now) + " of "
                            + t.deliveries + " deliveries for 60 s");
                }
                Thread.sleep(5);
            }
        } finally {
            t.container.stop();
        }
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement()) {
            t.credited += single(s, "SELECT coalesce(sum(balance), 0) FROM account") - before;
        }
        t.handled += meter.handled();
        t.seconds += meter.seconds();
        t.cpuNanos += meter.cpuNanos();
        t.allocatedBytes += meter.allocatedBytes();
    }

    private static String consumer(String row) {
        return switch (row) {
            case SpringApp.ONCE_RECORD -> "spring-record";
            case SpringApp.ONCE_RECORD_AT_COMMIT -> "spring-record-at-commit";
            case SpringApp.ONCE_BATCH -> "spring-batch";
            case SpringApp.ONCE_BATCH_JDBC -> "spring-batch-jdbc";
            case SpringApp.ONCE_BATCH_SET -> "spring-batch-set";
            default -> "none";
        };
    }

    private static long single(Statement s, String sql) throws SQLException {
        try (ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /**
     * Publishes {@code events} distinct events and, after every {@value #COPY_EVERY}th, a copy of the
     * one ten before it, on its original's partition.
     *
     * @return the records published
     */
    static int publish(TestKafka kafka, String topic, int events) throws Exception {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1"); // as the Kafka suite: see there
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < events; i++) {
                sent.add(producer.send(record(topic, i)));
                if (i % COPY_EVERY == COPY_EVERY - 1) {
                    sent.add(producer.send(record(topic, i - 10)));
                }
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                f.get();
            }
        }
        return sent.size();
    }

    private static ProducerRecord<String, String> record(String topic, int i) {
        String id = topic + "-" + i;
        ProducerRecord<String, String> r = new ProducerRecord<>(topic, i % PARTITIONS, null, "1");
        r.headers().add(OutboxMessage.EVENT_ID_HEADER, id.getBytes(StandardCharsets.UTF_8));
        return r;
    }
}
