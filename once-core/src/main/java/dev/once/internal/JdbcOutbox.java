package dev.once.internal;

import dev.once.Delivery;
import dev.once.InvalidDeliveryException;
import dev.once.jdbc.Dialect;
import dev.once.outbox.Outbox;
import dev.once.outbox.OutboxMessage;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Writes outbox rows on the claim transaction's connection, stamped with an event id derived from
 * the delivery's. Not API.
 *
 * <p>The first row of a transaction carries the delivery's event id unchanged; the n-th (n &ge; 2)
 * carries {@code <event id>#<n>}. Every row needs an id of its own: a receiver deduplicates on it,
 * so two rows of one handler sharing an id would lose the second as a "duplicate". The ids are
 * deterministic (the same handler writes the same rows in the same order), and a re-send of one
 * row after a relay crash carries the same id, which the receiver absorbs.
 */
public final class JdbcOutbox implements Outbox {

    static final int MAX_DESTINATION = 1000;
    static final int MAX_KEY = 255;

    private final Connection connection;
    private final String insertSql;
    private final String eventId;
    private final Clock clock;
    private int rows;

    public JdbcOutbox(Connection connection, Dialect dialect, String prefix, String eventId, Clock clock) {
        this.connection = connection;
        this.insertSql = dialect.outboxInsert(prefix);
        this.eventId = eventId;
        this.clock = clock;
    }

    @Override
    public long add(String destination, String key, byte[] payload, Map<String, String> headers, String idempotencyKey)
            throws SQLException {
        if (destination == null || destination.isBlank() || destination.length() > MAX_DESTINATION) {
            throw new InvalidDeliveryException("outbox destination must be 1 to " + MAX_DESTINATION
                    + " non-blank characters, but was " + Names.quoted(destination));
        }
        if (key != null && key.length() > MAX_KEY) {
            throw new InvalidDeliveryException("outbox key must be at most " + MAX_KEY + " characters, but was "
                    + key.length());
        }
        String rowEventId = rowEventId(eventId, rows + 1);
        String idem = idempotencyKey == null ? rowEventId : idempotencyKey;
        if (idem.isBlank() || idem.length() > MAX_KEY) {
            throw new InvalidDeliveryException("outbox idempotency key must be 1 to " + MAX_KEY
                    + " non-blank characters, but was " + Names.quoted(idem));
        }
        Map<String, String> all = new LinkedHashMap<>(headers == null ? Map.of() : headers);
        all.put(OutboxMessage.EVENT_ID_HEADER, rowEventId);
        Timestamp now = Timestamp.from(clock.instant());
        try (PreparedStatement ps = connection.prepareStatement(insertSql)) {
            ps.setString(1, rowEventId);                               // 1 event_id
            ps.setString(2, destination);                              // 2 destination
            ps.setString(3, key);                                      // 3 msg_key
            ps.setBytes(4, payload == null ? new byte[0] : payload);   // 4 payload
            ps.setString(5, HeaderCodec.encode(all));                  // 5 headers
            ps.setString(6, idem);                                     // 6 idempotency_key
            ps.setTimestamp(7, now);                                   // 7 available_at
            ps.setTimestamp(8, now);                                   // 8 created_at
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                rows++;
                return rs.getLong(1);
            }
        }
    }

    /** The event id of the n-th row (1-based) of a transaction; cut to fit the 255-character column. */
    static String rowEventId(String eventId, int n) {
        if (n == 1) {
            return eventId;
        }
        String suffix = "#" + n;
        int keep = Math.min(eventId.length(), Delivery.MAX_MESSAGE_ID_LENGTH - suffix.length());
        return eventId.substring(0, keep) + suffix;
    }
}
