package dev.once.pubsub;

import com.google.protobuf.ByteString;
import com.google.pubsub.v1.PubsubMessage;
import dev.once.outbox.OutboxMessage;
import java.util.Objects;

/**
 * For producers that publish with the Pub/Sub client directly: stamps the event id where
 * {@link PubSubConsumer} reads it, the attribute {@value #EVENT_ID_ATTRIBUTE}. Choose the id
 * once per event and keep it on every re-send (a retry after a timeout, a second producer):
 * the consumer's inbox deduplicates on it, never on the server's message id, which is new on
 * every publish.
 *
 * <pre>{@code
 * publisher.publish(PubSubMessages.message(order.eventId(), json).toBuilder().setOrderingKey(order.id()).build());
 * }</pre>
 */
public final class PubSubMessages {

    /** The attribute with the event id: the outbox's {@value OutboxMessage#EVENT_ID_HEADER}. */
    public static final String EVENT_ID_ATTRIBUTE = OutboxMessage.EVENT_ID_HEADER;

    private PubSubMessages() {}

    /** A message with {@code data} and the event id attribute. */
    public static PubsubMessage message(String eventId, byte[] data) {
        Objects.requireNonNull(data, "data");
        return stamp(PubsubMessage.newBuilder().setData(ByteString.copyFrom(data)), eventId)
                .build();
    }

    /** Sets the event id attribute on {@code builder}; returns it. */
    public static PubsubMessage.Builder stamp(PubsubMessage.Builder builder, String eventId) {
        Objects.requireNonNull(builder, "builder");
        Objects.requireNonNull(eventId, "eventId");
        if (eventId.isEmpty()) {
            throw new IllegalArgumentException("eventId must not be empty");
        }
        return builder.putAttributes(EVENT_ID_ATTRIBUTE, eventId);
    }
}
