package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ConnectionFactory;
import dev.once.testkit.fault.KafkaCluster;
import dev.once.testsupport.ChildJvm;
import dev.once.testsupport.Services;
import dev.once.testsupport.TestDatabase;
import io.nats.client.JetStream;
import io.nats.client.Nats;
import io.nats.client.api.AckPolicy;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.StorageType;
import io.nats.client.api.StreamConfiguration;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Many consumer processes: four consumer JVMs ({@link ConsumerProcess}, one {@link ChildJvm}
 * each) in one Kafka consumer group over the 3-broker cluster (12 partitions, replication 3,
 * {@code min.insync.replicas=2}), and the same number competing on one RabbitMQ queue and on one
 * NATS JetStream durable consumer. Events + 10% duplicates (the copy in any partition); during the
 * run, at points of progress: a rolling restart (SIGTERM, a new process), a SIGKILL, a broker
 * bounce (Kafka; the shared RabbitMQ and NATS servers stay up), two more rolling restarts. Lost 0,
 * applied twice 0; each instance's share and the total rate printed. Size: the CI count, or 20,000
 * times the scale (100,000 at the report's 5) with {@value KafkaBrokerFailureTest#REPORT}.
 */
@Tag("chaos")
class ManyConsumerProcessesTest {

    private static final int INSTANCES = 4;
    private static final int PARTITIONS = 12;

    private static int events(int ci) {
        return Chaos.scaled(Boolean.getBoolean(KafkaBrokerFailureTest.REPORT) ? 20_000 : ci);
    }

    @Test
    void fourKafkaConsumerProcessesInOneGroupThroughRestartsKillsAndABrokerBounce() throws Exception {
        int events = events(1_200);
        String topic = "many-" + System.nanoTime();
        try (KafkaCluster cluster = KafkaCluster.start(3, 2, Map.of());
                TestDatabase db = Databases.POSTGRES.fresh(2)) {
            try (var admin = cluster.admin()) {
                admin.createTopics(List.of(
                                new NewTopic(topic, PARTITIONS, (short) 3).configs(Map.of("min.insync.replicas", "2"))))
                        .all()
                        .get(60, TimeUnit.SECONDS);
            }
            int[] brokers =
                    cluster.brokerIds().stream().mapToInt(Integer::intValue).toArray();
            run(
                    "many-kafka",
                    db,
                    events,
                    false,
                    new String[] {"kafka", cluster.bootstrapServers(), topic, "many-" + topic},
                    published -> {
                        Random random = new Random(31);
                        try (KafkaProducer<String, String> p = new KafkaProducer<>(
                                Map.of(
                                        ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                                        cluster.bootstrapServers(),
                                        ProducerConfig.ACKS_CONFIG,
                                        "all",
                                        ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
                                        true,
                                        ProducerConfig.LINGER_MS_CONFIG,
                                        5),
                                new StringSerializer(),
                                new StringSerializer())) {
                            List<Future<RecordMetadata>> sends = new ArrayList<>();
                            for (String id : published) {
                                sends.add(p.send(new ProducerRecord<>(topic, random.nextInt(PARTITIONS), id, id)));
                            }
                            for (Future<RecordMetadata> f : sends) {
                                f.get(2, TimeUnit.MINUTES);
                            }
                        }
                    },
                    () -> {
                        cluster.stopBroker(brokers[0]);
                        cluster.startBroker(brokers[0]);
                    });
        }
    }

    @Test
    void fourCompetingRabbitMqConsumerProcessesThroughRestartsAndAKill() throws Exception {
        rabbit("many-rabbitmq", events(800), false);
    }

    /** The deliberate break: the same run with consumers that commit the effect without a claim. */
    @Test
    void withoutTheClaimTheRedeliveriesAndResendsApplyTwice() throws Exception {
        rabbit("many-rabbitmq-no-claim", Chaos.scaled(500), true);
    }

    private static void rabbit(String name, int events, boolean noClaim) throws Exception {
        String queue = "once-many-" + System.nanoTime();
        ConnectionFactory f = new ConnectionFactory();
        f.setHost("127.0.0.1");
        f.setPort(5672);
        com.rabbitmq.client.Connection admin;
        try {
            admin = f.newConnection("once-many-admin");
        } catch (IOException | java.util.concurrent.TimeoutException e) {
            throw Services.unavailable("rabbitmq", "start RabbitMQ on 127.0.0.1:5672 (rabbitmq-server -detached)", e);
        }
        try (admin;
                TestDatabase db = Databases.POSTGRES.fresh(2)) {
            Channel ch = admin.createChannel();
            ch.queueDeclare(queue, true, false, false, null);
            try {
                run(
                        name,
                        db,
                        events,
                        noClaim,
                        new String[] {"rabbitmq", queue},
                        published -> {
                            ch.confirmSelect();
                            for (String id : published) {
                                ch.basicPublish(
                                        "",
                                        queue,
                                        new AMQP.BasicProperties.Builder()
                                                .messageId(id)
                                                .deliveryMode(2)
                                                .build(),
                                        id.getBytes(StandardCharsets.UTF_8));
                            }
                            ch.waitForConfirmsOrDie(120_000);
                        },
                        null);
            } finally {
                ch.queueDelete(queue);
            }
        }
    }

    @Test
    void fourCompetingNatsConsumerProcessesThroughRestartsAndAKill() throws Exception {
        int events = events(800);
        String stream = "once_many_" + System.nanoTime();
        io.nats.client.Connection nats;
        try {
            nats = Nats.connect("nats://127.0.0.1:4222");
        } catch (IOException e) {
            throw Services.unavailable(
                    "nats", "start nats-server with JetStream on 127.0.0.1:4222 (nats-server -js)", e);
        }
        try (nats;
                TestDatabase db = Databases.POSTGRES.fresh(2)) {
            nats.jetStreamManagement()
                    .addStream(StreamConfiguration.builder()
                            .name(stream)
                            .subjects(stream)
                            .storageType(StorageType.File)
                            .build());
            nats.jetStreamManagement()
                    .addOrUpdateConsumer(
                            stream,
                            ConsumerConfiguration.builder()
                                    .durable("many")
                                    .ackPolicy(AckPolicy.Explicit)
                                    .ackWait(Duration.ofSeconds(5))
                                    .maxAckPending(2_000)
                                    .build());
            try {
                run(
                        "many-nats",
                        db,
                        events,
                        false,
                        new String[] {"nats", stream, "many"},
                        published -> {
                            JetStream js = nats.jetStream();
                            List<CompletableFuture<?>> acks = new ArrayList<>();
                            for (String id : published) {
                                acks.add(js.publishAsync(stream, id.getBytes(StandardCharsets.UTF_8)));
                            }
                            for (CompletableFuture<?> a : acks) {
                                a.get(2, TimeUnit.MINUTES);
                            }
                        },
                        null);
            } finally {
                nats.jetStreamManagement().deleteStream(stream);
            }
        }
    }

    private interface Publisher {
        void publish(List<String> ids) throws Exception;
    }

    private interface Bounce {
        void run() throws Exception;
    }

    /**
     * Starts the instances, publishes, injects the faults at 20/35/50/65/80% of the events applied,
     * waits for every event, stops the instances, prints the figure and asserts it.
     */
    private static void run(
            String name,
            TestDatabase db,
            int events,
            boolean noClaim,
            String[] source,
            Publisher publisher,
            Bounce bounce)
            throws Exception {
        db.execute("CREATE TABLE " + Effects.TABLE
                + " (event_id varchar(255) NOT NULL, applied_at bigint NOT NULL, instance varchar(32) NOT NULL)");
        Random random = new Random(37);
        List<String> published = new ArrayList<>(events + events / 10);
        for (int i = 0; i < events; i++) {
            published.add("evt-" + i);
            if (random.nextInt(10) == 0) {
                published.add("evt-" + random.nextInt(i + 1)); // a producer's re-send, later
            }
        }
        Set<String> distinct = new LinkedHashSet<>(published);
        List<ChildJvm> all = new ArrayList<>();
        ChildJvm[] live = new ChildJvm[INSTANCES];
        int[] generation = new int[INSTANCES];
        long started = System.nanoTime();
        int restarts = 0;
        int kills = 0;
        int bounces = 0;
        try {
            for (int i = 0; i < INSTANCES; i++) {
                live[i] = start(source, Databases.POSTGRES.directUrl(db), i, generation[i], noClaim, all);
            }
            // The JVMs start in parallel; a replacement is not waited for, as in a rolling deploy.
            for (ChildJvm c : live) {
                c.awaitLineStartingWith("READY", Duration.ofMinutes(2));
            }
            publisher.publish(published);
            String[] faults = {"restart", "kill", "bounce", "restart", "restart"};
            double[] at = {0.20, 0.35, 0.50, 0.65, 0.80};
            for (int f = 0; f < faults.length; f++) {
                long threshold = (long) (events * at[f]);
                await(name + ": " + threshold + " applied")
                        .atMost(Duration.ofMinutes(3))
                        .pollInterval(Duration.ofMillis(100))
                        .until(() -> applied(db) >= threshold);
                int victim = f % INSTANCES;
                switch (faults[f]) {
                    case "bounce" -> {
                        if (bounce != null) {
                            bounce.run();
                            bounces++;
                        }
                    }
                    case "kill" -> {
                        live[victim].kill();
                        kills++;
                        live[victim] = start(
                                source, Databases.POSTGRES.directUrl(db), victim, ++generation[victim], noClaim, all);
                    }
                    default -> {
                        terminate(live[victim]);
                        restarts++;
                        live[victim] = start(
                                source, Databases.POSTGRES.directUrl(db), victim, ++generation[victim], noClaim, all);
                    }
                }
            }
            await(name + ": every event applied")
                    .atMost(Duration.ofMinutes(3))
                    .pollInterval(Duration.ofMillis(100))
                    .until(() -> applied(db) >= distinct.size());
            double seconds = (System.nanoTime() - started) / 1e9;
            for (ChildJvm c : live) {
                terminate(c);
            }
            Map<String, Long> counts = Effects.counts(db);
            Map<String, Long> shares = new TreeMap<>();
            try (var c = db.dataSource().getConnection();
                    var s = c.createStatement();
                    var rs = s.executeQuery(
                            "SELECT split_part(instance, '.', 1), count(*) FROM " + Effects.TABLE + " GROUP BY 1")) {
                while (rs.next()) {
                    shares.put(rs.getString(1), rs.getLong(2));
                }
            }
            Chaos.Figure figure = Chaos.figure(name)
                    .rounds(events)
                    .lost(distinct.stream()
                            .filter(id -> counts.getOrDefault(id, 0L) == 0)
                            .count())
                    .appliedTwice(Effects.appliedTwice(counts))
                    .put("instances", INSTANCES)
                    .put("published", published.size())
                    .put("applied", counts.size())
                    .put("restarts", restarts)
                    .put("sigkills", kills)
                    .put("broker_bounces", bounces)
                    .put(
                            "shares",
                            String.join(
                                    ",",
                                    shares.entrySet().stream()
                                            .map(e -> e.getKey() + ":" + e.getValue())
                                            .toList()))
                    .put("events_per_s", published.size() / seconds)
                    .put("total_s", seconds)
                    .broken(noClaim ? "no_claim" : null)
                    .print();
            if (noClaim) {
                assertThat(figure.get("applied_twice"))
                        .as("the break must show the double effects the claim prevents")
                        .isPositive();
                return;
            }
            assertThat(figure.get("lost"))
                    .as("events published and never applied")
                    .isZero();
            assertThat(figure.get("applied_twice"))
                    .as("events applied more than once")
                    .isZero();
            assertThat(counts.keySet()).as("output = input").isEqualTo(distinct);
        } catch (RuntimeException | Error e) {
            for (ChildJvm c : all) {
                List<String> out = c.output();
                System.out.println("---- consumer pid " + c.pid() + " (last lines)");
                out.subList(Math.max(0, out.size() - 20), out.size()).forEach(System.out::println);
            }
            throw e;
        } finally {
            for (ChildJvm c : all) {
                c.close();
            }
        }
    }

    private static ChildJvm start(
            String[] source, String jdbcUrl, int instance, int generation, boolean noClaim, List<ChildJvm> all)
            throws Exception {
        List<String> args = new ArrayList<>(List.of(source));
        args.add(jdbcUrl);
        args.add("i" + instance + "." + generation); // the share is counted per instance across its generations
        ChildJvm c = ChildJvm.start(
                ConsumerProcess.class,
                noClaim ? Map.of(ConsumerProcess.NO_CLAIM, "1") : Map.of(),
                args.toArray(String[]::new));
        all.add(c);
        return c;
    }

    /** SIGTERM: the process finishes the batch in hand, acknowledges it and exits (a rolling restart). */
    private static void terminate(ChildJvm c) throws IOException, InterruptedException {
        new ProcessBuilder("kill", "-TERM", Long.toString(c.pid()))
                .inheritIO()
                .start()
                .waitFor();
        c.waitFor(Duration.ofSeconds(60));
    }

    private static long applied(TestDatabase db) {
        return db.queryLong("SELECT count(DISTINCT event_id) FROM " + Effects.TABLE);
    }
}
