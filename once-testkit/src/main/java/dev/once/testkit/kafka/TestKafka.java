package dev.once.testkit.kafka;

import dev.once.testsupport.Services;
import java.nio.file.Files;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;

/**
 * A real Kafka broker for tests and the demo: the cluster named by {@value #BOOTSTRAP_ENV} when
 * set, otherwise one combined broker+controller in KRaft mode started in this JVM. The only class
 * of {@code once} that touches Kafka's internal test API ({@code KafkaClusterTestKit}), so a Kafka
 * upgrade that changes it breaks here and nowhere else.
 *
 * <p>Tests use {@link #shared()}: started once per JVM, stopped by a shutdown hook, unique topics
 * per test ({@link #createTopic}). A main program (the CLI demo) uses {@link #start()} and
 * {@link #close()} itself. Thread-safe.
 */
public final class TestKafka implements AutoCloseable {

    /** Bootstrap servers of an existing cluster to use instead of the in-process one, e.g. {@code 127.0.0.1:9092}. */
    public static final String BOOTSTRAP_ENV = "ONCE_TEST_KAFKA_BOOTSTRAP";

    /**
     * Broker settings of the in-process node: one node, so every internal topic has replication
     * factor 1; no initial rebalance delay, so a consumer group forms at once instead of after 3 s; a
     * minimum session timeout of 0.5 s, so a test that SIGKILLs a consumer sees its partitions
     * reassigned within a couple of seconds ({@link #sessionTimeoutMs()}).
     */
    public static final Map<String, String> BROKER_SETTINGS = Map.of(
            "offsets.topic.replication.factor", "1",
            "offsets.topic.num.partitions", "6",
            "transaction.state.log.replication.factor", "1",
            "transaction.state.log.min.isr", "1",
            "group.initial.rebalance.delay.ms", "0",
            "group.min.session.timeout.ms", "500",
            "auto.create.topics.enable", "false");

    private static final AtomicLong SEQUENCE = new AtomicLong();
    private static volatile TestKafka shared;

    private final KafkaClusterTestKit cluster;
    private final String bootstrapServers;

    private TestKafka(KafkaClusterTestKit cluster, String bootstrapServers) {
        this.cluster = cluster;
        this.bootstrapServers = bootstrapServers;
    }

    /**
     * The Kafka shared by every test of this JVM, started on first use. Skips the calling test (or
     * fails it under {@value Services#REQUIRE_ENV} listing {@code kafka}) when none can be had.
     */
    public static TestKafka shared() {
        TestKafka k = shared;
        if (k == null) {
            synchronized (TestKafka.class) {
                k = shared;
                if (k == null) {
                    try {
                        k = start();
                    } catch (RuntimeException e) {
                        throw Services.unavailable(
                                "kafka",
                                "set " + BOOTSTRAP_ENV
                                        + " to a reachable cluster, or let the in-process broker start (needs a free port"
                                        + " and a writable temporary directory)",
                                e);
                    }
                    TestKafka stopping = k;
                    Runtime.getRuntime().addShutdownHook(new Thread(stopping::close, "once-test-kafka-stop"));
                    shared = k;
                }
            }
        }
        return k;
    }

