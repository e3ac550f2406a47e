package dev.once.kafka;

import dev.once.BatchHandler;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.IdempotentConsumerBuilder;
import dev.once.InvalidConfigurationException;
import dev.once.RetryPolicy;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Builds a {@link KafkaConsumerRunner}. Setters check their argument at once; {@link #build()}
 * checks what is missing and how settings fit together, and copies everything. Not thread-safe.
 *
 * <p>The runner gets its {@link IdempotentConsumer} one of two ways, and the order guarantee differs:
 * <ul>
 *   <li>{@link #dataSource}, {@link #consumer} and {@link #handler} or {@link #batchHandler} (plus
 *       {@link #idempotentConsumer(Consumer)} for further settings): the runner builds the consumer
 *       and wraps the handler, so when record k of a partition fails, or its claim is held by
 *       another transaction that has not committed, later records of that partition are held back,
 *       not applied. <em>Effects are applied in offset order per partition</em>, and offsets are
 *       committed in order, never past k (see docs/kafka.md, also for an event id on two
 *       partitions).</li>
 *   <li>{@link #idempotentConsumer(IdempotentConsumer)}: a consumer built elsewhere (wrapped for
 *       metrics or tests, shared with another adapter). The runner cannot wrap its handler. Offsets
 *       are still committed in order and never past a record whose outcome was not acknowledged:
 *       the runner seeks back to k and the batch is replayed from k. But records after k in the same
 *       batch may have been applied already (a failed batch is retried one record per
 *       transaction), so <em>their effects can precede k's</em>; on the replay they come back as
 *       duplicates and are absorbed. Each effect is still applied exactly once. Across batches, and
 *       in a partition where nothing fails, effects follow offset order in both modes.</li>
 * </ul>
 * Mixing the two fails at {@link #build()}.
 */
public final class KafkaConsumerRunnerBuilder {

    /** {@code max.poll.records} when not given. */
    public static final int DEFAULT_MAX_POLL_RECORDS = 500;
    /**
     * Tries of one record before it is dead-lettered: with the default backoff about 2.5 minutes,
     * so an ordinary database blip or failover (seconds to a minute) dead-letters nothing.
     */
    public static final int DEFAULT_MAX_ATTEMPTS = 10;
    /** Records per transaction when not given: polls merged while a batch runs, as many as four polls hold. */
    public static final int DEFAULT_MAX_BATCH_POLLS = 4;
    /** The most records one transaction may take. */
    public static final int MAX_BATCH_RECORDS = 10_000;
    /** Backoff before the first retry; doubled per attempt up to {@link #DEFAULT_MAX_BACKOFF}. */
    public static final Duration DEFAULT_INITIAL_BACKOFF = Duration.ofSeconds(1);
    /** Longest backoff between two tries of one record. */
    public static final Duration DEFAULT_MAX_BACKOFF = Duration.ofSeconds(30);
    /** How long one {@code poll} waits for records when idle; also the longest a close waits for an idle loop. */
    public static final Duration DEFAULT_POLL_TIMEOUT = Duration.ofMillis(250);
    /** How long a rebalance waits for the in-flight batch before abandoning it (never more than half of {@code max.poll.interval.ms}). */
    public static final Duration DEFAULT_REVOKE_TIMEOUT = Duration.ofSeconds(10);
    /** How long {@link KafkaConsumerRunner#close()} waits for in-flight batches. */
    public static final Duration DEFAULT_CLOSE_TIMEOUT = Duration.ofSeconds(30);
    /** Kafka's own default of {@code max.poll.interval.ms}. */
    static final int KAFKA_DEFAULT_MAX_POLL_INTERVAL_MS = 300_000;

    // What was given, read by RunnerChecks and RunnerAssembly at build().
    final Map<String, Object> kafkaProperties = new LinkedHashMap<>();
    final Map<String, Object> producerProperties = new LinkedHashMap<>();
    final List<String> topics = new ArrayList<>();
    DataSource dataSource;
    String consumer;
    Handler handler;
    BatchHandler batchHandler;
    Consumer<IdempotentConsumerBuilder> consumerSettings;
    IdempotentConsumer prebuilt;
    EventIdExtractor eventIdExtractor = EventIdExtractor.header(EventIdExtractor.DEFAULT_HEADER);
    MissingEventIdPolicy missingEventIdPolicy = MissingEventIdPolicy.FAIL;
    String deadLetterTopic;
    /** Delays between tries of one record, and (maxRetries + 1) the tries before it is dead-lettered. */
    RetryPolicy retryPolicy = RetryPolicy.builder()
            .initialDelay(DEFAULT_INITIAL_BACKOFF)
            .maxDelay(DEFAULT_MAX_BACKOFF)
            .jitter(RetryPolicy.Jitter.NONE)
            .maxRetries(DEFAULT_MAX_ATTEMPTS - 1)
            .build();

    int threads = 1;
    Integer maxBatchRecords;
    Duration pollTimeout = DEFAULT_POLL_TIMEOUT;
    Duration revokeTimeout;
    Duration closeTimeout = DEFAULT_CLOSE_TIMEOUT;
    MeterRegistry meterRegistry = Metrics.globalRegistry;
    boolean offsetsInDatabase;
    Consumer<Map<TopicPartition, OffsetAndMetadata>> afterDatabaseCommit = offsets -> {};

    KafkaConsumerRunnerBuilder() {}

    /**
     * {@code KafkaConsumer} settings; {@code bootstrap.servers} and {@code group.id} are required.
     * {@code enable.auto.commit} is set to false (true is rejected: it commits from inside
     * {@code poll}, before the database commit); the deserializers are byte arrays;
     * {@code max.poll.records} defaults to {@value #DEFAULT_MAX_POLL_RECORDS}. May be called
     * more than once; later values win.
     */
    public KafkaConsumerRunnerBuilder kafkaProperties(Map<String, ?> properties) {
        Objects.requireNonNull(properties, "properties");
        properties.forEach((k, v) -> kafkaProperties.put(
                Objects.requireNonNull(k, "property name"),
                Objects.requireNonNull(v, () -> "value of Kafka property " + k)));
        return this;
    }

    /** As {@link #kafkaProperties(Map)}. */
    public KafkaConsumerRunnerBuilder kafkaProperties(Properties properties) {
        Map<String, Object> copy = new HashMap<>();
        properties.stringPropertyNames().forEach(n -> copy.put(n, properties.getProperty(n)));
        return kafkaProperties(copy);
    }

    /** The topics to subscribe to. Required. */
    public KafkaConsumerRunnerBuilder topics(String... topics) {
        return topics(List.of(topics));
    }

    /** The topics to subscribe to. Required. */
    public KafkaConsumerRunnerBuilder topics(Collection<String> topics) {
        for (String t : topics) {
            if (t == null || t.isBlank()) {
                throw new InvalidConfigurationException("topic names must not be blank, but got " + topics);
            }
            this.topics.add(t);
        }
        return this;
    }

    /** The business database: claims, the handler's writes and the outbox. Required. */
    public KafkaConsumerRunnerBuilder dataSource(DataSource dataSource) {
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
        return this;
    }

    /** The consumer name that scopes claims, matching {@code [a-z0-9._-]{1,100}}. Required. */
    public KafkaConsumerRunnerBuilder consumer(String consumer) {
        this.consumer = Objects.requireNonNull(consumer, "consumer");
        return this;
    }

    /** The business effect per record, run in the claim transaction. This or {@link #batchHandler}. */
    public KafkaConsumerRunnerBuilder handler(Handler handler) {
        this.handler = Objects.requireNonNull(handler, "handler");
        return this;
    }

    /**
     * The business effect of a whole poll, applied set-wise in its claim transaction (see
     * {@link BatchHandler}): called with the records the transaction claimed, in poll order (each
     * partition's in offset order). This or {@link #handler}. The guarantees are those of the
     * per-record handler: effects in offset order per partition (a failing batch is halved until
     * the failing record stands alone; later records of its partition are held back and replayed
     * after it), offsets committed in order, retries and dead letters per record.
     */
    public KafkaConsumerRunnerBuilder batchHandler(BatchHandler batchHandler) {
        this.batchHandler = Objects.requireNonNull(batchHandler, "batchHandler");
        return this;
    }

    /**
     * Further settings of the underlying {@link IdempotentConsumer} (table prefix, lock timeout,
     * permanent-failure predicate, clock). Its data source, consumer, handler (or batch handler) and meter registry
     * are the runner's. Not with {@link #idempotentConsumer(IdempotentConsumer)}.
     */
    public KafkaConsumerRunnerBuilder idempotentConsumer(Consumer<IdempotentConsumerBuilder> settings) {
        this.consumerSettings = Objects.requireNonNull(settings, "settings");
        return this;
    }

    /**
     * A consumer built elsewhere, used as is, instead of {@link #dataSource}, {@link #consumer},
     * {@link #handler} (or {@link #batchHandler}) and {@link #idempotentConsumer(Consumer)} (setting any of them too fails at
     * {@link #build()}). Its name and meter registry are its own. The runner cannot wrap its
     * handler, so effects of later records of a partition may precede a failed record's retry
     * (each is still applied once; see the class description).
     */
    public KafkaConsumerRunnerBuilder idempotentConsumer(IdempotentConsumer consumer) {
        this.prebuilt = Objects.requireNonNull(consumer, "consumer");
        return this;
    }

    /** Where the event id comes from; default the header {@value EventIdExtractor#DEFAULT_HEADER}. */
    public KafkaConsumerRunnerBuilder eventIdExtractor(EventIdExtractor extractor) {
        this.eventIdExtractor = Objects.requireNonNull(extractor, "extractor");
        return this;
    }

    /** Reads the event id from this header instead of {@value EventIdExtractor#DEFAULT_HEADER}. */
    public KafkaConsumerRunnerBuilder eventIdHeader(String header) {
        return eventIdExtractor(EventIdExtractor.header(header));
    }

    /** What to do with a record without an event id; default {@link MissingEventIdPolicy#FAIL}. */
    public KafkaConsumerRunnerBuilder missingEventId(MissingEventIdPolicy policy) {
        this.missingEventIdPolicy = Objects.requireNonNull(policy, "policy");
        return this;
    }

    /**
     * Where permanently failed records, records out of attempts and (under
     * {@link MissingEventIdPolicy#DEAD_LETTER}) records without an id go, with their headers plus
     * {@code once-dlt-reason}, {@code once-dlt-topic}, {@code once-dlt-partition},
     * {@code once-dlt-offset}. Not set: a permanently failed record (or one without an id under
     * DEAD_LETTER) stops the runner thread instead, and a record out of attempts is retried at the
     * capped backoff until it succeeds, so a database outage never stops the runner.
     *
     * <p>Ordering across a dead letter: the partition waits while the record is retried (paused,
     * by the retry policy), and goes on only once the dead letter is written; the records after it
     * are then applied without it. Replaying the dead letter later applies it after them, so a
     * handler whose effects depend on order must treat a replayed dead letter as out of order.
     */
    public KafkaConsumerRunnerBuilder deadLetterTopic(String topic) {
        if (topic == null || topic.isBlank()) {
            throw new InvalidConfigurationException("deadLetterTopic must not be blank, but was '" + topic + "'");
        }
        this.deadLetterTopic = topic;
        return this;
    }

    /**
     * Settings of the producer that writes dead letters, over the defaults: the consumer's
     * {@code bootstrap.servers} and security settings, {@code acks=all}, idempotence on.
     */
    public KafkaConsumerRunnerBuilder producerProperties(Map<String, ?> properties) {
        Objects.requireNonNull(properties, "properties");
        producerProperties.putAll(properties);
        return this;
    }

    /**
     * Tries of one record (1 to 1000) before it is dead-lettered; default {@value #DEFAULT_MAX_ATTEMPTS}.
     * Without a {@link #deadLetterTopic(String)} the record is tried on, at the capped backoff.
     */
    public KafkaConsumerRunnerBuilder maxAttempts(int maxAttempts) {
        if (maxAttempts < 1 || maxAttempts > 1000) {
            throw new InvalidConfigurationException("maxAttempts must be between 1 and 1000, but was " + maxAttempts);
        }
        this.retryPolicy = retryPolicy.toBuilder().maxRetries(maxAttempts - 1).build();
        return this;
    }

    /**
     * Backoff before a retry: {@code initial} doubled per attempt, at most {@code max}. The
     * partition is paused meanwhile; the others go on.
     */
    public KafkaConsumerRunnerBuilder retryBackoff(Duration initial, Duration max) {
        RunnerChecks.positive("retryBackoff initial", initial);
        RunnerChecks.positive("retryBackoff max", max);
        if (max.compareTo(initial) < 0) {
            throw new InvalidConfigurationException(
                    "retryBackoff max must be at least initial, but was max=" + max + ", initial=" + initial);
        }
        this.retryPolicy =
                retryPolicy.toBuilder().initialDelay(initial).maxDelay(max).build();
        return this;
    }

    /**
     * The retry policy of a failed record, as everywhere in {@code once}: its delays space the
     * tries (the partition is paused meanwhile) and {@code maxRetries + 1} is the number of tries
     * before the record is dead-lettered (see {@link #maxAttempts(int)}). Replaces what
     * {@link #retryBackoff} and {@link #maxAttempts} set; default {@value #DEFAULT_MAX_ATTEMPTS} tries,
     * {@code DEFAULT_INITIAL_BACKOFF} doubled up to {@code DEFAULT_MAX_BACKOFF}, no jitter (the
     * records of one partition retry one at a time anyway).
     */
    public KafkaConsumerRunnerBuilder retryPolicy(RetryPolicy policy) {
        this.retryPolicy = Objects.requireNonNull(policy, "policy");
        return this;
    }

    /** Poll loops (1 to 64), each with its own {@code KafkaConsumer} in the group; default 1. */
    public KafkaConsumerRunnerBuilder threads(int threads) {
        if (threads < 1 || threads > 64) {
            throw new InvalidConfigurationException("threads must be between 1 and 64, but was " + threads);
        }
        this.threads = threads;
        return this;
    }

    /**
     * The most records one batch, one transaction, takes (1 to {@value #MAX_BATCH_RECORDS}). The
     * polls that return while a batch runs are merged into the next batch up to this many records,
     * so a slow database gets fewer, larger transactions; an idle runner starts a batch with what
     * one poll returns. Default {@value #DEFAULT_MAX_BATCH_POLLS} × {@code max.poll.records}, at most
     * {@value #MAX_BATCH_RECORDS}. Below {@code max.poll.records}, a batch is one poll.
     */
    public KafkaConsumerRunnerBuilder maxBatchRecords(int maxBatchRecords) {
        if (maxBatchRecords < 1 || maxBatchRecords > MAX_BATCH_RECORDS) {
            throw new InvalidConfigurationException(
                    "maxBatchRecords must be between 1 and " + MAX_BATCH_RECORDS + ", but was " + maxBatchRecords);
        }
        this.maxBatchRecords = maxBatchRecords;
        return this;
    }

    /** How long an idle {@code poll} waits; default {@link #DEFAULT_POLL_TIMEOUT}. */
    public KafkaConsumerRunnerBuilder pollTimeout(Duration pollTimeout) {
        this.pollTimeout = RunnerChecks.positive("pollTimeout", pollTimeout);
        return this;
    }

    /**
     * How long a rebalance waits for the in-flight batch before abandoning it; default
     * {@link #DEFAULT_REVOKE_TIMEOUT}, capped by default at half of {@code max.poll.interval.ms}.
     * Must be below {@code max.poll.interval.ms}, which bounds the whole rebalance.
     */
    public KafkaConsumerRunnerBuilder revokeTimeout(Duration revokeTimeout) {
        this.revokeTimeout = RunnerChecks.positive("revokeTimeout", revokeTimeout);
        return this;
    }

    /** How long {@link KafkaConsumerRunner#close()} waits for in-flight batches; default {@link #DEFAULT_CLOSE_TIMEOUT}. */
    public KafkaConsumerRunnerBuilder closeTimeout(Duration closeTimeout) {
        this.closeTimeout = RunnerChecks.positive("closeTimeout", closeTimeout);
        return this;
    }

    /** Where meters go (the runner's, and the idempotent consumer's unless it is prebuilt); default Micrometer's global registry. */
    public KafkaConsumerRunnerBuilder meterRegistry(MeterRegistry meterRegistry) {
        this.meterRegistry = Objects.requireNonNull(meterRegistry, "meterRegistry");
        return this;
    }

    /**
     * Keeps each partition's next offset in the database, written in the same transaction as the
     * batch's claims (table {@code <prefix>kafka_offsets}, schema version 5), and seeks to it on
     * assignment where it is ahead of Kafka's committed offset: a crash or a rebalance between the
     * database commit and the offset commit then replays nothing the database committed (the inbox
     * still absorbs producer re-sends). Offsets are still committed to Kafka, for lag monitoring and
     * tools. Resetting the group's offsets in Kafka needs its rows deleted too. Needs a handler or batch handler (not
     * a prebuilt consumer); default false.
     */
    public KafkaConsumerRunnerBuilder offsetsInDatabase(boolean offsetsInDatabase) {
        this.offsetsInDatabase = offsetsInDatabase;
        return this;
    }

    /**
     * Test hook: runs on the poll thread after a batch's database commit and before its
     * offset commit, with the offsets about to be committed: the ack gap that crash tests
     * strike in. Not API.
     */
    KafkaConsumerRunnerBuilder afterDatabaseCommit(Consumer<Map<TopicPartition, OffsetAndMetadata>> hook) {
        this.afterDatabaseCommit = Objects.requireNonNull(hook, "hook");
        return this;
    }

    /**
     * @throws InvalidConfigurationException naming what is missing or what conflicts, and what to change
     */
    public KafkaConsumerRunner build() {
        RunnerChecks.requireComplete(this);
        Map<String, Object> props = RunnerChecks.consumerProperties(kafkaProperties);
        Duration revoke = RunnerChecks.revokeTimeout(revokeTimeout, props);
        RunnerChecks.requireConsistent(this);
        return RunnerAssembly.assemble(this, props, revoke);
    }
}
