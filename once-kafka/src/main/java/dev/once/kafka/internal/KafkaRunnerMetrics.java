package dev.once.kafka.internal;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.TopicPartition;

/**
 * The meters of one runner, shared by its poll loops, tagged {@code consumer} and {@code group}:
 * {@code once.kafka.records.polled}, {@code once.kafka.records.applied},
 * {@code once.kafka.records.duplicate}, {@code once.kafka.records.failed{kind=retryable|permanent}},
 * {@code once.kafka.records.dead_lettered}, {@code once.kafka.records.missing_id},
 * {@code once.kafka.commit.latency} (timer of an offset commit, an async one until its callback),
 * {@code once.kafka.commit.failed} (offset commits that failed: replays follow, absorbed) and
 * {@code once.kafka.lag{topic,partition}} (records behind the log end, as last seen by a poll). Not API.
 */
public final class KafkaRunnerMetrics {

    private final MeterRegistry registry;
    private final Tags tags;
    final Counter polled;
    final Counter applied;
    final Counter duplicate;
    final Counter failedRetryable;
    final Counter failedPermanent;
    final Counter deadLettered;
    final Counter missingId;
    final Timer commitLatency;
    final Counter commitFailed;
    private final Map<TopicPartition, AtomicLong> lag = new ConcurrentHashMap<>();

    public KafkaRunnerMetrics(MeterRegistry registry, String consumer, String group) {
        this.registry = registry;
        this.tags = Tags.of("consumer", consumer, "group", group);
        polled = counter("once.kafka.records.polled", "records returned by poll", tags);
        applied = counter("once.kafka.records.applied", "records whose effect was applied", tags);
        duplicate = counter(
                "once.kafka.records.duplicate",
                "records whose event id was already applied: replays and double publishes absorbed",
                tags);
        failedRetryable =
                counter("once.kafka.records.failed", "record tries that failed", tags.and("kind", "retryable"));
        failedPermanent =
                counter("once.kafka.records.failed", "record tries that failed", tags.and("kind", "permanent"));
        deadLettered = counter("once.kafka.records.dead_lettered", "records sent to the dead-letter topic", tags);
        missingId = counter("once.kafka.records.missing_id", "records without an event id", tags);
        commitLatency = Timer.builder("once.kafka.commit.latency")
                .description("time of one offset commit, an async one until its callback")
                .tags(tags)
                .register(registry);
        commitFailed = counter(
                "once.kafka.commit.failed",
                "offset commits that failed; their records are replayed and absorbed by the inbox",
                tags);
    }

    private Counter counter(String name, String description, Tags t) {
        return Counter.builder(name).description(description).tags(t).register(registry);
    }

    void lag(TopicPartition tp, long value) {
        lag.computeIfAbsent(tp, p -> {
                    AtomicLong holder = new AtomicLong();
                    Gauge.builder("once.kafka.lag", holder, AtomicLong::doubleValue)
                            .description("records between the consumer position and the log end")
                            .tags(tags.and("topic", p.topic(), "partition", Integer.toString(p.partition())))
                            .register(registry);
                    return holder;
                })
                .set(value);
    }
}
