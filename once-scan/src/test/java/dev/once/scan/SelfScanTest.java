package dev.once.scan;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code once scan} on this repository: the adapters' consumers are safe, and the two consumers
 * written to be naive (the demo's naive lane, the benchmark's naive loop) are caught.
 */
class SelfScanTest {

    private static final List<String> ADAPTERS =
            List.of("once-kafka/", "once-sqs/", "once-rabbitmq/", "once-nats/", "once-pubsub/");

    @Test
    void thisProjectsOwnConsumersAreSafe() {
        Path root = Path.of("..").toAbsolutePath().normalize();
        assertThat(Files.exists(root.resolve("once-core/pom.xml")))
                .as("run from the once-scan module")
                .isTrue();
        ScanReport report = ConsumerScan.builder().root(root).build().run();
        System.out.println(Format.TEXT.render(report));

        List<Consumer> adapters = report.consumers().stream()
                .filter(c -> ADAPTERS.stream().anyMatch(a -> c.location().file().startsWith(a)))
                .toList();
        assertThat(adapters)
                .as("the adapters' poll loops and callbacks are found")
                .extracting(c -> c.location().file())
                .anyMatch(f -> f.startsWith("once-kafka/"))
                .anyMatch(f -> f.startsWith("once-sqs/"))
                .anyMatch(f -> f.startsWith("once-rabbitmq/"))
                .anyMatch(f -> f.startsWith("once-nats/"));
        assertThat(adapters)
                .allSatisfy(c -> assertThat(c.score()).as("%s is safe", c).isEqualTo(100));
        assertThat(report.findings())
                .filteredOn(f -> ADAPTERS.stream().anyMatch(a -> f.consumer().startsWith(a)))
                .isEmpty();

        assertThat(report.findings())
                .as("the demo's naive lane charges the card again on redelivery")
                .anyMatch(f ->
                        f.rule() == Rule.DUPLICATE_EFFECT && f.location().file().endsWith("demo/NaiveLane.java"));
        // its work is a PollStep lambda the trace does not follow into: the loop is listed with its auto-commit,
        // which commits each poll's records at the next poll(), after the loop's work (a duplicate, not a loss)
        assertThat(report.consumers())
                .as("the benchmark's naive loop auto-commits")
                .anyMatch(c -> c.location().file().endsWith("bench/KafkaEndToEnd.java")
                        && c.ack().contains("enable.auto.commit")
                        && c.ack().contains("at the next poll()"));
    }
}
