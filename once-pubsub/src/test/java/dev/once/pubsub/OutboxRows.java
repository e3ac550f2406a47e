package dev.once.pubsub;

import dev.once.outbox.OutboxMessage;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/** Outbox rows as the relay hands them to a publisher. */
final class OutboxRows {

    private OutboxRows() {}

    /** A row whose event id is also its idempotency key. */
    static OutboxMessage row(String destination, String eventId, String key, String body) {
        return new OutboxMessage(
                0, eventId, destination, key, body.getBytes(StandardCharsets.UTF_8), Map.of(), eventId, 0, null);
    }
}
