package dev.once.testkit.internal;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.apache.kafka.common.test.KafkaClusterTestKit;
import org.apache.kafka.common.test.TestKitNodes;

/**
 * The child JVM of {@link KafkaProcess}: a KRaft cluster from Kafka's internal test API
 * ({@code KafkaClusterTestKit}), the only code of {@code once} that touches it, run on a class path of
 * its own. The broker cannot share a JVM with a named {@code kafka.clients} (its jars split that
 * module's packages, and {@code kafka_2.13} has no valid module name), so it never runs in the
 * test's or the demo's JVM.
 *
 * <p>Arguments: {@code combined|separate}, the number of brokers, then {@code key=value} broker
 * settings and {@code id:key=value} settings of one node. It answers on stdout: {@code READY
 * <bootstrap servers> <broker ids>} once every broker is ready ({@code FAILED <why>} and exit 1
 * otherwise), {@code STOPPED <id>} and {@code STARTED <id>} to the commands {@code stop <id>} and
 * {@code start <id>} on stdin. The end of stdin (its parent closed it, or died) stops the cluster,
 * deletes its data and exits.
 *
 * <p>Not API.
 */
public final class KafkaNodes {

    private KafkaNodes() {}

    public static void main(String[] args) throws Exception {
        // Kafka's storage formatter prints its records to System.out, which carries the answers here.
        PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(new PrintStream(OutputStream.nullOutputStream(), true, StandardCharsets.UTF_8));
        KafkaClusterTestKit cluster;
        try {
            cluster = start(args);
        } catch (Exception e) {
            answers.println("FAILED " + e.toString().replace('\n', ' '));
            e.printStackTrace();
            System.exit(1);
            return;
        }
        answers.println("READY " + cluster.bootstrapServers() + " "
                + cluster.brokers().keySet().stream()
                        .sorted()
                        .map(String::valueOf)
                        .collect(Collectors.joining(",")));
        try {
            serve(cluster, answers);
        } catch (IOException | RuntimeException e) {
            e.printStackTrace(); // to the parent's System.err; its next command finds this JVM gone
        }
        try {
            cluster.close();
        } catch (Exception e) {
            // Stopping is best effort: the data lives in a temporary directory the OS reclaims.
            System.err.println("once: stopping the embedded Kafka cluster failed: " + e);
        }
        System.exit(0); // the broker leaves non-daemon threads behind
    }

    /** Runs the parent's commands until its end of stdin. */
    private static void serve(KafkaClusterTestKit cluster, PrintStream answers) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] command = line.split(" ");
            kafka.server.BrokerServer broker = cluster.brokers().get(Integer.parseInt(command[1]));
            if (command[0].equals("stop")) {
                broker.shutdown(); // controlled: its partitions' leadership moves to the others
                broker.awaitShutdown();
                answers.println("STOPPED " + command[1]);
            } else {
                broker.startup(); // with its log directory as it left it
                answers.println("STARTED " + command[1]);
            }
        }
    }

    private static KafkaClusterTestKit start(String[] args) throws Exception {
        boolean combined = args[0].equals("combined");
        int brokers = Integer.parseInt(args[1]);
        Map<String, String> settings = new HashMap<>();
        Map<Integer, Map<String, String>> perNode = new TreeMap<>();
        for (int i = 2; i < args.length; i++) {
            String setting = args[i];
            int colon = setting.indexOf(':');
            int equals = setting.indexOf('=');
            if (colon > 0 && colon < equals) {
                perNode.computeIfAbsent(Integer.parseInt(setting.substring(0, colon)), id -> new HashMap<>())
                        .put(setting.substring(colon + 1, equals), setting.substring(equals + 1));
            } else {
                settings.put(setting.substring(0, equals), setting.substring(equals + 1));
            }
        }
        // A directory of our own: the test kit's default one is deleted by a JVM shutdown hook of
        // Kafka's that races with close(), and the broker then fails loudly writing its last checkpoints.
        TestKitNodes nodes = new TestKitNodes.Builder()
                .setBaseDirectory(Files.createTempDirectory("once-kafka-"))
                .setCombined(combined)
                .setNumBrokerNodes(brokers)
                .setNumControllerNodes(1)
                .setPerServerProperties(perNode)
                .build();
        KafkaClusterTestKit.Builder builder = new KafkaClusterTestKit.Builder(nodes).setDeleteOnClose(true);
        settings.forEach(builder::setConfigProp);
        KafkaClusterTestKit cluster = builder.build();
        try {
            cluster.format();
            cluster.startup();
            cluster.waitForReadyBrokers();
        } catch (Exception e) {
            cluster.close();
            throw e;
        }
        return cluster;
    }
}
