package dev.once.kafka.internal;

import java.sql.SQLException;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where an assigned partition starts when offsets are kept in the database: at the database's offset
 * where it is ahead of Kafka's committed one, so what the database committed is not replayed; else
 * where Kafka's committed offset puts it. Not API.
 */
final class StartOffsets {

    // The poll loop's logger, as before this rule had a class of its own.
    private static final Logger log = LoggerFactory.getLogger(PollLoop.class);

    private StartOffsets() {}

    /**
     * Seeks each of {@code partitions} to the database's offset where it is ahead of Kafka's; on the poll
     * thread. Returns those offsets: committed in the database, they are Kafka's to commit too, or a
     * partition with nothing after them keeps Kafka's older offset (lag that never drains, for every
     * tool that reads the group) until a record arrives.
     */
    static Map<TopicPartition, OffsetAndMetadata> seek(
            Consumer<byte[], byte[]> consumer,
            DatabaseOffsets offsets,
            Collection<TopicPartition> partitions,
            String name) {
        Map<TopicPartition, Long> stored;
        try {
            stored = offsets.read();
        } catch (SQLException e) {
            log.warn(
                    "{}: could not read the offsets kept in the database, starting from Kafka's (replays are"
                            + " absorbed): {}",
                    name,
                    e.toString());
            return Map.of();
        }
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(new HashSet<>(partitions));
        Map<TopicPartition, OffsetAndMetadata> ahead = new HashMap<>();
        for (TopicPartition tp : partitions) {
            Long next = stored.get(tp);
            OffsetAndMetadata kafka = committed.get(tp);
            if (next != null && (kafka == null || next > kafka.offset())) {
                consumer.seek(tp, next);
                ahead.put(tp, new OffsetAndMetadata(next));
            }
        }
        return ahead;
    }
}
