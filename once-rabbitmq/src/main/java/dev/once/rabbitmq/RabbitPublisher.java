package dev.once.rabbitmq;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.once.outbox.OutboxMessage;

import java.io.IOException;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeoutException;

/**
 * Publishes with publisher confirms, for the outbox relay: {@link #publish} returns only once
 * the broker has confirmed the message (it is on disk for durable queues), and throws when it
 * was nacked, not routed to any queue ({@code mandatory}), or not confirmed in time. The event id
 * travels as the header {@value OutboxMessage#EVENT_ID_HEADER} and as the AMQP
 * {@code message-id}; messages are persistent. RabbitMQ does not deduplicate: a relay that
 * re-sends after a crash produces a second message, which the consumer's inbox absorbs.
 *
 * <p>Owns one confirm-mode channel on the given connection. Thread-safe: publishes are
 * serialized on the channel.
 */
public final class RabbitPublisher implements AutoCloseable {

    /** How long a publish waits for the broker's confirm. */
    public static final Duration DEFAULT_CONFIRM_TIMEOUT = Duration.ofSeconds(10);

    private final Channel channel;
    private final Duration confirmTimeout;
    private final Set<String> returned = ConcurrentHashMap.newKeySet();

    /** @throws IOException if the channel cannot be opened */
    public RabbitPublisher(Connection connection) throws IOException {
        this(connection, DEFAULT_CONFIRM_TIMEOUT);
    }

    public RabbitPublisher(Connection connection, Duration confirmTimeout) throws IOException {
        this.confirmTimeout = Objects.requireNonNull(confirmTimeout, "confirmTimeout");
        this.channel = connection.createChannel();
        channel.confirmSelect();
        channel.addReturnListener(r -> returned.add(String.valueOf(r.getProperties().getMessageId())));
    }

    /**
     * Publishes one outbox row. Its destination is {@code exchange/routing-key}, or a queue name
     * (the default exchange routes it to that queue).
     *
     * @throws IOException when the broker nacked it, could not route it or the channel failed; the
     *         relay retries
     */
    public void send(OutboxMessage message) throws IOException {
        String destination = message.destination();
        int slash = destination.indexOf('/');
        String exchange = slash < 0 ? "" : destination.substring(0, slash);
        String routingKey = slash < 0 ? destination : destination.substring(slash + 1);
        publish(exchange, routingKey, message.eventId(), message.payload(), message.headers());
    }

    /**
     * Publishes one message and waits for its confirm.
     *
     * @throws IOException when the broker nacked it, could not route it, or did not confirm within the timeout
     */
    public synchronized void publish(String exchange, String routingKey, String eventId, byte[] payload,
                                     Map<String, String> headers) throws IOException {
        Objects.requireNonNull(eventId, "eventId");
        Map<String, Object> amqpHeaders = new HashMap<>();
        if (headers != null) {
            amqpHeaders.putAll(headers);
        }
        amqpHeaders.put(OutboxMessage.EVENT_ID_HEADER, eventId);
        AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder().messageId(eventId)
                .headers(amqpHeaders).deliveryMode(2).build();
        returned.remove(eventId);
        channel.basicPublish(exchange, routingKey, true, properties, payload);
        try {
            if (!channel.waitForConfirms(confirmTimeout.toMillis())) {
                throw new IOException("the broker nacked event " + eventId + " to exchange '" + exchange
                        + "' with key '" + routingKey + "'");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while waiting for the confirm of event " + eventId, e);
        } catch (TimeoutException e) {
            throw new IOException("no confirm for event " + eventId + " to exchange '" + exchange + "' with key '"
                    + routingKey + "' within " + confirmTimeout, e);
        }
        // a returned message is confirmed after its return, so the flag is set by now
        if (returned.remove(eventId)) {
            throw new IOException("event " + eventId + " to exchange '" + exchange + "' with key '" + routingKey
                    + "' was not routed to any queue; declare the queue or binding first");
        }
    }

    @Override
    public void close() throws IOException {
        try {
            if (channel.isOpen()) {
                channel.close();
            }
        } catch (TimeoutException e) {
            throw new IOException("close of the publisher channel timed out", e);
        }
    }
}
