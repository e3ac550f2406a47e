package dev.once.outbox;

import java.sql.SQLException;
import java.util.Map;

/**
 * The transactional outbox as a handler sees it ({@link dev.once.Tx#outbox()}). What is added
 * here is written in the claim transaction and leaves only after commit, through a relay that
 * performs it with its idempotency key. A rolled-back transaction sends nothing.
 *
 * <p>Every row gets an event id of its own, {@code <consumer>:<cause event id>#<n>} for the n-th
 * message the handler of {@code consumer} enqueues for one event (the cause part hashed to
 * {@code sha256:<hex>} when the id would exceed 255 characters), carried as
 * {@value OutboxMessage#EVENT_ID_HEADER}; the cause travels as {@value OutboxMessage#CAUSE_ID_HEADER}.
 * It is the default idempotency key too. Two consumers of one event, and two messages of one
 * handler, are distinct events downstream; a relay that re-sends after a crash re-sends the same id
 * and the receiving inbox absorbs it.
 */
public interface Outbox {

    /**
     * Enqueues one external effect or publish.
     *
     * @param destination    where the relay sends it: a topic, queue, or a {@code https://} URL
     * @param key            ordering key: messages with one key are sent in order by one relay at a time; may be null
     * @param payload        the body
     * @param headers        extra headers; the event id travels as {@value OutboxMessage#EVENT_ID_HEADER}
     * @param idempotencyKey the key the receiver deduplicates on, derived from the business identity
     *                       (for example {@code charge:order-42}); null to use this message's event id
     * @return the outbox row id
     */
    long add(String destination, String key, byte[] payload, Map<String, String> headers, String idempotencyKey)
            throws SQLException;
}
