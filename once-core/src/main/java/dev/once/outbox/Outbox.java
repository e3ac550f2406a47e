package dev.once.outbox;

import java.sql.SQLException;
import java.util.Map;

/**
 * The transactional outbox as a handler sees it ({@link dev.once.Tx#outbox()}). What is added
 * here is written in the claim transaction and leaves only after commit, through a relay that
 * performs it with its idempotency key. A rolled-back transaction sends nothing.
 *
 * <p>Every row is stamped with an event id derived from the delivery being handled: the first row
 * of a transaction carries the delivery's event id, the n-th (n &ge; 2) {@code <event id>#<n>}, so
 * each row is a distinct event for the receiver. A relay that re-sends a row after a crash re-sends
 * its id and the receiving inbox absorbs it.
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
     *                       (for example {@code charge:order-42}); null to use the row's event id
     * @return the outbox row id
     */
    long add(String destination, String key, byte[] payload, Map<String, String> headers, String idempotencyKey)
            throws SQLException;
}
