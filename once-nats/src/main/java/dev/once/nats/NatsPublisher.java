package dev.once.nats;

import dev.once.outbox.OutboxMessage;
import io.nats.client.Connection;
import io.nats.client.JetStream;
import io.nats.client.JetStreamApiException;
import io.nats.client.PublishOptions;
import io.nats.client.api.PublishAck;
import io.nats.client.impl.Headers;

import java.io.IOException;
import java.util.Map;
import java.util.Objects;

/**
 * Publishes to JetStream with {@code Nats-Msg-Id} set from the event id (an outbox row's idempotency key), so a relay that re-sends
 * after a crash within the stream's duplicate window produces no second message (the server
 * answers with a duplicate ack); outside the window the consumer's inbox absorbs the copy. The
 * event id also travels as the header {@value OutboxMessage#EVENT_ID_HEADER}. Each publish waits
 * for the server's ack: the message is stored when it returns.
 *
 * <p>Thread-safe.
 */
public final class NatsPublisher {

    private final JetStream jetStream;

    /** @throws IOException if JetStream is not enabled on the server */
    public NatsPublisher(Connection connection) throws IOException {
        this.jetStream = Objects.requireNonNull(connection, "connection").jetStream();
    }

    /**
     * Publishes one outbox row; its destination is the subject. {@code Nats-Msg-Id} is the row's
     * idempotency key, which is the event id unless the handler gave one: two different messages
     * one handler wrote for one event must not dedupe each other.
     *
     * @return true if the stream stored it, false if it was a duplicate of an earlier publish
     * @throws IOException          on a timeout or a lost connection; the relay retries
     * @throws JetStreamApiException when no stream takes the subject
     */
    public boolean send(OutboxMessage message) throws IOException, JetStreamApiException {
        return publish(message.destination(), message.eventId(), message.idempotencyKey(), message.payload(),
                message.headers());
    }

    /** Publishes one message with {@code Nats-Msg-Id} set to the event id; see {@link #send}. */
    public boolean publish(String subject, String eventId, byte[] payload, Map<String, String> headers)
            throws IOException, JetStreamApiException {
        return publish(subject, eventId, eventId, payload, headers);
    }

    private boolean publish(String subject, String eventId, String messageId, byte[] payload,
                            Map<String, String> headers) throws IOException, JetStreamApiException {
        Objects.requireNonNull(eventId, "eventId");
        Headers h = new Headers();
        if (headers != null) {
            headers.forEach(h::put);
        }
        h.put(OutboxMessage.EVENT_ID_HEADER, eventId);
        PublishAck ack = jetStream.publish(subject, h, payload, PublishOptions.builder().messageId(messageId).build());
        return !ack.isDuplicate();
    }
}
