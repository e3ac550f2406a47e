package dev.once.cli.demo;

import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * A real Kafka broker in this JVM: one combined broker and controller in KRaft mode, from Kafka's
 * own {@code KafkaClusterTestKit}. That is Kafka's internal test API, so it is used here and
 * nowhere else; when {@code dev.once.testkit.kafka.TestKafka} lands in the test kit this class is
 * the one to replace. Its data lives in a temporary directory removed on {@link #close()}.
 */
final class EmbeddedKafka implements AutoCloseable {

    private final KafkaClusterTestKit cluster;
    private final Path directory;

    private EmbeddedKafka(KafkaClusterTestKit cluster, Path directory) {
        this.cluster = cluster;
        this.directory = directory;
    }

    /** Starts the broker and waits until it accepts clients (about 2 s). */
    static EmbeddedKafka start() throws Exception {
        // Our own directory: the test kit's default one is deleted by a JVM shutdown hook that races
        // with close() on Ctrl-C, and the broker then fails loudly writing its last checkpoints.
        Path directory = Files.createTempDirectory("once-demo-kafka");
        KafkaClusterTestKit cluster = new KafkaClusterTestKit.Builder(new TestKitNodes.Builder()
                .setBaseDirectory(directory)
                .setCombined(true).setNumBrokerNodes(1).setNumControllerNodes(1).build())
                // One broker: internal topics cannot be replicated, and a new group should not wait for more members.
                .setConfigProp("offsets.topic.replication.factor", "1")
                .setConfigProp("offsets.topic.num.partitions", "1")
                .setConfigProp("transaction.state.log.replication.factor", "1")
                .setConfigProp("transaction.state.log.min.isr", "1")
                .setConfigProp("group.initial.rebalance.delay.ms", "0")
                .setConfigProp("auto.create.topics.enable", "false")
                .build();
        try {
            formatQuietly(cluster);
            cluster.startup();
            cluster.waitForReadyBrokers();
        } catch (Exception e) {
            cluster.close();
            delete(directory);
            throw e;
        }
        return new EmbeddedKafka(cluster, directory);
    }

    // Kafka's storage formatter prints its bootstrap records to System.out, which would land in
    // the middle of the command's own output; nothing else runs on this JVM's stdout meanwhile.
    private static void formatQuietly(KafkaClusterTestKit cluster) throws Exception {
        PrintStream out = System.out;
        System.setOut(new PrintStream(OutputStream.nullOutputStream(), true, StandardCharsets.UTF_8));
        try {
            cluster.format();
        } finally {
            System.setOut(out);
        }
    }

    /** {@code host:port} of the broker's client listener. */
    String bootstrapServers() {
        return cluster.bootstrapServers();
    }

    @Override
    public void close() throws Exception {
        try {
            cluster.close();
        } finally {
            delete(directory);
        }
    }

    private static void delete(Path directory) throws IOException {
        if (!Files.exists(directory)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(directory)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
