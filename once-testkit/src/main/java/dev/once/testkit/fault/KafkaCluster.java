package dev.once.testkit.fault;

import dev.once.testkit.internal.KafkaProcess;
import dev.once.testsupport.FreePorts;
import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;

/**
 * A KRaft Kafka cluster of several brokers (and one controller), whose brokers a test can stop and
 * start again mid-run, so partition leaders and the group coordinator move. Broker failure tests
 * only; single-broker tests use {@link dev.once.testkit.kafka.TestKafka}. Like it, the cluster runs
 * in a child JVM of its own.
 */
public final class KafkaCluster implements AutoCloseable {

    /** The node id Kafka's test kit gives the first broker. */
    private static final int FIRST_BROKER_ID = 0;

    private final KafkaProcess cluster;
    private FaultProxy proxy;

    private KafkaCluster(KafkaProcess cluster) {
        this.cluster = cluster;
    }

    /**
     * Starts {@code brokers} brokers with replication {@code brokers} for the internal topics and
     * {@code min.insync.replicas} as given, plus any extra broker settings.
     */
    public static KafkaCluster start(int brokers, int minInsyncReplicas, Map<String, String> settings)
            throws Exception {
        return start(brokers, minInsyncReplicas, settings, Map.of());
    }

    /**
     * One broker whose clients all talk to it through a {@link FaultProxy} ({@link #proxy()}) once
     * they have bootstrapped: the broker advertises the proxy's port in its metadata, so the proxy's
     * faults reach every producer, consumer, coordinator and offset-commit connection. Closing the
     * cluster closes the proxy.
     */
    public static KafkaCluster behindProxy() throws Exception {
        // Advertised before the proxy listens on it: a port the kernel gives outgoing connections could be
        // taken meanwhile.
        int proxyPort = FreePorts.loopback();
        KafkaCluster cluster = start(
                1,
                1,
                Map.of(),
                Map.of(FIRST_BROKER_ID, Map.of("advertised.listeners", "EXTERNAL://127.0.0.1:" + proxyPort)));
        try {
            String bootstrap = cluster.cluster.bootstrapServers();
            int brokerPort = Integer.parseInt(bootstrap.substring(bootstrap.lastIndexOf(':') + 1));
            cluster.proxy =
                    FaultProxy.start(new InetSocketAddress("127.0.0.1", brokerPort), WireProtocol.RAW, proxyPort);
        } catch (Exception e) {
            cluster.close();
            throw e;
        }
        return cluster;
    }

    /**
     * The proxy of a cluster started by {@link #behindProxy()}.
     *
     * @throws IllegalStateException for a cluster started without one
     */
    public FaultProxy proxy() {
        if (proxy == null) {
            throw new IllegalStateException(
                    "this cluster was not started behind a proxy; use KafkaCluster.behindProxy()");
        }
        return proxy;
    }

    private static KafkaCluster start(
            int brokers,
            int minInsyncReplicas,
            Map<String, String> settings,
            Map<Integer, Map<String, String>> perBroker) {
        Map<String, String> all = new HashMap<>();
        String replication = Integer.toString(brokers);
        all.put("offsets.topic.replication.factor", replication);
        all.put("offsets.topic.num.partitions", "3");
        all.put("transaction.state.log.replication.factor", replication);
        all.put("transaction.state.log.min.isr", Integer.toString(minInsyncReplicas));
        all.put("default.replication.factor", replication);
        all.put("min.insync.replicas", Integer.toString(minInsyncReplicas));
        all.put("group.initial.rebalance.delay.ms", "0");
        all.put("group.min.session.timeout.ms", "500");
        all.put("auto.create.topics.enable", "false");
        all.putAll(settings);
        return new KafkaCluster(KafkaProcess.start(false, brokers, all, perBroker));
    }

    /** {@code host:port} of every broker, running or not. */
    public String bootstrapServers() {
        return cluster.bootstrapServers();
    }

    public Admin admin() {
        return Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers()));
    }

    public Set<Integer> brokerIds() {
        return cluster.brokerIds();
    }

    /** Stops a broker (a controlled shutdown: its partitions' leadership moves to the others). */
    public void stopBroker(int id) {
        cluster.stopBroker(id);
    }

    /** Starts a stopped broker again, with its log directory as it left it. */
    public void startBroker(int id) {
        cluster.startBroker(id);
    }

    @Override
    public void close() throws Exception {
        if (proxy != null) {
            proxy.close();
        }
        cluster.close();
    }
}
