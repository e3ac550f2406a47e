package dev.once.testkit.internal;

import dev.once.testsupport.ChildJvm;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * A KRaft Kafka cluster running in a child JVM ({@link KafkaNodes}), whose class path is every jar of
 * this JVM's class path and module path ({@link ChildJvm#classPath()}): the same Maven artifacts, so it
 * works wherever the test kit does, with no path to a local repository. Here only {@code kafka-clients}
 * is needed, so this JVM can run the test kit as a named module. The child's log lines go to this
 * JVM's {@code System.err}, where an in-process broker's went; it stops when its stdin closes, so
 * it does not outlive a parent that was killed. Thread-safe.
 *
 * <p>Not API.
 */
public final class KafkaProcess implements AutoCloseable {

    private static final Duration START_TIMEOUT = Duration.ofSeconds(120);
    private static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(60);
    private static final String EXITED = "\u0000exited";

    private final Process process;
    private final BlockingQueue<String> answers = new LinkedBlockingQueue<>();
    private final Writer commands;
    private String bootstrapServers;
    private Set<Integer> brokerIds;

    private KafkaProcess(Process process) {
        this.process = process;
        this.commands = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        pump(process, true);
        pump(process, false);
    }

    /**
     * Starts {@code brokers} brokers and one controller (in one node when {@code combined}) with the
     * given settings for every node and for single nodes (by node id), and waits until every broker
     * is ready (a few seconds).
     *
     * @throws IllegalStateException if the cluster does not start, with the child's reason
     */
    public static KafkaProcess start(
            boolean combined, int brokers, Map<String, String> settings, Map<Integer, Map<String, String>> perNode) {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx1g",
                // C1 only and the serial collector, as the test JVMs and ChildJvm: on two loaded cores C2's
                // compilations and G1's threads held up the start. A 3-broker cluster's READY at load 16-22:
                // 35-42 s with the defaults, 15-24 s with these.
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-cp",
                ChildJvm.classPath(),
                KafkaNodes.class.getName(),
                combined ? "combined" : "separate",
                Integer.toString(brokers)));
        settings.forEach((key, value) -> command.add(key + "=" + value));
        perNode.forEach((id, node) -> node.forEach((key, value) -> command.add(id + ":" + key + "=" + value)));
        KafkaProcess kafka;
        try {
            kafka = new KafkaProcess(new ProcessBuilder(command).start());
        } catch (IOException e) {
            throw new IllegalStateException("cannot start a JVM for the Kafka broker: " + e.getMessage(), e);
        }
        try {
            String[] ready = kafka.await("READY", START_TIMEOUT).split(" ");
            kafka.bootstrapServers = ready[1];
            kafka.brokerIds = Arrays.stream(ready[2].split(","))
                    .map(Integer::valueOf)
                    .collect(Collectors.toCollection(TreeSet::new));
            return kafka;
        } catch (RuntimeException e) {
            kafka.close();
            throw e;
        }
    }

    /** {@code host:port} of every broker, running or not. */
    public String bootstrapServers() {
        return bootstrapServers;
    }

    public Set<Integer> brokerIds() {
        return Set.copyOf(brokerIds);
    }

    /** Stops a broker (a controlled shutdown) and waits until it is down. */
    public synchronized void stopBroker(int id) {
        command("stop", id, "STOPPED");
    }

    /** Starts a stopped broker again, with its log directory as it left it. */
    public synchronized void startBroker(int id) {
        command("start", id, "STARTED");
    }

    private void command(String verb, int id, String answer) {
        if (!brokerIds.contains(id)) {
            throw new IllegalArgumentException("no broker " + id + " in this cluster; brokers are " + brokerIds);
        }
        try {
            commands.write(verb + " " + id + "\n");
            commands.flush();
        } catch (IOException e) {
            throw new UncheckedIOException("the Kafka JVM does not take commands: " + e.getMessage(), e);
        }
        await(answer + " " + id, COMMAND_TIMEOUT);
    }

    private String await(String prefix, Duration timeout) {
        try {
            String line = answers.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
            if (line == null) {
                throw new IllegalStateException("the Kafka JVM did not answer " + prefix + " within " + timeout);
            }
            if (!line.startsWith(prefix)) {
                throw new IllegalStateException("the Kafka JVM answered " + line.replace(EXITED, "by exiting")
                        + " where " + prefix + " was awaited (its log is on this JVM's System.err)");
            }
            return line;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the Kafka JVM's " + prefix, e);
        }
    }

    // stdout carries the answers; stderr the broker's log, to this JVM's System.err as read at each line
    // (a test runner swaps it per test).
    private void pump(Process child, boolean stdout) {
        Thread reader = new Thread(
                () -> {
                    try (BufferedReader r = new BufferedReader(new InputStreamReader(
                            stdout ? child.getInputStream() : child.getErrorStream(), StandardCharsets.UTF_8))) {
                        String line;
                        while ((line = r.readLine()) != null) {
                            if (stdout) {
                                answers.add(line);
                            } else {
                                System.err.println(line);
                            }
                        }
                    } catch (IOException ignored) {
                        // the child is gone: its exit is the answer
                    }
                    if (stdout) {
                        answers.add(EXITED);
                    }
                },
                "once-kafka-" + (stdout ? "answers-" : "log-") + child.pid());
        reader.setDaemon(true);
        reader.start();
    }

    /** Stops the cluster and deletes its data (closing the child's stdin), killing it after 30 s. Idempotent. */
    @Override
    public void close() {
        try {
            commands.close();
        } catch (IOException ignored) {
            // already gone: nothing left to stop
        }
        try {
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                System.err.println("once: the Kafka JVM " + process.pid() + " did not stop within 30 s; killing it");
                process.destroyForcibly();
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
