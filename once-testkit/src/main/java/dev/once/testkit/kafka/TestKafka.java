package dev.once.testkit.kafka;

import dev.once.testkit.internal.KafkaProcess;
import dev.once.testsupport.Services;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * A real Kafka broker for tests and the demo: the cluster named by {@value #BOOTSTRAP_ENV} when
 * set, otherwise one combined broker+controller in KRaft mode, started in a JVM of its own from
 * this JVM's jars. Not in this JVM: the broker's jars split the packages of {@code kafka-clients},
 * so they cannot run beside it when it is a named module (a test on the module path); and a
 * broker in this JVM would share its heap, threads and pauses with the code under test.
 *
 * <p>Tests use {@link #shared()}: started once per JVM, stopped by a shutdown hook, unique topics
 * per test ({@link #createTopic}). A main program (the CLI demo) uses {@link #start()} and
 * {@link #close()} itself. Thread-safe.
 */
public final class TestKafka implements AutoCloseable {

    /** Bootstrap servers of an existing cluster to use instead of the embedded one, e.g. {@code 127.0.0.1:9092}. */
    public static final String BOOTSTRAP_ENV = "ONCE_TEST_KAFKA_BOOTSTRAP";

    private static final String MIN_SESSION_TIMEOUT = "group.min.session.timeout.ms";
    private static final int KAFKA_DEFAULT_MIN_SESSION_TIMEOUT_MS = 6_000;
    private static final int SHORT_SESSION_TIMEOUT_MS = 2_000;

    /**
     * Broker settings of the embedded node: one node, so every internal topic has replication
     * factor 1; no initial rebalance delay, so a consumer group forms at once instead of after 3 s; a
     * minimum session timeout of 0.5 s, so a test that SIGKILLs a consumer sees its partitions
     * reassigned within a couple of seconds ({@link #sessionTimeoutMs()}).
     */
    public static final Map<String, String> BROKER_SETTINGS = Map.of(
            "offsets.topic.replication.factor",
            "1",
            "offsets.topic.num.partitions",
            "6",
            "transaction.state.log.replication.factor",
            "1",
            "transaction.state.log.min.isr",
            "1",
            "group.initial.rebalance.delay.ms",
            "0",
            MIN_SESSION_TIMEOUT,
            "500",
            "auto.create.topics.enable",
            "false");

    private static final AtomicLong SEQUENCE = new AtomicLong();
    private static volatile TestKafka shared;

    private final KafkaProcess broker;
    private final String bootstrapServers;
    private final int sessionTimeoutMs;

    private TestKafka(KafkaProcess broker, String bootstrapServers, int sessionTimeoutMs) {
        this.broker = broker;
        this.bootstrapServers = bootstrapServers;
        this.sessionTimeoutMs = sessionTimeoutMs;
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
                                        + " to a reachable cluster, or let the embedded broker start (needs a free port,"
                                        + " a writable temporary directory and the JDK this JVM runs on)",
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
     * Connects to {@value #BOOTSTRAP_ENV} when set, otherwise starts a new broker in a child JVM
     * (a few seconds). The caller closes it.
     *
     * @throws IllegalStateException if the external cluster does not answer or the broker cannot start
     */
    public static TestKafka start() {
        String external = System.getenv(BOOTSTRAP_ENV);
        if (external != null && !external.isBlank()) {
            String servers = external.strip();
            try (Admin admin = admin(servers)) {
                Node node = admin.describeCluster()
                        .nodes()
                        .get(15, TimeUnit.SECONDS)
                        .iterator()
                        .next();
                return new TestKafka(
                        null, servers, Math.max(SHORT_SESSION_TIMEOUT_MS, minSessionTimeoutMs(admin, node)));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while reaching Kafka at " + external, e);
            } catch (ExecutionException | TimeoutException e) {
                throw new IllegalStateException(
                        "Kafka at " + BOOTSTRAP_ENV + "=" + external + " did not answer: " + e.getMessage(), e);
            }
        }
        KafkaProcess broker = KafkaProcess.start(true, 1, BROKER_SETTINGS, Map.of());
        return new TestKafka(broker, broker.bootstrapServers(), SHORT_SESSION_TIMEOUT_MS);
    }

    /**
     * The broker's {@code group.min.session.timeout.ms}: a cluster started with {@link #BROKER_SETTINGS}
     * (CI's one broker for every test JVM) allows the embedded broker's short timeout. Kafka's default
     * when the broker does not say (a cluster that refuses DescribeConfigs to this client).
     */
    private static int minSessionTimeoutMs(Admin admin, Node node) throws InterruptedException, TimeoutException {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.BROKER, node.idString());
        try {
            ConfigEntry minimum = admin.describeConfigs(List.of(resource))
                    .all()
                    .get(15, TimeUnit.SECONDS)
                    .get(resource)
                    .get(MIN_SESSION_TIMEOUT);
            return minimum == null || minimum.value() == null
                    ? KAFKA_DEFAULT_MIN_SESSION_TIMEOUT_MS
                    : Integer.parseInt(minimum.value());
        } catch (ExecutionException e) {
            return KAFKA_DEFAULT_MIN_SESSION_TIMEOUT_MS;
        }
    }

    /** {@code host:port} list for {@code bootstrap.servers}. */
    public String bootstrapServers() {
        return bootstrapServers;
    }

    /**
     * A {@code session.timeout.ms} for test consumers: 2 s where the cluster allows it (the embedded
     * broker, or an external one with {@link #BROKER_SETTINGS}), otherwise the cluster's
     * {@code group.min.session.timeout.ms} (Kafka's default: 6 s).
     */
    public int sessionTimeoutMs() {
        return sessionTimeoutMs;
    }

    /** True when this is the embedded broker rather than the cluster named by {@value #BOOTSTRAP_ENV}. */
    public boolean isEmbedded() {
        return broker != null;
    }

    /** A new admin client on this cluster; the caller closes it. */
    public Admin admin() {
        return admin(bootstrapServers);
    }

    private static Admin admin(String bootstrapServers) {
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

    /** Stops the embedded broker and deletes its data; does nothing for an external cluster. Idempotent. */
    @Override
    public void close() {
        if (broker != null) {
            broker.close();
        }
    }
}
