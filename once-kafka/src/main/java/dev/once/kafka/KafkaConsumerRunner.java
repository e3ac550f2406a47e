package dev.once.kafka;

import java.time.Duration;
import java.util.Optional;

/**
 * Runs an effectively-once Kafka consumer: poll loops on their own threads, each batch (a poll, or
 * the polls that arrived while the previous batch ran, up to
 * {@link KafkaConsumerRunnerBuilder#maxBatchRecords}) processed in one transaction through
 * {@link dev.once.IdempotentConsumer#processBatch}, offsets committed only after the database
 * commit ({@code commitAsync} between batches, {@code commitSync} on a rebalance and a close) and
 * only up to the last record of each partition that was applied, found duplicate or dead-lettered
 * without a gap.
 *
 * <pre>{@code
 * KafkaConsumerRunner runner = KafkaConsumerRunner.builder()
 *     .kafkaProperties(Map.of("bootstrap.servers", "kafka:9092", "group.id", "billing"))
 *     .topics("payments")
 *     .dataSource(ds).consumer("billing").handler((d, tx) -> credit(tx.connection(), d))
 *     .deadLetterTopic("payments.dlt")
 *     .build()
 *     .start();
 * ...
 * runner.close();   // finishes the in-flight batch, commits, leaves the group
 * }</pre>
 *
 * <p>What happens to a record:
 * <ul>
 *   <li>applied or duplicate: acknowledged; its offset is committed after the batch's commit.</li>
 *   <li>retryable failure: its partition is sought back to it and paused for a backoff, then it is
 *       tried again, at most {@link KafkaConsumerRunnerBuilder#maxAttempts} times; no offset past it
 *       is committed, and later records of the partition wait, so effects stay in offset order
 *       (with a prebuilt {@code IdempotentConsumer} later records of the same batch may be applied
 *       ahead of it and come back as duplicates: see {@link KafkaConsumerRunnerBuilder}).</li>
 *   <li>permanent failure or attempts exhausted: sent to the dead-letter topic with its original
 *       headers and the reason, then committed past. Without a dead-letter topic the runner thread
 *       stops instead (see {@link #failure()}): nothing is dropped silently.</li>
 *   <li>no event id: per {@link MissingEventIdPolicy}.</li>
 * </ul>
 *
 * <p>A batch that would outlive {@code max.poll.interval.ms} does not cost the membership: while it
 * runs on a worker thread the poll thread keeps polling, fetches at most one batch ahead and keeps
 * every partition paused after that, so memory stays bounded by two batches. On a rebalance
 * the in-flight batch is awaited up to {@link KafkaConsumerRunnerBuilder#revokeTimeout} and its
 * offsets committed; past that it is abandoned: nothing of it is committed to Kafka, the new owner
 * replays it, and the inbox absorbs the replay.
 *
 * <p>Thread-safe. {@link #close()} may be called from any thread, and more than once.
 */
public interface KafkaConsumerRunner extends AutoCloseable {

    /** Starts a builder. */
    static KafkaConsumerRunnerBuilder builder() {
        return new KafkaConsumerRunnerBuilder();
    }

    /**
     * Starts the poll threads and returns this runner.
     *
     * @throws IllegalStateException if it was started or closed before
     */
    KafkaConsumerRunner start();

    /** True while every poll thread runs: started, not closed, none stopped by a failure. */
    boolean isRunning();

    /** The failure that stopped a poll thread, if one did: a missing event id under FAIL, a dead letter that could not be written. */
    Optional<Throwable> failure();

    /**
     * Stops polling, waits up to {@link KafkaConsumerRunnerBuilder#closeTimeout} for each in-flight
     * batch, commits what the database committed, and leaves the group. Idempotent.
     */
    @Override
    void close();

    /** As {@link #close()} with another bound on the wait. */
    void close(Duration timeout);
}
