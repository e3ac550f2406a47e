package dev.once;

import java.sql.SQLException;
import java.util.List;
import java.util.Map;

// Lives in the API package beside Tx, which hands it out, so that dev.once never depends on
// dev.once.outbox (the relay side), which depends on dev.once.
/**
 * The transactional outbox as a handler sees it ({@link Tx#outbox()}). What is added
 * here is written in the claim transaction and leaves only after commit, through a relay that
 * performs it with its idempotency key. A rolled-back transaction sends nothing.
 *
 * <p>Every row gets an event id of its own, {@code <consumer>:<cause event id>#<n>} for the n-th
 * message the handler of {@code consumer} enqueues for one event (the cause part hashed to
 * {@code sha256:<hex>} when the id would exceed 255 characters), carried as
 * {@value dev.once.outbox.OutboxMessage#EVENT_ID_HEADER}; the cause travels as {@value dev.once.outbox.OutboxMessage#CAUSE_ID_HEADER}.
 * It is the default idempotency key too. A transaction's rows, those of every delivery of a batch
 * included, are written together in one statement after its handlers return: all of them commit or none. Two consumers of one event, and two messages of one
 * handler, are distinct events downstream; a relay that re-sends after a crash re-sends the same id
 * and the receiving inbox absorbs it.
 */
public interface Outbox {

    /** Buffered rows are written when the handler returns, or every this many rows before that. */
    int FLUSH_ROWS = 1000;

    /**
     * Enqueues one external effect or publish. The row is written with the transaction's other
     * outbox rows in one statement when the handler returns, before the commit: a failure to write
     * fails the delivery and rolls everything back.
     *
     * @param destination    where the relay sends it: a topic, queue, or a {@code https://} URL
     * @param key            ordering key: messages with one key are sent in order by one relay at a time; may be null
     * @param payload        the body
     * @param headers        extra headers; the event id travels as {@value dev.once.outbox.OutboxMessage#EVENT_ID_HEADER}
     * @param idempotencyKey the key the receiver deduplicates on, derived from the business identity
     *                       (for example {@code charge:order-42}); null to use this message's event id
     * @return the message's event id
     * @throws dev.once.InvalidDeliveryException if the destination, key or idempotency key is blank or too long
     * @throws SQLException when a large transaction's buffered rows are written early (every
     *         {@value #FLUSH_ROWS} rows) and the database fails
     */
    String add(String destination, String key, byte[] payload, Map<String, String> headers, String idempotencyKey)
            throws SQLException;

    /**
     * Enqueues many messages, as {@link #add} each in order (a set-based handler's whole batch).
     *
     * @return their event ids, in order
     */
    List<String> addAll(List<Message> messages) throws SQLException;

    /**
     * One message for {@link #addAll}; the parameters are those of {@link #add}. The payload is not
     * copied: do not change it after adding.
     */
    record Message(
            String destination, String key, byte[] payload, Map<String, String> headers, String idempotencyKey) {}
}
