package dev.once.bench;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.Schema;
import dev.once.kafka.KafkaConsumerRunner;
import dev.once.kafka.KafkaConsumerRunnerBuilder;
import dev.once.outbox.OutboxMessage;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Future;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * End-to-end throughput from Kafka to PostgreSQL (fsync and synchronous_commit on): the naive
 * consumer (auto-commit, the poll's records applied in one transaction, no claim) against the once
 * runner (claim per event, one transaction per batch of polls, commitAsync after the database commit). Same
 * topic, same handler (credit one of {@value #ACCOUNTS} accounts), {@code max.poll.records}
 * {@value #MAX_POLL_RECORDS}, one database connection each, one run each after a short warm-up.
 *
 * <p>As the {@code kafka} suite of {@link BenchMain} it runs on the harness's PostgreSQL and writes
 * its lines and a section of BENCHMARKS.md; {@link #run(int)} returns the figures; {@link #main}
 * prints them as {@code BENCH name=<naive-kafka|once-kafka> mode=batch conns=1 events_per_s=<x>}
 * lines. Arguments: number of events (default {@value #DEFAULT_EVENTS}).
 */
public final class KafkaEndToEnd implements Suite {

    public static final int DEFAULT_EVENTS = 100_000;
    static final int ACCOUNTS = 1_000;
    static final int MAX_POLL_RECORDS = 500;
    static final int PARTITIONS = 6;
    static final int WARMUP_EVENTS = 20_000;
    static final int QUICK_EVENTS = 20_000;

    /** One measured run. */
    public record Result(String name, String mode, int conns, long events, double seconds) {

        public double eventsPerSecond() {
            return events / seconds;
        }

        /** The line the benchmark harness collects. */
        public String line() {
            return String.format(
                    Locale.ROOT,
                    "BENCH name=%s mode=%s conns=%d events_per_s=%.0f",
                    name,
                    mode,
                    conns,
                    eventsPerSecond());
        }
    }

    @Override
    public String name() {
        return "kafka";
    }

    @Override
    public void run(Run run) throws Exception {
        int events = run.settings().quick() ? QUICK_EVENTS : DEFAULT_EVENTS;
        List<Result> results;
        try (TestKafka kafka = TestKafka.start();
                BenchPostgres.Db db = run.postgres().freshDatabase(1)) {
            Run.progress("kafka: " + events + " events, " + PARTITIONS + " partitions, in-process broker at "
                    + kafka.bootstrapServers());
            results = run(kafka, db.dataSource(), events);
        }
        StringBuilder md = new StringBuilder();
        md.append("Kafka (in-process KRaft broker) to PostgreSQL, ")
                .append(events)
                .append(" events over ")
                .append(PARTITIONS)
                .append(" partitions, `max.poll.records=")
                .append(MAX_POLL_RECORDS)
                .append("`, one connection, one run each after a ")
                .append(Math.min(WARMUP_EVENTS, events / 5))
                .append("-event warm-up. Naive: Kafka auto-commit, the poll's records applied in one transaction, no"
                        + " claim; mode `batch` one `UPDATE` per record, mode `batch-set` one `UPDATE … FROM unnest` per"
                        + " poll, pre-aggregated per account and sorted. Once: `KafkaConsumerRunner`, one `processBatch`"
                        + " (one claim statement, one transaction) per batch (the polls that arrived while the previous"
                        + " batch ran, up to `maxBatchRecords`, default 4 polls), `commitAsync` after the database commit;"
                        + " mode `batch` the per-event handler, mode `batch-set` `batchHandler(...)` running the same"
                        + " set-based update as the naive one.\n\n"
                        + "| consumer | mode | events/s |\n|---|---|---|\n");
        for (Result r : results) {
            run.line(r.line());
            md.append("| ")
                    .append(r.name())
                    .append(" | ")
                    .append(r.mode())
                    .append(" | ")
                    .append(Math.round(r.eventsPerSecond()))
                    .append(" |\n");
        }
        double perEvent = results.get(1).eventsPerSecond() / results.get(0).eventsPerSecond();
        double set = results.get(3).eventsPerSecond() / results.get(2).eventsPerSecond();
        md.append('\n')
                .append(CoreSuite.check(
                        String.format(
                                Locale.ROOT,
                                "once batch-set >= 0.8x the naive consumer with the same set-based update: %.2f",
                                set),
                        set >= 0.8));
        md.append("- bound: once inserts one inbox row per event (the claim), the naive consumer none; on one"
                + " connection the claim insert is most of once's database time (see \"What bounds each figure\")\n");
        md.append(String.format(Locale.ROOT, "- (for reference) per-record update, once / naive: %.2f%n", perEvent));
        md.append(String.format(
                Locale.ROOT,
                "- (for reference) once batch-set / once per-event handler: %.2fx%n",
                results.get(3).eventsPerSecond() / results.get(1).eventsPerSecond()));
        run.section("Kafka end to end: naive vs once", md.toString());
    }

    public static void main(String[] args) throws Exception {
        int events = args.length > 0 ? Integer.parseInt(args[0]) : DEFAULT_EVENTS;
        for (Result r : run(events)) {
            System.out.println(r.line());
        }
        System.exit(0);
    }

    /**
     * Starts a durable embedded PostgreSQL and the in-process Kafka (or {@value TestKafka#BOOTSTRAP_ENV}),
     * runs naive then once over {@code events} events, and stops both.
     *
     * @return naive-kafka, then once-kafka
     */
    public static List<Result> run(int events) throws Exception {
        try (EmbeddedPostgres pg = TestPostgres.embedded(true);
                TestKafka kafka = TestKafka.start();
                HikariDataSource ds = pool(pg.getJdbcUrl("postgres", "postgres"))) {
            Schema.migrate(ds);
            return run(kafka, ds, events);
        }
    }

    /**
     * As {@link #run(int)} on a given broker and database, which holds the once tables and should
     * have fsync on for the figures to mean anything; one connection is used at a time.
     */
    public static List<Result> run(TestKafka kafka, DataSource ds, int events) throws Exception {
        String warm = kafka.createTopic("bench-warmup", PARTITIONS);
        int warmup = Math.min(WARMUP_EVENTS, events / 5);
        publish(kafka, warm, warmup);
        reset(ds);
        naive(kafka, warm, ds, warmup, false);
        reset(ds);
        once(kafka, warm, ds, warmup, true);

        String topic = kafka.createTopic("bench", PARTITIONS);
        publish(kafka, topic, events);
        reset(ds);
        List<Result> results = new ArrayList<>();
        for (boolean set : new boolean[] {false, true}) {
            results.add(naive(kafka, topic, ds, events, set));
            check(ds, events, results.get(results.size() - 1).name());
            reset(ds);
            results.add(once(kafka, topic, ds, events, set));
            check(ds, events, results.get(results.size() - 1).name());
            reset(ds);
        }
        return results;
    }

    /** The business effect, the same for both consumers. */
    static void credit(Connection c, Delivery d) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("UPDATE bench_account SET balance = balance + ? WHERE id = ?")) {
            ps.setLong(1, 1);
            ps.setInt(2, Math.floorMod(d.eventId().hashCode(), ACCOUNTS));
            ps.executeUpdate();
        }
    }

    /**
     * The same effect for a whole poll, set-based: the credits summed per account, sorted, one
     * {@code UPDATE … FROM unnest}. The naive set consumer and once's batch handler both run it.
     */
    static void creditAll(Connection c, List<Delivery> deliveries) throws SQLException {
        TreeMap<Integer, Long> perAccount = new TreeMap<>();
        for (Delivery d : deliveries) {
            perAccount.merge(Math.floorMod(d.eventId().hashCode(), ACCOUNTS), 1L, Long::sum);
        }
        try (PreparedStatement ps = c.prepareStatement("UPDATE bench_account a SET balance = a.balance + d.amount"
                + " FROM unnest(?::int[], ?::bigint[]) AS d(id, amount) WHERE a.id = d.id")) {
            ps.setArray(1, c.createArrayOf("int", perAccount.keySet().toArray())); // 1 account ids
            ps.setArray(2, c.createArrayOf("bigint", perAccount.values().toArray())); // 2 amounts
            ps.executeUpdate();
        }
    }

    private static Result naive(TestKafka kafka, String topic, DataSource ds, int events, boolean set)
            throws Exception {
        Map<String, Object> p = consumerProperties(kafka, (set ? "naive-set-" : "naive-") + topic);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
        long done = 0;
        long start = System.nanoTime();
        try (KafkaConsumer<byte[], byte[]> consumer =
                        new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                Connection c = ds.getConnection()) {
            consumer.subscribe(List.of(topic));
            c.setAutoCommit(false);
            while (done < events) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                List<Delivery> poll = new ArrayList<>(records.count());
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String id = new String(
                            r.headers()
                                    .lastHeader(OutboxMessage.EVENT_ID_HEADER)
                                    .value(),
                            StandardCharsets.UTF_8);
                    poll.add(Delivery.of(id, r.value()));
                }
                if (set) {
                    creditAll(c, poll);
                } else {
                    for (Delivery d : poll) {
                        credit(c, d);
                    }
                }
                c.commit();
                done += records.count();
            }
        }
        return new Result("naive-kafka", set ? "batch-set" : "batch", 1, events, (System.nanoTime() - start) / 1e9);
    }

    private static Result once(TestKafka kafka, String topic, DataSource ds, int events, boolean set) throws Exception {
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        KafkaConsumerRunnerBuilder builder = KafkaConsumerRunner.builder()
                .kafkaProperties(consumerProperties(kafka, (set ? "once-set-" : "once-") + topic))
                .topics(topic)
                .meterRegistry(meters);
        builder.dataSource(ds).consumer("bench");
        if (set) {
            builder.batchHandler((claimed, tx) -> creditAll(tx.connection(), claimed));
        } else {
            builder.handler((d, tx) -> credit(tx.connection(), d));
        }
        long start = System.nanoTime();
        KafkaConsumerRunner runner = builder.build().start();
        try {
            while (meters.get("once.kafka.records.applied").counter().count() < events) {
                Thread.sleep(1);
            }
            return new Result("once-kafka", set ? "batch-set" : "batch", 1, events, (System.nanoTime() - start) / 1e9);
        } finally {
            runner.close();
        }
    }

    private static Map<String, Object> consumerProperties(TestKafka kafka, String group) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(MAX_POLL_RECORDS));
        return p;
    }

    private static void publish(TestKafka kafka, String topic, int events) throws Exception {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
        // One request in flight: on a loaded 2-core machine the in-process broker was seen answering
        // OUT_OF_ORDER_SEQUENCE_NUMBER forever to an idempotent producer with five in flight.
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>(events);
            for (int i = 0; i < events; i++) {
                ProducerRecord<byte[], byte[]> r =
                        new ProducerRecord<>(topic, i % PARTITIONS, null, "1".getBytes(StandardCharsets.UTF_8));
                r.headers().add(OutboxMessage.EVENT_ID_HEADER, (topic + "-" + i).getBytes(StandardCharsets.UTF_8));
                sent.add(producer.send(r));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                f.get();
            }
        }
    }

    private static HikariDataSource pool(String jdbcUrl) {
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(jdbcUrl);
        config.setMaximumPoolSize(1);
        config.setPoolName("bench-kafka");
        return new HikariDataSource(config);
    }

    private static void reset(DataSource ds) throws SQLException {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement()) {
            s.execute("DROP TABLE IF EXISTS bench_account");
            s.execute("CREATE TABLE bench_account (id int PRIMARY KEY, balance bigint NOT NULL)");
            s.execute("INSERT INTO bench_account SELECT g, 0 FROM generate_series(0, " + (ACCOUNTS - 1) + ") g");
            s.execute("TRUNCATE once_inbox");
        }
    }

    private static void check(DataSource ds, int events, String who) throws SQLException {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement();
                var rs = s.executeQuery("SELECT sum(balance) FROM bench_account")) {
            rs.next();
            if (rs.getLong(1) != events) {
                throw new IllegalStateException(who + " run credited " + rs.getLong(1) + " instead of " + events);
            }
        }
    }
}
