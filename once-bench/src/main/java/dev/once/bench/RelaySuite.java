package dev.once.bench;

import com.google.api.gax.core.NoCredentialsProvider;
import com.google.api.gax.grpc.GrpcTransportChannel;
import com.google.api.gax.rpc.FixedTransportChannelProvider;
import com.google.cloud.pubsub.v1.SubscriptionAdminClient;
import com.google.cloud.pubsub.v1.SubscriptionAdminSettings;
import com.google.cloud.pubsub.v1.TopicAdminClient;
import com.google.cloud.pubsub.v1.TopicAdminSettings;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.Subscription;
import com.google.pubsub.v1.TopicName;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.kafka.KafkaPublisher;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Publisher;
import dev.once.pubsub.PubSubPublisher;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestPubSubEmulator;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The outbox relay to Kafka (in-process KRaft broker), on the harness's PostgreSQL: throughput
 * draining a backlog, and commit-to-publish latency at a steady write rate with LISTEN/NOTIFY
 * wake-ups. Each with the concurrent batch path ({@link KafkaPublisher#publishAll}: the batch's
 * sends in flight together, then one wait) and with the old sequential path (the same publisher
 * behind a lambda, so the relay sends one message and waits for its ack before the next).
 * Beside it, when Google's Pub/Sub emulator is installed, the same backlog drain to Pub/Sub
 * ({@link PubSubPublisher}). Commit-to-publish is the broker's append time of the record (topic with
 * {@code message.timestamp.type=LogAppendTime}) minus the writer's clock when its commit returned.
 */
final class RelaySuite implements Suite {

    static final int PARTITIONS = 6;
    static final int KEYS = 10_000;
    static final int BATCH = 1000;
    static final int RELAYS = 4;
    /** Offered load of the latency run: transactions per second, rows per transaction. */
    static final int TX_PER_S = 500;

    static final int ROWS_PER_TX = 10;

    record Throughput(String mode, long rows, double seconds) {
        double perSecond() {
            return rows / seconds;
        }
    }

    record Latency(String mode, long rows, double offered, double p50, double p99, double max) {}

    @Override
    public String name() {
        return "relay";
    }

