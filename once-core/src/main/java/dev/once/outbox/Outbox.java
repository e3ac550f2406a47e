package dev.once.outbox;

import java.sql.SQLException;
import java.util.Map;

/**
 * The transactional outbox as a handler sees it ({@link dev.once.Tx#outbox()}). What is added
 * here is written in the claim transaction and leaves only after commit, through a relay that
 * performs it with its idempotency key. A rolled-back transaction sends nothing.
 *
 * <p>Every row is stamped with the event id of the delivery being handled, so a relay that
 * re-sends after a crash re-sends the same id and the receiving inbox absorbs it.
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
     *                       (for example {@code charge:order-42}); null to use the event id
     * @return the outbox row id
     */
    long add(String destination, String key, byte[] payload, Map<String, String> headers, String idempotencyKey)
            throws SQLException;
}
