package dev.once.internal;

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

/** Writes outbox rows on the claim transaction's connection, stamped with the event id. Not API. */
public final class JdbcOutbox implements Outbox {

    static final int MAX_DESTINATION = 1000;
    static final int MAX_KEY = 255;

    private final Connection connection;
    private final String insertSql;
    private final String causeId;
    private final Clock clock;
    private int added;

    public JdbcOutbox(Connection connection, Dialect dialect, String prefix, String eventId, Clock clock) {
        this.connection = connection;
        this.insertSql = dialect.outboxInsert(prefix);
        this.causeId = eventId;
        this.clock = clock;
    }

    // Each message a handler enqueues is an event of its own: two messages to one downstream
    // consumer must not share an id, or its inbox would drop the second. "<cause>#<n>" is unique
    // (the claim lets this transaction commit once per cause) and stable (it is stored in the row,
    // so every re-send after a relay crash carries the same id).
    private String nextEventId() {
        String id = causeId + "#" + (++added);
        if (id.length() <= dev.once.Delivery.MAX_MESSAGE_ID_LENGTH) {
            return id;
        }
        try {
            byte[] digest = java.security.MessageDigest.getInstance("SHA-256")
                    .digest(causeId.getBytes(java.nio.charset.StandardCharsets.UTF_8));
            return java.util.HexFormat.of().formatHex(digest) + "#" + added;
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every Java platform", e);
        }
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
        String eventId = nextEventId();
        String idem = idempotencyKey == null ? eventId : idempotencyKey;
        if (idem.isBlank() || idem.length() > MAX_KEY) {
            throw new InvalidDeliveryException("outbox idempotency key must be 1 to " + MAX_KEY
                    + " non-blank characters, but was " + Names.quoted(idem));
        }
        Map<String, String> all = new LinkedHashMap<>(headers == null ? Map.of() : headers);
        all.put(OutboxMessage.EVENT_ID_HEADER, eventId);
        all.put(OutboxMessage.CAUSE_ID_HEADER, causeId);
        Timestamp now = Timestamp.from(clock.instant());
        try (PreparedStatement ps = connection.prepareStatement(insertSql)) {
            ps.setString(1, eventId);                                  // 1 event_id
            ps.setString(2, destination);                              // 2 destination
            ps.setString(3, key);                                      // 3 msg_key
            ps.setBytes(4, payload == null ? new byte[0] : payload);   // 4 payload
            ps.setString(5, HeaderCodec.encode(all));                  // 5 headers
            ps.setString(6, idem);                                     // 6 idempotency_key
            ps.setTimestamp(7, now);                                   // 7 available_at
            ps.setTimestamp(8, now);                                   // 8 created_at
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }
}