    @Override
    public void run(Run run) throws Exception {
        double seconds = Math.min(20, Math.max(3, run.settings().measured().toMillis() / 1000.0));
        List<Throughput> throughput = new ArrayList<>();
        List<Latency> latency = new ArrayList<>();
        try (TestKafka kafka = TestKafka.start()) {
            Run.progress("relay: in-process broker at " + kafka.bootstrapServers());
            for (boolean concurrent : new boolean[] {true, false}) {
                try (BenchPostgres.Db db = run.postgres().freshDatabase(2 * RELAYS + 2);
                        KafkaPublisher kp = publisher(kafka)) {
                    run.postgres().checkpoint();
                    throughput.add(throughput(kafka, db.dataSource(), kp, concurrent, seconds));
                }
                try (BenchPostgres.Db db = run.postgres().freshDatabase(2 * RELAYS + 2);
                        KafkaPublisher kp = publisher(kafka)) {
                    run.postgres().checkpoint();
                    latency.add(latency(kafka, db.dataSource(), kp, concurrent, seconds));
                }
            }
        }
        Throughput pubsub = pubSub(run, seconds);
        StringBuilder md = new StringBuilder();
        md.append("Outbox relay to Kafka (in-process KRaft broker, ")
                .append(PARTITIONS)
                .append(" partitions), `KafkaPublisher` (`acks=all`, idempotent), ")
                .append(RELAYS)
                .append(" relays, batch ")
                .append(BATCH)
                .append(", rows over ")
                .append(KEYS)
                .append(" keys. Mode `concurrent`: `publishAll` sends a batch's rows together and waits once;"
                        + " `sequential`: the old path, one send and its ack after the other. Throughput: a backlog"
                        + " drained for ")
                .append(seconds)
                .append(" s. Latency: writers commit ")
                .append(TX_PER_S)
                .append(" transactions/s of ")
                .append(ROWS_PER_TX)
                .append(" rows each (")
                .append(TX_PER_S * ROWS_PER_TX)
                .append(" messages/s offered) through `IdempotentConsumer` handlers for ")
                .append(seconds)
                .append(" s, the relays started (LISTEN/NOTIFY); commit-to-publish = the broker's append time minus"
                        + " the writer's clock when its commit returned.\n\n"
                        + " The writers fall short of the offered rate when the machine is loaded: the table gives"
                        + " the rate they reached.\n\n"
                        + "| mode | messages/s (backlog) | written messages/s | p50 ms | p99 ms | max ms | latency rows |\n"
                        + "|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < throughput.size(); i++) {
            Throughput t = throughput.get(i);
            Latency l = latency.get(i);
            run.line(String.format(
                    Locale.ROOT,
                    "BENCH name=relay-kafka mode=%s conns=%d batch=%d events_per_s=%d p50_ms=%.1f p99_ms=%.1f",
                    t.mode(),
                    RELAYS,
                    BATCH,
                    Math.round(t.perSecond()),
                    l.p50(),
                    l.p99()));
            md.append(String.format(
                    Locale.ROOT,
                    "| %s | %d | %d | %.1f | %.1f | %.1f | %d |%n",
                    t.mode(),
                    Math.round(t.perSecond()),
                    Math.round(l.offered()),
                    l.p50(),
                    l.p99(),
                    l.max(),
                    l.rows()));
        }
        Throughput c = throughput.get(0);
        Latency cl = latency.get(0);
        md.append('\n')
                .append(CoreSuite.check(
                        String.format(
                                Locale.ROOT, "relay -> Kafka >= 20,000 messages/s: %d", Math.round(c.perSecond())),
                        c.perSecond() >= 20_000))
                .append(CoreSuite.check(
                        String.format(Locale.ROOT, "relay -> Kafka p99 commit-to-publish < 100 ms: %.1f ms", cl.p99()),
                        cl.p99() < 100))
                .append(String.format(
                        Locale.ROOT,
                        "- (for reference) concurrent / sequential throughput: %.1fx%n",
                        c.perSecond() / throughput.get(1).perSecond()));
        if (pubsub != null) {
            run.line(String.format(
                    Locale.ROOT,
                    "BENCH name=relay-pubsub mode=%s conns=%d batch=%d events_per_s=%d",
                    pubsub.mode(),
                    RELAYS,
                    BATCH,
                    Math.round(pubsub.perSecond())));
            md.append(String.format(
                    Locale.ROOT,
                    "%nOutbox relay to Google Cloud Pub/Sub (Google's emulator, one topic with one subscription),"
                            + " `PubSubPublisher` (the client's batching, ordering key = row key), the same relays,"
                            + " batch and keys, backlog drained for %.1f s: %d messages/s"
                            + " (%.2fx the Kafka concurrent figure of this run). The emulator is a single in-memory"
                            + " process, not Pub/Sub's service: the figure is the relay's and the client's cost"
                            + " against it, not a forecast for production.%n",
                    pubsub.seconds(),
                    Math.round(pubsub.perSecond()),
                    pubsub.perSecond() / c.perSecond()));
        }
        run.section("Relay to Kafka: throughput and commit-to-publish latency", md.toString());
    }

    /**
     * The backlog drain to Pub/Sub through {@link PubSubPublisher} on Google's emulator (started
     * by the test kit); null, with a progress line, when the emulator is not installed.
     */
    private Throughput pubSub(Run run, double seconds) throws Exception {
        String host;
        try {
            host = TestPubSubEmulator.host();
        } catch (RuntimeException e) {
            Run.progress("relay: no Pub/Sub run: " + e.getMessage());
            return null;
        }
        ManagedChannel channel =
                ManagedChannelBuilder.forTarget(host).usePlaintext().build();
        try {
            var channels = FixedTransportChannelProvider.create(GrpcTransportChannel.create(channel));
            String project = "once-bench";
            TopicName topic = TopicName.of(project, "relay-pubsub-" + System.nanoTime());
            try (var topics = TopicAdminClient.create(TopicAdminSettings.newBuilder()
                            .setTransportChannelProvider(channels)
                            .setCredentialsProvider(NoCredentialsProvider.create())
                            .build());
                    var subscriptions = SubscriptionAdminClient.create(SubscriptionAdminSettings.newBuilder()
                            .setTransportChannelProvider(channels)
                            .setCredentialsProvider(NoCredentialsProvider.create())
                            .build())) {
                topics.createTopic(topic);
                subscriptions.createSubscription(Subscription.newBuilder()
                        .setName(ProjectSubscriptionName.of(project, topic.getTopic())
                                .toString())
                        .setTopic(topic.toString())
                        .setAckDeadlineSeconds(60)
                        .build());
            }
            try (BenchPostgres.Db db = run.postgres().freshDatabase(2 * RELAYS + 2);
                    PubSubPublisher publisher = PubSubPublisher.builder()
                            .project(project)
                            .channelProvider(channels)
                            .credentialsProvider(NoCredentialsProvider.create())
                            .build()) {
                run.postgres().checkpoint();
                return throughput(db.dataSource(), publisher, topic.getTopic(), "concurrent", 200_000, seconds);
            }
        } finally {
            channel.shutdownNow();
        }
    }

