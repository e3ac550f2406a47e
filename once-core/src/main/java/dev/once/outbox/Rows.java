package dev.once.outbox;

import dev.once.internal.HeaderCodec;

import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.util.Map;

/** Reads outbox rows in the column order of {@link dev.once.jdbc.Dialect#outboxLockBatch}. Not API. */
final class Rows {

    private Rows() {
    }

    static OutboxMessage message(ResultSet rs) throws SQLException {
        String eventId = rs.getString(2);
        Map<String, String> headers = HeaderCodec.decode(rs.getString(6));
        // The event id travels with every send, whoever wrote the row and whatever headers it gave.
        headers.put(OutboxMessage.EVENT_ID_HEADER, eventId);
        Timestamp created = rs.getTimestamp(9);
        return new OutboxMessage(rs.getLong(1), eventId, rs.getString(3), rs.getString(4), rs.getBytes(5), headers,
                rs.getString(7), rs.getInt(8), created == null ? null : created.toInstant());
    }

    static String truncate(String s, int max) {
        return s == null || s.length() <= max ? s : s.substring(0, max);
    }
}
