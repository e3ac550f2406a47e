package dev.once.kafka.internal;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.common.TopicPartition;

/**
 * The next batch of a {@link PollLoop}, fetched while the current one runs: each partition's
 * records continue its list in offset order. The loop pauses every partition once it is
 * {@link #full()}, so at most one batch waits. Its records of a partition that is sought back or
 * revoked are dropped. Poll thread only. Not API.
 */
final class NextBatch {

    private final int maxRecords;
    /** Null when empty. */
    private Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> records;

    private int count;

    NextBatch(int maxRecords) {
        this.maxRecords = maxRecords;
    }

    boolean isEmpty() {
        return records == null;
    }

    /** Whether it holds all it may: every partition is paused until it starts. */
    boolean full() {
        return records != null && count >= maxRecords;
    }

    /** Adds what a poll returned. */
    void add(ConsumerRecords<byte[], byte[]> polled) {
        if (records == null) {
            records = new LinkedHashMap<>();
        }
        for (TopicPartition tp : polled.partitions()) {
            records.computeIfAbsent(tp, k -> new ArrayList<>()).addAll(polled.records(tp));
        }
        count += polled.count();
    }

    /** Drops what it holds of these partitions; empty when nothing is left. */
    void drop(Collection<TopicPartition> partitions) {
        if (records == null) {
            return;
        }
        for (TopicPartition tp : partitions) {
            List<ConsumerRecord<byte[], byte[]>> dropped = records.remove(tp);
            count -= dropped == null ? 0 : dropped.size();
        }
        if (records.isEmpty()) {
            clear();
        }
    }

    /** Hands the batch over to be started, leaving this empty. */
    Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> take() {
        Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> batch = records;
        clear();
        return batch;
    }

    void clear() {
        records = null;
        count = 0;
    }
}