    private static KafkaPublisher publisher(TestKafka kafka) {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "1");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
        return KafkaPublisher.create(p);
    }

    /** The publisher the relay gets: itself (concurrent), or behind a lambda that only sends one at a time. */
    private static Publisher driven(KafkaPublisher kp, boolean concurrent) {
        return concurrent ? kp : kp::publish;
    }

    private static List<OutboxRelay> relays(DataSource ds, Publisher publisher) {
        List<OutboxRelay> relays = new ArrayList<>();
        for (int i = 0; i < RELAYS; i++) {
            relays.add(OutboxRelay.builder()
                    .dataSource(ds)
                    .name("bench-" + i)
                    .batchSize(BATCH)
                    .deleteSent(false)
                    .pollInterval(Duration.ofMillis(200))
                    .meterRegistry(new SimpleMeterRegistry())
                    .publisher(publisher)
                    .build());
        }
        return relays;
    }

    private Throughput throughput(TestKafka kafka, DataSource ds, KafkaPublisher kp, boolean concurrent, double s)
            throws Exception {
        String mode = concurrent ? "concurrent" : "sequential";
        String topic = kafka.createTopic("relay-tp-" + mode, PARTITIONS);
        // A backlog larger than the run can drain: the relay never waits for rows.
        long backlog = concurrent ? 1_000_000 : 100_000;
        return throughput(ds, driven(kp, concurrent), topic, mode, backlog, s);
    }

    /** Drains a backlog of {@code backlog} rows to {@code topic} with {@link #RELAYS} relays for {@code s} seconds. */
    private Throughput throughput(DataSource ds, Publisher publisher, String topic, String mode, long backlog, double s)
            throws Exception {
        Run.progress("relay: throughput to " + topic + ", " + mode + ", backlog of " + backlog + " rows");
        try (Connection c = ds.getConnection();
                Statement st = c.createStatement()) {
            st.execute("INSERT INTO once_outbox (event_id, destination, msg_key, payload, headers, idempotency_key,"
                    + " available_at, created_at) SELECT 'bench:e' || g || '#1', '" + topic + "', 'k' || (g % " + KEYS
                    + "), '\\x31', '', 'bench:e' || g || '#1', now(), now() FROM generate_series(1, " + backlog
                    + ") g");
            st.execute("ANALYZE once_outbox");
        }
        List<OutboxRelay> relays = relays(ds, publisher);
        // A short warm-up: the producer's metadata, the statements' plans.
        relays.get(0).relayOnce();
        long before = sent(ds);
        long start = System.nanoTime();
        long end = start + (long) (s * 1e9);
        List<Thread> threads = new ArrayList<>();
        for (OutboxRelay r : relays) {
            Thread t = new Thread(() -> {
                while (System.nanoTime() < end && r.relayOnce() > 0) {
                    // next batch
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        long rows = sent(ds) - before;
        relays.forEach(OutboxRelay::close);
        return new Throughput(mode, rows, seconds);
    }

    private Latency latency(TestKafka kafka, DataSource ds, KafkaPublisher kp, boolean concurrent, double s)
            throws Exception {
        String mode = concurrent ? "concurrent" : "sequential";
        String topic = "relay-lat-" + mode + "-" + System.nanoTime();
        kafka.createTopic(topic, PARTITIONS, Map.of("message.timestamp.type", "LogAppendTime"));
        Run.progress("relay: latency, " + mode + ", " + TX_PER_S * ROWS_PER_TX + " messages/s offered");
        Map<String, Long> committedAt = new ConcurrentHashMap<>();
        IdempotentConsumer writer = IdempotentConsumer.builder()
                .dataSource(ds)
                .consumer("bench")
                .meterRegistry(new SimpleMeterRegistry())
                .handler((d, tx) -> {
                    for (int n = 0; n < ROWS_PER_TX; n++) {
                        tx.outbox()
                                .add(
                                        topic,
                                        "k" + Math.floorMod((d.eventId() + n).hashCode(), KEYS),
                                        new byte[] {'1'},
                                        Map.of(),
                                        null);
                    }
                })
                .build();
        List<OutboxRelay> relays = relays(ds, driven(kp, concurrent));
        relays.forEach(OutboxRelay::start);
        AtomicBoolean consuming = new AtomicBoolean(true);
        List<Long> latencies = new ArrayList<>();
        Thread consumer = new Thread(() -> consume(kafka, topic, committedAt, latencies, consuming));
        consumer.start();
        long written = 0;
        double offered;
        try {
            long start = System.nanoTime();
            long end = start + (long) (s * 1e9);
            long tx = 0;
            while (System.nanoTime() < end) {
                long due = start + tx * 1_000_000_000L / TX_PER_S;
                // Parked, not spinning: a spinning writer takes a core from the relays and the broker.
                for (long wait = due - System.nanoTime(); wait > 0; wait = due - System.nanoTime()) {
                    LockSupport.parkNanos(wait);
                }
                String id = "lat-" + mode + "-" + tx;
                writer.process(Delivery.of(id, new byte[0]));
                long now = System.currentTimeMillis();
                for (int n = 1; n <= ROWS_PER_TX; n++) {
                    committedAt.put("bench:" + id + "#" + n, now);
                }
                tx++;
                written += ROWS_PER_TX;
            }
            offered = written / ((System.nanoTime() - start) / 1e9);
            // Drain what was written, at most 60 s (the sequential path may lag far behind).
            long drainEnd = System.nanoTime() + 60_000_000_000L;
            while (System.nanoTime() < drainEnd && size(latencies) < written) {
                Thread.sleep(50);
            }
        } finally {
            relays.forEach(OutboxRelay::close);
            consuming.set(false);
            consumer.join();
        }
        long[] sorted;
        synchronized (latencies) {
            sorted = latencies.stream().mapToLong(Long::longValue).toArray();
        }
        Arrays.sort(sorted);
        if (sorted.length < written) {
            Run.progress("relay: " + mode + " published " + sorted.length + " of " + written
                    + " rows within the drain time; latencies of the rest are not counted (they are higher)");
        }
        return new Latency(
                mode,
                sorted.length,
                offered,
                percentile(sorted, 0.50),
                percentile(sorted, 0.99),
                sorted.length == 0 ? Double.NaN : sorted[sorted.length - 1]);
    }

    private static int size(List<Long> latencies) {
        synchronized (latencies) {
            return latencies.size();
        }
    }

    private static void consume(
            TestKafka kafka, String topic, Map<String, Long> committedAt, List<Long> latencies, AtomicBoolean on) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, "lat-" + topic);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<byte[], byte[]> c =
                new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(List.of(topic));
            while (on.get()) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    String id = new String(
                            r.headers()
                                    .lastHeader(OutboxMessage.EVENT_ID_HEADER)
                                    .value(),
                            StandardCharsets.UTF_8);
                    Long at = committedAt.get(id);
                    if (at != null) {
                        synchronized (latencies) {
                            latencies.add(Math.max(0, r.timestamp() - at));
                        }
                    }
                }
            }
        }
    }

    private static double percentile(long[] sorted, double q) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(q * sorted.length) - 1)];
    }

    private static long sent(DataSource ds) throws SQLException {
        try (Connection c = ds.getConnection();
                Statement st = c.createStatement();
                var rs = st.executeQuery("SELECT count(*) FROM once_outbox WHERE status = 'sent'")) {
            rs.next();
            return rs.getLong(1);
        }
    }
}