    /**
     * Connects to {@value #BOOTSTRAP_ENV} when set, otherwise starts a new in-process broker (about
     * 2 s). The caller closes it.
     *
     * @throws IllegalStateException if the external cluster does not answer or the broker cannot start
     */
    public static TestKafka start() {
        String external = System.getenv(BOOTSTRAP_ENV);
        if (external != null && !external.isBlank()) {
            TestKafka k = new TestKafka(null, external.strip());
            try (Admin admin = k.admin()) {
                admin.describeCluster().nodes().get(15, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while reaching Kafka at " + external, e);
            } catch (ExecutionException | TimeoutException e) {
                throw new IllegalStateException(
                        "Kafka at " + BOOTSTRAP_ENV + "=" + external + " did not answer: " + e.getMessage(), e);
            }
            return k;
        }
        KafkaClusterTestKit cluster = null;
        try {
            // A directory of our own: the test kit's default one is deleted by a JVM shutdown hook of
            // Kafka's that races with close() when a main program (the demo) stops on Ctrl-C, and the
            // broker then fails loudly writing its last checkpoints. deleteOnClose removes this one.
            TestKitNodes nodes = new TestKitNodes.Builder()
                    .setBaseDirectory(Files.createTempDirectory("once-kafka-"))
                    .setCombined(true)
                    .setNumBrokerNodes(1)
                    .setNumControllerNodes(1)
                    .build();
            KafkaClusterTestKit.Builder builder = new KafkaClusterTestKit.Builder(nodes).setDeleteOnClose(true);
            BROKER_SETTINGS.forEach(builder::setConfigProp);
            cluster = builder.build();
            cluster.format();
            cluster.startup();
            cluster.waitForReadyBrokers();
            return new TestKafka(cluster, cluster.bootstrapServers());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            closeQuietly(cluster);
            throw new IllegalStateException("interrupted while starting the in-process Kafka broker", e);
        } catch (Exception e) {
            closeQuietly(cluster);
            throw new IllegalStateException("the in-process Kafka broker did not start: " + e, e);
        }
    }

    /** {@code host:port} list for {@code bootstrap.servers}. */
    public String bootstrapServers() {
        return bootstrapServers;
    }

    /**
     * A {@code session.timeout.ms} for test consumers: short on the in-process broker, which allows
     * it, and Kafka's minimum default (6 s) on an external cluster.
     */
    public int sessionTimeoutMs() {
        return isEmbedded() ? 2_000 : 6_000;
    }

    /** True when this is the in-process broker rather than the cluster named by {@value #BOOTSTRAP_ENV}. */
    public boolean isEmbedded() {
        return cluster != null;
    }

    /** A new admin client on this cluster; the caller closes it. */
    public Admin admin() {
        return Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers));
    }

    /**
     * Creates a topic whose name starts with {@code prefix} and is unique in this JVM and run, so
     * reruns against an external cluster never see old records, and waits until it exists.
     *
     * @return the topic name
     */
    public String createTopic(String prefix, int partitions) {
        String name = prefix + "-" + ProcessHandle.current().pid() + "-" + System.currentTimeMillis() + "-"
                + SEQUENCE.incrementAndGet();
        createTopic(name, partitions, Map.of());
        return name;
    }

    /**
     * Creates {@code name} with replication factor 1 and the given topic configs, and waits until
     * every partition has a leader: a producer that starts earlier gets NOT_LEADER_OR_FOLLOWER
     * answers, and an idempotent one was seen to stall on them.
     */
    public void createTopic(String name, int partitions, Map<String, String> configs) {
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs)))
                    .all()
                    .get(30, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!allLed(admin, name)) {
                if (System.nanoTime() - deadline > 0) {
                    throw new TimeoutException("partitions of " + name + " have no leader after 30 s");
                }
                Thread.sleep(20); // polling the broker's metadata; Admin offers no wait for leadership
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while creating topic " + name, e);
        } catch (ExecutionException | TimeoutException e) {
            throw new IllegalStateException(
                    "could not create topic " + name + " with " + partitions + " partitions on " + bootstrapServers
                            + ": " + e.getMessage(),
                    e);
        }
    }

    private static boolean allLed(Admin admin, String topic)
            throws InterruptedException, ExecutionException, TimeoutException {
        try {
            return admin
                    .describeTopics(List.of(topic))
                    .allTopicNames()
                    .get(30, TimeUnit.SECONDS)
                    .get(topic)
                    .partitions()
                    .stream()
                    .allMatch(p -> p.leader() != null && !p.leader().isEmpty());
        } catch (ExecutionException e) {
            if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                return false; // created, but not yet in the metadata the broker answers from
            }
            throw e;
        }
    }

    /** Stops the in-process broker and deletes its data; does nothing for an external cluster. Idempotent. */
    @Override
    public void close() {
        closeQuietly(cluster);
    }

    private static void closeQuietly(KafkaClusterTestKit cluster) {
        if (cluster == null) {
            return;
        }
        try {
            cluster.close();
        } catch (Exception e) {
            // Stopping is best effort: the data lives in a temporary directory the OS reclaims.
            System.err.println("once: stopping the in-process Kafka broker failed: " + e);
        }
    }
}
