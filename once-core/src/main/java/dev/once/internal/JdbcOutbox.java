package dev.once.internal;

import dev.once.Delivery;
import dev.once.InvalidDeliveryException;
import dev.once.Outbox;
import dev.once.OutboxHeaders;
import dev.once.jdbc.Dialect;
import dev.once.outbox.OutboxMessage;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The outbox of one cause in a claim transaction: rows are stamped with their event ids and
 * buffered in the transaction's {@link OutboxBuffer}, which writes every cause's rows in one
 * statement. Not thread-safe. Not API.
 */
public final class JdbcOutbox implements Outbox {

    static final int MAX_DESTINATION = 1000;
    static final int MAX_KEY = 255;
    private static final String HASHED = "sha256:";

    private final OutboxBuffer buffer;
    private final String consumer;
    private final String causeId;
    private int added;

    /** An outbox with a buffer of its own, flushed by {@link #flush}. */
    public JdbcOutbox(
            Connection connection,
            Dialect dialect,
            String prefix,
            String consumer,
            String eventId,
            Clock clock,
            OutboxHeaders headers) {
        this(new OutboxBuffer(connection, dialect, prefix, clock, headers), consumer, eventId);
    }

    /** The outbox of cause {@code eventId}, its rows going to the transaction's shared {@code buffer}. */
    public JdbcOutbox(OutboxBuffer buffer, String consumer, String eventId) {
        this.buffer = buffer;
        this.consumer = Names.consumer(consumer);
        this.causeId = eventId;
    }

    /**
     * The event id of the {@code n}-th message a consumer enqueues for one cause:
     * {@code <consumer>:<cause>#<n>}. Each part is needed for uniqueness: two messages of one
     * handler differ by n, two consumers of one event by the consumer (else a downstream inbox
     * would drop the second consumer's message as a duplicate, and an HTTP provider would replay
     * the first answer to the second call), and a cause is committed once per consumer by its
     * claim. It is stable: stored in the row, so every re-send after a relay crash carries it. A
     * consumer name holds no ':' and n no '#', so the form is unambiguous. A cause too long for 255
     * characters is replaced by {@code sha256:<hex>}; a cause that itself starts with
     * {@code sha256:} is hashed too, so a short id can never pose as a hashed one.
     */
    static String eventId(String consumer, String cause, int n) {
        String suffix = "#" + n;
        String prefix = consumer + ":";
        if (!cause.startsWith(HASHED)
                && prefix.length() + cause.length() + suffix.length() <= Delivery.MAX_EVENT_ID_LENGTH) {
            return prefix + cause + suffix;
        }
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(cause.getBytes(StandardCharsets.UTF_8));
            return prefix + HASHED + HexFormat.of().formatHex(digest) + suffix;
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every Java platform", e);
        }
    }

    @Override
    public String add(
            String destination, String key, byte[] payload, Map<String, String> headers, String idempotencyKey)
            throws SQLException {
        headers = buffer.withHookHeaders(headers);
        if (destination == null || destination.isBlank() || destination.length() > MAX_DESTINATION) {
            throw new InvalidDeliveryException("outbox destination must be 1 to " + MAX_DESTINATION
                    + " non-blank characters, but was " + Names.quoted(destination));
        }
        storable("outbox destination", destination);
        if (key != null) {
            storable("outbox key", key);
        }
        if (headers != null) {
            headers.forEach((name, value) -> {
                storable("outbox header name", name);
                storable("outbox header '" + name + "'", value);
            });
        }
        if (key != null && key.length() > MAX_KEY) {
            throw new InvalidDeliveryException(
                    "outbox key must be at most " + MAX_KEY + " characters, but was " + key.length());
        }
        String eventId = eventId(consumer, causeId, added + 1);
        String idem = idempotencyKey == null ? eventId : idempotencyKey;
        storable("outbox idempotency key", idem);
        if (idem.isBlank() || idem.length() > MAX_KEY) {
            throw new InvalidDeliveryException("outbox idempotency key must be 1 to " + MAX_KEY
                    + " non-blank characters, but was " + Names.quoted(idem));
        }
        Map<String, String> all = new LinkedHashMap<>(headers == null ? Map.of() : headers);
        all.put(OutboxMessage.EVENT_ID_HEADER, eventId);
        all.put(OutboxMessage.CAUSE_ID_HEADER, causeId);
        added++;
        buffer.add(new OutboxRepository.NewRow(
                eventId,
                destination,
                key,
                payload == null ? new byte[0] : payload.clone(),
                HeaderCodec.encode(all),
                idem));
        return eventId;
    }

    @Override
    public List<String> addAll(List<Message> messages) throws SQLException {
        List<String> ids = new ArrayList<>(messages.size());
        for (Message m : messages) {
            ids.add(add(m.destination(), m.key(), m.payload(), m.headers(), m.idempotencyKey()));
        }
        return ids;
    }

    /** The buffer this outbox's rows go to. */
    public OutboxBuffer buffer() {
        return buffer;
    }

    /** Writes what the buffer holds, this cause's rows and those of any other cause sharing it (see {@link OutboxBuffer#flush}). */
    public void flush() throws SQLException {
        buffer.flush();
    }

    // Text the database cannot store exactly is refused by name here, before anything is buffered:
    // PostgreSQL rejects NUL with an error naming no value, and an unpaired surrogate is stored as '?'.
    private static void storable(String what, String value) {
        if (value == null) {
            return; // absence is checked where it matters
        }
        if (value.indexOf('\0') >= 0) {
            throw new InvalidDeliveryException(
                    what + " must not contain a NUL character, but was " + Names.quoted(value.replace("\0", "\\0")));
        }
        int lone = Names.unpairedSurrogate(value);
        if (lone >= 0) {
            throw new InvalidDeliveryException(
                    what + " must be well-formed UTF-16, but has an unpaired surrogate at" + " index " + lone);
        }
    }
}
