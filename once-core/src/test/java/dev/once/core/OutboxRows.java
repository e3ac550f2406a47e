package dev.once.core;

import dev.once.OutboxHeaders;
import dev.once.internal.JdbcOutbox;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Clock;
import java.util.Map;
import java.util.function.IntFunction;
import javax.sql.DataSource;

/** Writes outbox rows as a handler's transaction would, for relay tests. */
final class OutboxRows {

    /** The consumer the rows are written for: their event ids read {@code test:<cause>#<n>}. */
    static final String CONSUMER = "test";

    private OutboxRows() {}

    static long add(
            DataSource ds,
            Clock clock,
            String eventId,
            String destination,
            String key,
            String payload,
            Map<String, String> headers,
            String idempotencyKey)
            throws SQLException {
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            JdbcOutbox outbox = new JdbcOutbox(
                    c, Dialects.detect(c), TablePrefix.DEFAULT, CONSUMER, eventId, clock, OutboxHeaders.NONE);
            String id = outbox.add(destination, key, payload.getBytes(StandardCharsets.UTF_8), headers, idempotencyKey);
            outbox.flush();
            c.commit();
            try (PreparedStatement ps = c.prepareStatement("SELECT id FROM once_outbox WHERE event_id = ?")) {
                ps.setString(1, id);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    return rs.getLong(1);
                }
            }
        }
    }

    /**
     * Writes {@code n} rows in one transaction, ids in order, payloads {@code <prefix><i>} for i from
     * 1; the key of row i is {@code keyOf.apply(i)} (null: no key).
     */
    static void addAll(DataSource ds, Clock clock, String cause, int n, String prefix, IntFunction<String> keyOf)
            throws SQLException {
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            JdbcOutbox outbox = new JdbcOutbox(
                    c, Dialects.detect(c), TablePrefix.DEFAULT, CONSUMER, cause, clock, OutboxHeaders.NONE);
            for (int i = 1; i <= n; i++) {
                outbox.add("test-topic", keyOf.apply(i), (prefix + i).getBytes(StandardCharsets.UTF_8), Map.of(), null);
            }
            outbox.flush();
            c.commit();
        }
    }

    static long add(DataSource ds, Clock clock, String eventId, String key, String payload) throws SQLException {
        return add(ds, clock, eventId, "test-topic", key, payload, Map.of(), null);
    }
}
