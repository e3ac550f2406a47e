package dev.once.kafka.internal;

import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The offsets a {@link PollLoop} sends to Kafka: only those whose database commit is done. Between
 * batches they go with {@code commitAsync}, overlapping the next batch's transaction, so a failed or
 * late async commit only causes replays, which the inbox absorbs; a rebalance and a close send with
 * {@code commitSync} every owned partition's newest database-committed offset, since an async commit
 * still in flight may yet fail. Poll thread only. Not API.
 */
final class OffsetCommits {

    private static final Logger log = LoggerFactory.getLogger(OffsetCommits.class);

    private final KafkaConsumer<byte[], byte[]> consumer;
    private final Consumer<Map<TopicPartition, OffsetAndMetadata>> afterDatabaseCommit;
    private final KafkaRunnerMetrics metrics;
    private final String name;

    /** Offsets of the last finished batch, committed in the database and not yet sent to Kafka. */
    private Map<TopicPartition, OffsetAndMetadata> pendingCommit;
    /**
     * The newest offsets of each owned partition whose database commit is done, sent or not: what a
     * revoke or close commits synchronously, since an async commit still in flight may fail.
     */
    private final Map<TopicPartition, OffsetAndMetadata> databaseCommitted = new HashMap<>();

    OffsetCommits(
            KafkaConsumer<byte[], byte[]> consumer,
            Consumer<Map<TopicPartition, OffsetAndMetadata>> afterDatabaseCommit,
            KafkaRunnerMetrics metrics,
            String name) {
        this.consumer = consumer;
        this.afterDatabaseCommit = afterDatabaseCommit;
        this.metrics = metrics;
        this.name = name;
    }

    /** Whether a finished batch's offsets wait to be sent: then the loop commits before it waits for records. */
    boolean pending() {
        return pendingCommit != null;
    }

    /** Notes the offsets of a finished batch, committed in the database, to be sent with the next commit. */
    void databaseCommitted(Map<TopicPartition, OffsetAndMetadata> commit) {
        if (!commit.isEmpty()) {
            pendingCommit = pendingCommit == null ? new HashMap<>() : pendingCommit;
            pendingCommit.putAll(commit);
            databaseCommitted.putAll(commit);
        }
    }

    /** Partitions lost, not revoked: what waits for them is not sent, this loop may no longer commit. */
    void dropPending(Collection<TopicPartition> partitions) {
        if (pendingCommit != null) {
            pendingCommit.keySet().removeAll(partitions);
        }
    }

    /** Partitions gone: a later owner moves them on; a stale offset sent on their return would move them back. */
    void forget(Collection<TopicPartition> partitions) {
        for (TopicPartition tp : partitions) {
            databaseCommitted.remove(tp);
        }
    }

    /**
     * Commits the offsets of the finished batches that this loop still owns, all of them committed
     * in the database first. Asynchronously between batches; {@code sync} (a rebalance, a close)
     * waits, and sends again every owned partition's newest database-committed offset, since an
     * async commit still in flight may yet fail.
     */
    void commit(boolean sync) {
        Set<TopicPartition> owned = consumer.assignment();
        if (pendingCommit != null) {
            Map<TopicPartition, OffsetAndMetadata> offsets = pendingCommit;
            pendingCommit = null;
            offsets.keySet().retainAll(owned);
            afterDatabaseCommit.accept(Map.copyOf(offsets));
            if (!sync && !offsets.isEmpty()) {
                long start = System.nanoTime();
                consumer.commitAsync(offsets, (committed, e) -> {
                    metrics.commitLatency.record(System.nanoTime() - start, TimeUnit.NANOSECONDS);
                    if (e != null) {
                        metrics.commitFailed.increment();
                        // The database has these records; the next commit carries newer offsets, and a
                        // new owner replays from the last one that landed, absorbed by the inbox.
                        log.debug("{}: async offset commit failed: {}", name, e.toString());
                    }
                });
            }
        }
        if (!sync) {
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>(databaseCommitted);
        offsets.keySet().retainAll(owned);
        if (offsets.isEmpty()) {
            return;
        }
        long start = System.nanoTime();
        try {
            consumer.commitSync(offsets);
        } catch (KafkaException e) {
            metrics.commitFailed.increment();
            // The database has these records; a new owner replays them and the inbox absorbs them.
            log.warn(
                    "{}: offset commit failed, {} partitions will be replayed from their last commit: {}",
                    name,
                    offsets.size(),
                    e.toString());
        } finally {
            metrics.commitLatency.record(System.nanoTime() - start, TimeUnit.NANOSECONDS);
        }
    }
}
