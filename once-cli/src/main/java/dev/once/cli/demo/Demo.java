package dev.once.cli.demo;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.RetryPolicy;
import dev.once.Schema;
import dev.once.cli.internal.Databases;
import dev.once.cli.internal.Failure;
import dev.once.outbox.HttpPublisher;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxRelay;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestPostgres;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The scenario behind the page and the headless run, on real parts: PostgreSQL, a Kafka topic
 * with {@value #PARTITIONS} partitions read by two consumer groups (the two lanes), a payment
 * provider behind HTTP and the outbox relay. Every button is one {@link Action}: a new $20
 * payment published to the topic, plus the fault that makes a real duplicate of it.
 * Thread-safe; actions may run while the lanes work.
 */
public final class Demo implements AutoCloseable {

    /** Every payment is $20, so that two separate payments look the same except for their ids. */
    public static final int AMOUNT = 20;

    static final int PARTITIONS = 2;
    private static final int STORY_LINES = 6;
    private static final Pattern SCHEMA = Pattern.compile("[a-z_][a-z0-9_]{0,62}");

    /** The buttons. */
    public enum Action {
        DELIVER("deliver", null),
        DOUBLE_PUBLISH("double-publish", Fault.DOUBLE_PUBLISH),
        CRASH("crash", Fault.CRASH_IN_ACK_GAP),
        REBALANCE("rebalance", Fault.SLOW_BATCH_REBALANCE),
        CONCURRENT("concurrent", Fault.CONCURRENT);

        public final String key;
        final Fault fault;

        Action(String key, Fault fault) {
            this.key = key;
            this.fault = fault;
        }

        /** @throws IllegalArgumentException naming the key and the known ones */
        public static Action byKey(String key) {
            for (Action a : values()) {
                if (a.key.equals(key)) {
                    return a;
                }
            }
            throw new IllegalArgumentException("unknown action '" + key + "'; expected one of deliver, double-publish,"
                    + " crash, rebalance, concurrent");
        }
    }

    /**
     * Where the demo runs.
     *
     * @param postgresUrl JDBC URL of a PostgreSQL to use, or null for an embedded one
     * @param kafka       {@code host:port} of a Kafka broker to use, or null for an embedded one
     * @param schema      the PostgreSQL schema the demo owns: dropped and created afresh
     */
    public record Options(String postgresUrl, String kafka, String schema) {
        public Options {
            if (schema == null || !SCHEMA.matcher(schema).matches()) {
                throw Failure.usage(
                        "--schema '" + schema + "' is not a plain lower-case identifier; expected e.g. once_demo");
            }
        }
    }

    private final List<AutoCloseable> closeables = new ArrayList<>();
    private final Faults faults = new Faults();
    private final AtomicInteger payments = new AtomicInteger();
    private final AtomicInteger performing = new AtomicInteger();
    private final Deque<String> story = new ArrayDeque<>();
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private HikariDataSource dataSource;
    private HikariDataSource providerStore;
    private PaymentProvider provider;
    private KafkaProducer<String, String> producer;
    private Admin admin;
    private String topic;
    private NaiveLane naive;
    private OnceLane once;
    private OutboxRelay relay;
    private LostAnswers lostAnswers;
    private OutboxAdmin outboxAdmin;

    private Demo() {}

    /**
     * Starts everything; {@code progress} hears what is starting. On failure everything started so far is closed.
     *
     * @throws Failure naming the PostgreSQL or Kafka that could not be reached
     */
    public static Demo start(Options options, Consumer<String> progress) {
        Demo demo = new Demo();
        try {
            demo.startParts(options, progress);
            return demo;
        } catch (RuntimeException e) {
            demo.close();
            throw e;
        } catch (Exception e) {
            demo.close();
            throw Failure.failed("the demo could not start: " + Databases.rootMessage(e), e);
        }
    }

    private void startParts(Options options, Consumer<String> progress) throws Exception {
        String pgUrl = options.postgresUrl();
        if (pgUrl == null) {
            progress.accept("starting PostgreSQL (embedded)");
            EmbeddedPostgres pg = TestPostgres.embedded(false);
            closeables.add(pg);
            pgUrl = pg.getJdbcUrl("postgres", "postgres");
        }
        dataSource = openSchema(pgUrl, options.schema());
        closeables.add(dataSource);
        Schema.migrate(dataSource);
        try (Connection c = dataSource.getConnection();
                Statement s = c.createStatement()) {
            s.execute(DemoSql.CREATE_NAIVE_LEDGER);
            s.execute(DemoSql.CREATE_ONCE_LEDGER);
        }

        String bootstrap = options.kafka();
        if (bootstrap == null) {
            progress.accept("starting Kafka (embedded, KRaft)");
            TestKafka kafka = TestKafka.start();
            closeables.add(kafka);
            bootstrap = kafka.bootstrapServers();
        }
        admin = Admin.create(Map.of(
                AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG,
                bootstrap,
                AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG,
                15_000,
                AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG,
                5_000));
        closeables.add(admin);
        topic = "once-demo-payments-" + runId;
        try {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1)))
                    .all()
                    .get(20, TimeUnit.SECONDS);
        } catch (ExecutionException | TimeoutException e) {
            throw Failure.failed(
                    "cannot use Kafka at " + bootstrap + ": " + Databases.rootMessage(e)
                            + "; check that a broker listens there (--kafka HOST:PORT), or drop --kafka for an embedded one",
                    e);
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producer = new KafkaProducer<>(p);
        closeables.add(producer);

        progress.accept("starting the payment provider, the consumers and the outbox relay");
        providerStore = openSchema(pgUrl, options.schema() + "_provider");
        closeables.add(providerStore);
        Schema.migrate(providerStore);
        provider = new PaymentProvider(providerStore);
        closeables.add(provider);
        HttpClient http =
                HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
        naive = new NaiveLane(
                bootstrap, topic, "once-demo-naive-" + runId, faults, dataSource, http, provider.chargesUrl());
        once = new OnceLane(bootstrap, topic, "once-demo-once-" + runId, faults, dataSource, provider.chargesUrl());
        closeables.add(naive);
        closeables.add(once);
        lostAnswers = new LostAnswers(HttpPublisher.builder()
                .client(http)
                .timeout(Duration.ofSeconds(5))
                .build());
        relay = OutboxRelay.builder()
                .dataSource(dataSource)
                .publisher(lostAnswers)
                .name("once-demo-relay")
                .pollInterval(Duration.ofMillis(100))
                // A lost answer is retried at once: the page should show the replay, not a backoff.
                .retryPolicy(RetryPolicy.builder()
                        .initialDelay(Duration.ofMillis(50))
                        .maxDelay(Duration.ofSeconds(1))
                        .maxRetries(9)
                        .build())
                .build();
        relay.start();
        closeables.add(relay);
        outboxAdmin = OutboxAdmin.builder().dataSource(dataSource).build();
        naive.start();
        once.start();
    }

    private static HikariDataSource openSchema(String url, String schema) {
        try (Connection c = DriverManager.getConnection(url);
                Statement s = c.createStatement()) {
            s.execute("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
            s.execute("CREATE SCHEMA " + schema);
        } catch (SQLException e) {
            throw Failure.failed(
                    "cannot use PostgreSQL at " + url + ": " + e.getMessage()
                            + "; check that it is running and the URL is right (--postgres jdbc:postgresql://HOST:PORT/DB?user=U),"
                            + " or drop --postgres for an embedded one",
                    e);
        }
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(url + (url.contains("?") ? "&" : "?") + "currentSchema=" + schema);
        config.setMaximumPoolSize(12);
        config.setMinimumIdle(2);
        config.setPoolName("once-demo");
        return new HikariDataSource(config);
    }

    /** Performs one button's action and returns the line that explains it. */
    public String perform(Action action) {
        performing.incrementAndGet();
        try {
            return doPerform(action);
        } finally {
            performing.decrementAndGet();
        }
    }

    private String doPerform(Action action) {
        int n = payments.incrementAndGet();
        String id = "pay-" + n;
        Payment payment = new Payment(id, id, AMOUNT);
        if (action.fault != null) {
            faults.plan(id, action.fault);
        }
        String line = switch (action) {
            case DELIVER -> {
                publish(payment, null);
                yield "Deliver: " + id + " published once. Both lanes apply it once; no duplicate, the ledgers agree.";
            }
            case DOUBLE_PUBLISH -> {
                publish(payment, null);
                publish(payment, null);
                yield "Double publish: " + id + " published twice with the same event id, as a producer does when it"
                        + " retries after a lost ack. Naive applied both copies and charged twice; once claimed the id"
                        + " on the first copy and discarded the second.";
            }
            case CRASH -> {
                lostAnswers.loseNextAnswer("charge:" + id);
                publish(payment, null);
                yield "Crash in the ack gap: each consumer committed " + id + " to PostgreSQL, then died before"
                        + " committing its Kafka offset; a new consumer read " + id + " again. Naive applied it twice;"
                        + " once found the id claimed. The outbox relay then lost the provider's answer to the charge"
                        + " and sent it again with the same Idempotency-Key: the provider replayed, no second charge.";
            }
            case REBALANCE -> {
                publish(payment, null);
                yield "Rebalance after a slow batch: a worker spent " + Lane.SLOW_BATCH.toSeconds() + " s on the batch"
                        + " holding " + id + ", longer than max.poll.interval.ms (" + Lane.MAX_POLL_INTERVAL.toSeconds()
                        + " s). The group rebalanced, the other worker read " + id
                        + " again, and the slow worker's offset"
                        + " commit was refused. Naive applied it twice; once discarded the second copy.";
            }
            case CONCURRENT -> {
                publish(payment, 0);
                publish(payment, 1);
                yield "Two concurrent deliveries: " + id + " reached both workers of each group at the same moment"
                        + " (as when a partition moves while its old owner still works). Both naive workers applied it;"
                        + " the once workers raced on the claim, one won, the other waited on the unique index and"
                        + " found the id taken.";
            }
        };
        synchronized (story) {
            story.addFirst(line);
            while (story.size() > STORY_LINES) {
                story.removeLast();
            }
        }
        return line;
    }

    private void publish(Payment p, Integer partition) {
        ProducerRecord<String, String> r = new ProducerRecord<>(topic, partition, p.paymentId(), p.body());
        r.headers().add(Lane.EVENT_ID_HEADER, p.eventId().getBytes(StandardCharsets.UTF_8));
        try {
            producer.send(r).get(15, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while publishing " + p.eventId(), e);
        } catch (ExecutionException | TimeoutException e) {
            throw new IllegalStateException(
                    "could not publish " + p.eventId() + " to " + topic + ": " + Databases.rootMessage(e), e);
        }
    }

    /** The numbers as they are now. */
    public DemoState state() {
        // In this order: a payment counted here is either still in flight (not settled) or fully
        // reflected in the figures read after, so a settled state is always a consistent one.
        int made = payments.get();
        boolean settled = settled();
        long[] naiveLedger = balance("naive_ledger");
        long[] onceLedger = balance("once_ledger");
        List<DemoState.Discarded> discarded = once.recentDiscards().stream()
                .map(d -> new DemoState.Discarded(d.paymentId(), d.reason(), d.worker()))
                .toList();
        DemoState.LaneState n = new DemoState.LaneState(
                naive.deliveries.get(),
                naiveLedger[0],
                naiveLedger[0] - naiveLedger[1],
                0,
                0,
                provider.charges(NaiveLane.NAME),
                provider.replays(NaiveLane.NAME),
                naive.crashes.get(),
                naive.refusedCommits.get(),
                naive.recentLog(),
                List.of());
        DemoState.LaneState o = new DemoState.LaneState(
                once.deliveries.get(),
                onceLedger[0],
                onceLedger[0] - onceLedger[1],
                once.discardedAmount.get(),
                once.discardedCount.get(),
                provider.charges(OnceLane.NAME),
                provider.replays(OnceLane.NAME),
                once.crashes.get(),
                once.refusedCommits.get(),
                once.recentLog(),
                discarded);
        List<String> lines;
        synchronized (story) {
            lines = List.copyOf(story);
        }
        long delivered = once.deliveries.get();
        return new DemoState(
                (long) made * AMOUNT, made, delivered, delivered - once.applied.get(), settled, n, o, lines);
    }

    private long[] balance(String ledger) {
        try (Connection c = dataSource.getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(DemoSql.balance(ledger))) {
            rs.next();
            return new long[] {rs.getLong(1), rs.getLong(2)};
        } catch (SQLException e) {
            throw new IllegalStateException("reading " + ledger + " failed: " + e.getMessage(), e);
        }
    }

    /**
     * True when nothing is left to happen: both groups have committed every offset of the topic,
     * no worker is inside a batch, and the outbox has nothing pending.
     */
    public boolean settled() {
        if (performing.get() > 0 || naive.inFlight.get() > 0 || once.inFlight.get() > 0) {
            return false;
        }
        try {
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int i = 0; i < PARTITIONS; i++) {
                latest.put(new TopicPartition(topic, i), OffsetSpec.latest());
            }
            var ends = admin.listOffsets(latest).all().get(10, TimeUnit.SECONDS);
            for (String group : List.of(naive.group(), once.group())) {
                Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
                        .partitionsToOffsetAndMetadata()
                        .get(10, TimeUnit.SECONDS);
                for (var e : ends.entrySet()) {
                    OffsetAndMetadata c = committed.get(e.getKey());
                    if ((c == null ? 0 : c.offset()) < e.getValue().offset()) {
                        return false;
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } catch (ExecutionException | TimeoutException e) {
            return false;
        }
        try {
            return outboxAdmin.stats().pending() == 0
                    && performing.get() == 0
                    && naive.inFlight.get() == 0
                    && once.inFlight.get() == 0;
        } catch (RuntimeException e) {
            return false;
        }
    }

    /** Waits until {@link #settled()}; returns false if {@code timeout} passed first. */
    public boolean awaitSettled(Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            if (settled()) {
                return true;
            }
            Thread.sleep(100); // polling interval of the check, not a guess at how long work takes
        }
        return false;
    }

    @Override
    public void close() {
        for (int i = closeables.size() - 1; i >= 0; i--) {
            try {
                closeables.get(i).close();
            } catch (Exception e) {
                // keep closing the rest; the process is ending
            }
        }
        closeables.clear();
    }

    static String money(long dollars) {
        return (dollars < 0 ? "-$" : "$") + String.format(Locale.ROOT, "%,d", Math.abs(dollars));
    }
}
