package dev.once.core;

import dev.once.internal.JdbcOutbox;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;

import javax.sql.DataSource;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.util.Map;

/** Writes outbox rows as a handler's transaction would, for relay tests. */
final class OutboxRows {

    /** The consumer the rows are written for: their event ids read {@code test:<cause>#<n>}. */
    static final String CONSUMER = "test";

    private OutboxRows() {
    }

    static long add(DataSource ds, Clock clock, String eventId, String destination, String key, String payload,
                    Map<String, String> headers, String idempotencyKey) throws SQLException {
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            long id = new JdbcOutbox(c, Dialects.POSTGRESQL, TablePrefix.DEFAULT, CONSUMER, eventId, clock)
                    .add(destination, key, payload.getBytes(StandardCharsets.UTF_8), headers, idempotencyKey);
            c.commit();
            return id;
        }
    }

    static long add(DataSource ds, Clock clock, String eventId, String key, String payload) throws SQLException {
        return add(ds, clock, eventId, "test-topic", key, payload, Map.of(), null);
    }
}
