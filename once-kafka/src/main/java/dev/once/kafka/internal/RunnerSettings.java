package dev.once.kafka.internal;

import dev.once.IdempotentConsumer;
import dev.once.RetryPolicy;
import dev.once.kafka.EventIdExtractor;
import dev.once.kafka.MissingEventIdPolicy;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Everything a runner was built with, validated and copied by the builder. Not API.
 *
 * @param orderGuard      null when the runner was given a prebuilt consumer, whose handler it cannot wrap
 * @param deadLetterTopic null when none is set
 * @param databaseOffsets null unless offsets are kept in the claim transaction
 */
public record RunnerSettings(
        Map<String, Object> consumerProperties,
        List<String> topics,
        IdempotentConsumer idempotentConsumer,
        OrderGuard orderGuard,
        EventIdExtractor eventIdExtractor,
        MissingEventIdPolicy missingEventIdPolicy,
        String deadLetterTopic,
        Map<String, Object> producerProperties,
        RetryPolicy retryPolicy,
        int threads,
        int maxBatchRecords,
        Duration pollTimeout,
        Duration revokeTimeout,
        Duration closeTimeout,
        MeterRegistry meterRegistry,
        Consumer<Map<TopicPartition, OffsetAndMetadata>> afterDatabaseCommit,
        DatabaseOffsets databaseOffsets) {

    /** The consumer group, for logs and meter tags. */
    public String groupId() {
        return String.valueOf(consumerProperties.get("group.id"));
    }

    /** Tries of one record before it is dead-lettered. */
    public int maxAttempts() {
        return (int) Math.min(Integer.MAX_VALUE, retryPolicy.maxRetries() + 1L);
    }

    /** Backoff before try {@code failures + 1}, from the retry policy (past its last retry: at its cap). */
    public Duration backoff(int failures) {
        return retryPolicy.delay(Math.max(failures, 1));
    }

    /** The longest backoff. */
    public Duration maxBackoff() {
        return retryPolicy.maxDelay();
    }
}
