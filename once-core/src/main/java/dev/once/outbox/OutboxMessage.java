package dev.once.outbox;

import java.time.Instant;
import java.util.Arrays;
import java.util.Map;
import java.util.Objects;

/**
 * One row of the outbox as a relay reads it. Immutable.
 *
 * @param id             the row id, increasing in insertion order
 * @param eventId        this message's own event id: {@code <cause event id>#<n>} for the n-th message a
 *                       handler enqueued, stable across re-sends
 * @param destination    topic, queue or URL
 * @param key            ordering key, may be null
 * @param payload        body, copied
 * @param headers        headers, copied
 * @param idempotencyKey the receiver's dedupe key
 * @param attempts       sends tried so far
 * @param createdAt      when it was written
 */
public record OutboxMessage(
        long id,
        String eventId,
        String destination,
        String key,
        byte[] payload,
        Map<String, String> headers,
        String idempotencyKey,
        int attempts,
        Instant createdAt) {

    /** The header that carries the event id on every send. */
    public static final String EVENT_ID_HEADER = "once-event-id";

    /** The header that carries the id of the event whose handling wrote this message, for tracing. */
    public static final String CAUSE_ID_HEADER = "once-cause-id";

    public OutboxMessage {
        Objects.requireNonNull(eventId, "eventId");
        Objects.requireNonNull(destination, "destination");
        payload = payload == null ? new byte[0] : payload.clone();
        headers = headers == null ? Map.of() : Map.copyOf(headers);
        Objects.requireNonNull(idempotencyKey, "idempotencyKey");
    }

    @Override
    public byte[] payload() {
        return payload.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof OutboxMessage m
                && id == m.id
                && eventId.equals(m.eventId)
                && destination.equals(m.destination)
                && Objects.equals(key, m.key)
                && Arrays.equals(payload, m.payload)
                && headers.equals(m.headers)
                && idempotencyKey.equals(m.idempotencyKey)
                && attempts == m.attempts
                && Objects.equals(createdAt, m.createdAt);
    }

    @Override
    public int hashCode() {
        return Objects.hash(id, eventId, destination, key, Arrays.hashCode(payload), headers, idempotencyKey, attempts);
    }

    @Override
    public String toString() {
        return "OutboxMessage[id=" + id + ", eventId=" + eventId + ", destination=" + destination + ", key=" + key
                + ", payload=" + payload.length + " bytes, idempotencyKey=" + idempotencyKey + ", attempts=" + attempts
                + "]";
    }
}
