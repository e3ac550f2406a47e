package dev.once.kafka.internal;

import dev.once.IdempotentConsumer;
import dev.once.kafka.EventIdExtractor;
import dev.once.kafka.MissingEventIdPolicy;
import io.micrometer.core.instrument.MeterRegistry;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Everything a runner was built with, validated and copied by the builder. Not API.
 *
 * @param orderGuard      null when the runner was given a prebuilt consumer, whose handler it cannot wrap
 * @param deadLetterTopic null when none is set
 */
public record RunnerSettings(Map<String, Object> consumerProperties, List<String> topics,
                             IdempotentConsumer idempotentConsumer, OrderGuard orderGuard,
                             EventIdExtractor eventIdExtractor, MissingEventIdPolicy missingEventIdPolicy,
                             String deadLetterTopic, Map<String, Object> producerProperties, int maxAttempts,
                             Duration initialBackoff, Duration maxBackoff, int threads, Duration pollTimeout,
                             Duration revokeTimeout, Duration closeTimeout, MeterRegistry meterRegistry,
                             Consumer<Map<TopicPartition, OffsetAndMetadata>> afterDatabaseCommit) {

    /** The consumer group, for logs and meter tags. */
    public String groupId() {
        return String.valueOf(consumerProperties.get("group.id"));
    }

    /** Backoff before try {@code failures + 1}: initial doubled per failure, capped. */
    public Duration backoff(int failures) {
        long millis = initialBackoff.toMillis() << Math.min(Math.max(failures - 1, 0), 20);
        return Duration.ofMillis(Math.min(millis, maxBackoff.toMillis()));
    }
}
