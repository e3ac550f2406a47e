package dev.once.kafka;

import dev.once.InvalidConfigurationException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * How the settings given to a {@link KafkaConsumerRunnerBuilder} fit together: what is missing,
 * what conflicts, and the Kafka properties a runner cannot work with. Every failure is an
 * {@link InvalidConfigurationException} naming the bad value and what to change. Run by
 * {@link KafkaConsumerRunnerBuilder#build()} in this order: {@link #requireComplete},
 * {@link #consumerProperties}, {@link #revokeTimeout}, {@link #requireConsistent}.
 */
final class RunnerChecks {

    private RunnerChecks() {}

    /** The required settings are there, and a prebuilt consumer is not mixed with what it replaces. */
    static void requireComplete(KafkaConsumerRunnerBuilder b) {
        List<String> missing = new ArrayList<>();
        if (!b.kafkaProperties.containsKey(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG)) {
            missing.add("kafkaProperties bootstrap.servers");
        }
        if (!b.kafkaProperties.containsKey(ConsumerConfig.GROUP_ID_CONFIG)) {
            missing.add("kafkaProperties group.id");
        }
        if (b.topics.isEmpty()) {
            missing.add("topics");
        }
        if (b.prebuilt != null) {
            List<String> conflicting = new ArrayList<>();
            if (b.dataSource != null) {
                conflicting.add("dataSource(...)");
            }
            if (b.consumer != null) {
                conflicting.add("consumer(...)");
            }
            if (b.handler != null) {
                conflicting.add("handler(...)");
            }
            if (b.batchHandler != null) {
                conflicting.add("batchHandler(...)");
            }
            if (b.consumerSettings != null) {
                conflicting.add("idempotentConsumer(settings -> ...)");
            }
            if (!conflicting.isEmpty()) {
                throw new InvalidConfigurationException(
                        "idempotentConsumer(IdempotentConsumer) was given together with "
                                + String.join(", ", conflicting)
                                + ", but a prebuilt consumer brings its own data source, name,"
                                + " handler and settings; remove " + String.join(", ", conflicting)
                                + ", or drop the prebuilt consumer and let the runner build one from them");
            }
        } else {
            if (b.dataSource == null) {
                missing.add("dataSource");
            }
            if (b.consumer == null) {
                missing.add("consumer");
            }
            if (b.handler != null && b.batchHandler != null) {
                throw new InvalidConfigurationException("handler(...) and batchHandler(...) were both set, but a"
                        + " runner applies records one way: per record (handler) or per poll, set-wise"
                        + " (batchHandler); remove one of them");
            }
            if (b.handler == null && b.batchHandler == null) {
                missing.add("handler or batchHandler");
            }
        }
        if (!missing.isEmpty()) {
            throw new InvalidConfigurationException("a Kafka consumer runner needs " + String.join(", ", missing)
                    + ", but they were not set"
                    + (b.prebuilt == null
                                    && (b.dataSource == null
                                            || b.consumer == null
                                            || (b.handler == null && b.batchHandler == null))
                            ? " (or give a prebuilt idempotentConsumer(IdempotentConsumer) instead of"
                                    + " dataSource, consumer and handler)"
                            : ""));
        }
    }

    /**
     * The {@code KafkaConsumer} properties: auto-commit off (on is rejected), byte-array
     * deserializers (others are rejected), {@code max.poll.records} defaulted and bounded.
     */
    static Map<String, Object> consumerProperties(Map<String, Object> given) {
        Map<String, Object> props = new HashMap<>(given);
        Object autoCommit = props.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
        if (autoCommit != null
                && Boolean.parseBoolean(autoCommit.toString().strip().toLowerCase(Locale.ROOT))) {
            throw new InvalidConfigurationException("enable.auto.commit must be false for a once runner, but was '"
                    + autoCommit + "': auto-commit commits offsets from inside poll(), before the database commit,"
                    + " so a crash loses records; remove the setting (the runner commits after each batch)");
        }
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        for (String key :
                List.of(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG)) {
            Object value = props.get(key);
            if (value != null && !isByteArrayDeserializer(value)) {
                throw new InvalidConfigurationException(key + " must be " + ByteArrayDeserializer.class.getName()
                        + ", but was '" + value + "': the runner hands raw bytes to the handler as the delivery "
                        + "payload; remove the setting and decode in the handler");
            }
            props.put(key, ByteArrayDeserializer.class.getName());
        }
        props.putIfAbsent(
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG,
                Integer.toString(KafkaConsumerRunnerBuilder.DEFAULT_MAX_POLL_RECORDS));
        int maxPollRecords = intProperty(
                props, ConsumerConfig.MAX_POLL_RECORDS_CONFIG, KafkaConsumerRunnerBuilder.DEFAULT_MAX_POLL_RECORDS);
        if (maxPollRecords < 1 || maxPollRecords > 10_000) {
            throw new InvalidConfigurationException("max.poll.records must be between 1 and 10000 (one batch is one "
                    + "database transaction), but was " + maxPollRecords);
        }
        return Map.copyOf(props);
    }

    /**
     * The revoke timeout: the given one, which must be below {@code max.poll.interval.ms}, or the
     * default capped at half of it.
     */
    static Duration revokeTimeout(Duration given, Map<String, Object> props) {
        int maxPollIntervalMs = intProperty(
                props,
                ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG,
                KafkaConsumerRunnerBuilder.KAFKA_DEFAULT_MAX_POLL_INTERVAL_MS);
        Duration revoke = given;
        if (revoke == null) {
            revoke = Duration.ofMillis(
                    Math.min(KafkaConsumerRunnerBuilder.DEFAULT_REVOKE_TIMEOUT.toMillis(), maxPollIntervalMs / 2));
        } else if (revoke.toMillis() >= maxPollIntervalMs) {
            throw new InvalidConfigurationException("revokeTimeout must be below max.poll.interval.ms ("
                    + maxPollIntervalMs + " ms), which bounds the whole rebalance, but was " + revoke
                    + "; lower revokeTimeout or raise max.poll.interval.ms");
        }
        return revoke;
    }

    /** Dead letters have somewhere to go and do not come back; database offsets need the runner's own consumer. */
    static void requireConsistent(KafkaConsumerRunnerBuilder b) {
        if (b.missingEventIdPolicy == MissingEventIdPolicy.DEAD_LETTER && b.deadLetterTopic == null) {
            throw new InvalidConfigurationException("missingEventId(DEAD_LETTER) needs a deadLetterTopic, but none"
                    + " was set; set deadLetterTopic(...) or choose FAIL or SKIP_AND_LOG");
        }
        if (b.deadLetterTopic != null && b.topics.contains(b.deadLetterTopic)) {
            throw new InvalidConfigurationException("deadLetterTopic '" + b.deadLetterTopic
                    + "' is also a subscribed topic; a dead letter would be consumed again");
        }
        if (b.offsetsInDatabase && b.prebuilt != null) {
            throw new InvalidConfigurationException("offsetsInDatabase(true) needs the runner to build the consumer"
                    + " (dataSource, consumer, handler or batchHandler), but a prebuilt idempotentConsumer(IdempotentConsumer) was"
                    + " given, whose transactions the runner cannot write offsets in; drop one of them");
        }
    }

    private static boolean isByteArrayDeserializer(Object value) {
        return value == ByteArrayDeserializer.class
                || ByteArrayDeserializer.class.getName().equals(value.toString());
    }

    static int intProperty(Map<String, Object> props, String key, int fallback) {
        Object v = props.get(key);
        if (v == null) {
            return fallback;
        }
        try {
            return v instanceof Number n
                    ? n.intValue()
                    : Integer.parseInt(v.toString().strip());
        } catch (NumberFormatException e) {
            throw new InvalidConfigurationException(key + " must be an integer, but was '" + v + "'");
        }
    }

    static Duration positive(String name, Duration d) {
        Objects.requireNonNull(d, name);
        if (d.isZero() || d.isNegative()) {
            throw new InvalidConfigurationException(name + " must be positive, but was " + d);
        }
        return d;
    }
}
