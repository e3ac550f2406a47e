package dev.once.kafka.internal;

import dev.once.Inbox;
import dev.once.jdbc.Dialect;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.Map;
import javax.sql.DataSource;
import org.apache.kafka.common.TopicPartition;

/**
 * Kafka offsets kept in the claim transaction (opt-in): the handler wrapper records, per thread,
 * the next offset of each partition whose record it applied; the transactions it hands the engine
 * ({@link OrderGuard#transactions}) write them in one JDBC batch just before their COMMIT, so the
 * database holds the offsets of exactly what it committed. On assignment the runner seeks to them where they are ahead of
 * Kafka's committed offsets. Offsets only move with applied records: a batch of duplicates leaves
 * them to Kafka's commit. Thread-safe; a transaction runs on one thread. Not API.
 */
public final class DatabaseOffsets {

    private final DataSource dataSource;
    private final String group;
    private final ThreadLocal<Map<TopicPartition, Long>> pending = ThreadLocal.withInitial(HashMap::new);
    private volatile Dialect dialect;
    private volatile String prefix;

    public DatabaseOffsets(DataSource dataSource, String group) {
        this.dataSource = dataSource;
        this.group = group;
    }

    /** The tables the engine uses; called once the engine is built, before the first transaction. */
    public void bind(Inbox inbox) {
        this.dialect = inbox.dialect();
        this.prefix = inbox.tablePrefix();
    }

    /** The record before {@code next} of {@code tp} was applied in this thread's open transaction. */
    void applied(TopicPartition tp, long next) {
        pending.get().merge(tp, next, Math::max);
    }

    /** A transaction begins or ends: what it applied is no longer pending. */
    void clearPending() {
        pending.get().clear();
    }

    /** Writes this thread's pending offsets on {@code c}, just before its transaction commits. */
    void writePending(Connection c) throws SQLException {
        Map<TopicPartition, Long> offsets = pending.get();
        try {
            if (!offsets.isEmpty()) {
                write(c, offsets);
            }
        } finally {
            offsets.clear();
        }
    }

    /** The stored next offset of each partition of the group. */
    Map<TopicPartition, Long> read() throws SQLException {
        Map<TopicPartition, Long> offsets = new HashMap<>();
        try (Connection c = dataSource.getConnection();
                PreparedStatement ps = c.prepareStatement(dialect.kafkaOffsetSelect(prefix))) {
            ps.setString(1, group); // 1: consumer group
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    offsets.put(new TopicPartition(rs.getString(1), rs.getInt(2)), rs.getLong(3));
                }
            }
        }
        return offsets;
    }

    private void write(Connection c, Map<TopicPartition, Long> offsets) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(dialect.kafkaOffsetUpsert(prefix))) {
            for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
                ps.setString(1, group); // 1: consumer group
                ps.setString(2, e.getKey().topic()); // 2: topic
                ps.setInt(3, e.getKey().partition()); // 3: partition
                ps.setLong(4, e.getValue()); // 4: next offset
                ps.addBatch();
            }
            ps.executeBatch();
        }
    }
}
