package dev.once.rabbitmq;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ShutdownSignalException;
import dev.once.RetryableException;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import java.io.IOException;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeoutException;

/**
 * The outbox {@link Publisher} for RabbitMQ, with publisher confirms: {@link #publish} returns only
 * once the broker has confirmed the message (on disk for durable queues). A row's destination is
 * {@code exchange/routing-key}, or a queue name (the default exchange routes it to that queue). The
 * event id travels as the header {@value OutboxMessage#EVENT_ID_HEADER} and as the AMQP
 * {@code message-id}, with every other row header; messages are persistent and published
 * {@code mandatory}, so one that no queue takes is reported instead of silently dropped.
 *
 * <pre>{@code
 * OutboxRelay relay = OutboxRelay.builder().dataSource(ds).publisher(new RabbitPublisher(connection)).build();
 * }</pre>
 *
 * <p><b>Deduplication.</b> RabbitMQ does not deduplicate: a relay that re-sends after a crash
 * produces a second message with the same event id, which the consumer's inbox absorbs.
 *
 * <p><b>Receipt.</b> Status 0; body {@code confirmed seq=<n>}, the channel's publish sequence number
 * that the broker confirmed.
 *
 * <p><b>Failure contract.</b> Permanent ({@link PublishFailure} with the AMQP reply code): the
 * exchange does not exist (404), no queue is bound for the routing key, such as a queue name that
 * does not exist (312 {@code NO_ROUTE}), or the broker refuses the message (406, e.g. larger than
 * its {@code max_message_size}; 311). Retryable: the broker nacked it, no confirm within the
 * confirm timeout, the connection was lost or closed, access refused (403, permissions can be
 * granted), or the thread was interrupted. A channel the broker closed is replaced at the next
 * publish.
 *
 * <p>Owns one confirm-mode channel on the given connection. Thread-safe: publishes are
 * serialized on the channel.
 */
public final class RabbitPublisher implements Publisher, AutoCloseable {

    /** How long a publish waits for the broker's confirm unless configured. */
    public static final Duration DEFAULT_CONFIRM_TIMEOUT = Duration.ofSeconds(10);

    private static final int NO_ROUTE = 312;

    private final Connection connection;
    private final Duration confirmTimeout;
    // message id -> the broker's reason for returning it; filled by the channel's return listener
    private final Map<String, String> returned = new ConcurrentHashMap<>();
    private Channel channel;

    /** @throws IOException if the channel cannot be opened */
    public RabbitPublisher(Connection connection) throws IOException {
        this(connection, DEFAULT_CONFIRM_TIMEOUT);
    }

    /** @throws IOException if the channel cannot be opened */
    public RabbitPublisher(Connection connection, Duration confirmTimeout) throws IOException {
        this.connection = Objects.requireNonNull(connection, "connection");
        this.confirmTimeout = Objects.requireNonNull(confirmTimeout, "confirmTimeout");
        this.channel = open();
    }

    private Channel open() throws IOException {
        Channel ch = connection.createChannel();
        if (ch == null) {
            throw new IOException("connection " + connection + " has no channel left to open");
        }
        ch.confirmSelect();
        ch.addReturnListener(r -> returned.put(
                String.valueOf(r.getProperties().getMessageId()), r.getReplyCode() + " " + r.getReplyText()));
        return ch;
    }

    /**
     * Publishes one outbox row and waits for its confirm.
     *
     * @return {@code confirmed seq=…}
     * @throws PublishFailure       permanent when the exchange is missing, nothing routes the message or the
     *                              broker refuses it; retryable when the broker nacked it
     * @throws RetryableException   no confirm in time, or the connection was lost
     * @throws InterruptedException interrupted while waiting for the confirm; the row is sent again
     */
    @Override
    public synchronized Receipt publish(OutboxMessage message) throws InterruptedException {
        String destination = message.destination();
        int slash = destination.indexOf('/');
        String exchange = slash < 0 ? "" : destination.substring(0, slash);
        String routingKey = slash < 0 ? destination : destination.substring(slash + 1);
        String eventId = message.eventId();
        String what = "row " + message.id() + " (event " + eventId + ") to exchange '" + exchange
                + "' with routing key '" + routingKey + "'";
        Map<String, Object> amqpHeaders = new HashMap<>(message.headers());
        amqpHeaders.put(OutboxMessage.EVENT_ID_HEADER, eventId);
        AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
                .messageId(eventId)
                .headers(amqpHeaders)
                .deliveryMode(2)
                .build();
        long seq;
        try {
            if (!channel.isOpen()) {
                channel = open();
            }
            returned.remove(eventId);
            seq = channel.getNextPublishSeqNo();
            channel.basicPublish(exchange, routingKey, true, properties, message.payload());
            if (!channel.waitForConfirms(confirmTimeout.toMillis())) {
                throw new PublishFailure(
                        "the broker nacked " + what + "; the relay tries again",
                        true,
                        new Receipt(0, "nacked seq=" + seq));
            }
        } catch (ShutdownSignalException e) {
            throw closed(what, e);
        } catch (IOException e) {
            if (e.getCause() instanceof ShutdownSignalException s) {
                throw closed(what, s);
            }
            throw new RetryableException("publishing " + what + " failed: " + e, e);
        } catch (TimeoutException e) {
            throw new RetryableException("no confirm for " + what + " within " + confirmTimeout, e);
        }
        // a returned message is confirmed after its return, so the reason is recorded by now
        String reason = returned.remove(eventId);
        if (reason != null) {
            throw new PublishFailure(
                    what + " was returned unroutable (" + reason + "): no queue is bound for it;"
                            + " declare the queue or binding and replay the row",
                    false,
                    new Receipt(NO_ROUTE, reason));
        }
        return new Receipt(0, "confirmed seq=" + seq);
    }

    // The broker closes the channel for an error in the message or its address (404 no exchange,
    // 406 refused, 311 too large): sending it again cannot succeed. A closed connection, or access
    // refused, can succeed later.
    private static RuntimeException closed(String what, ShutdownSignalException e) {
        if (!e.isHardError() && e.getReason() instanceof AMQP.Channel.Close close) {
            int code = close.getReplyCode();
            boolean retryable = code != 404 && code != 406 && code != 311;
            PublishFailure f = new PublishFailure(
                    "the broker closed the channel publishing " + what + ": " + code
                            + " " + close.getReplyText()
                            + (retryable ? "; the relay tries again" : "; sending it again cannot succeed"),
                    retryable,
                    new Receipt(code, close.getReplyText()));
            f.initCause(e);
            return f;
        }
        return new RetryableException("the connection closed while publishing " + what + ": " + e.getMessage(), e);
    }

    @Override
    public synchronized void close() throws IOException {
        try {
            if (channel.isOpen()) {
                channel.close();
            }
        } catch (TimeoutException e) {
            throw new IOException("close of the publisher channel timed out", e);
        }
    }
}
