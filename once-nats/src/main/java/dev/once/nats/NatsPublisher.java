package dev.once.nats;

import dev.once.PermanentFailureException;
import dev.once.RetryableException;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import io.nats.client.Connection;
import io.nats.client.JetStream;
import io.nats.client.JetStreamApiException;
import io.nats.client.PublishOptions;
import io.nats.client.api.PublishAck;
import io.nats.client.impl.Headers;
import java.io.IOException;
import java.util.List;
import java.util.Objects;

/**
 * The outbox {@link Publisher} for NATS JetStream: publishes a row to the subject named by its
 * destination, with every row header as a NATS header (the event id as
 * {@value OutboxMessage#EVENT_ID_HEADER}, where {@link NatsConsumer} reads it), and waits for the
 * stream's ack: the message is stored when {@link #publish} returns.
 *
 * <pre>{@code
 * OutboxRelay relay = OutboxRelay.builder().dataSource(ds).publisher(new NatsPublisher(nats)).build();
 * }</pre>
 *
 * <p><b>Deduplication.</b> {@code Nats-Msg-Id} is the row's idempotency key (the event id unless the
 * handler gave one), so a relay that re-sends after a crash within the stream's duplicate window
 * produces no second message: the stream answers with a duplicate ack, which counts as sent.
 * Outside the window the consumer's inbox absorbs the copy.
 *
 * <p><b>Receipt.</b> Status 0; body {@code stream=<name> seq=<n> duplicate=<true|false>}: the stream
 * sequence that stores the message, and whether this publish was dropped as a duplicate of an
 * earlier one (then {@code seq} is the earlier message's).
 *
 * <p><b>Failure contract.</b> Permanent: no stream takes the subject, the subject or a header name
 * is invalid, the payload exceeds the server's maximum payload, or the stream refuses the message
 * with a 4xx API error (larger than its maximum message size, for example);
 * {@link PublishFailure} carries the API error. Retryable: a timeout, a lost or closed connection,
 * or a 5xx API error (the stream is full with the discard-new policy, no leader yet).
 *
 * <p>Thread-safe.
 */
public final class NatsPublisher implements Publisher {

    private final Connection connection;
    private final JetStream jetStream;

    /** @throws IOException if JetStream is not enabled on the server */
    public NatsPublisher(Connection connection) throws IOException {
        this.connection = Objects.requireNonNull(connection, "connection");
        this.jetStream = connection.jetStream();
    }

    /**
     * Publishes one outbox row and waits for the stream's ack.
     *
     * @return {@code stream=… seq=… duplicate=…}
     * @throws PermanentFailureException no stream takes the subject, or the message can never be published
     * @throws PublishFailure            the stream refused the message: permanent for a 4xx API error, retryable otherwise
     * @throws RetryableException        a timeout or a lost connection
     */
    @Override
    public Receipt publish(OutboxMessage message) {
        String subject = message.destination();
        PublishAck ack;
        try {
            Headers h = new Headers();
            message.headers().forEach(h::put);
            h.put(OutboxMessage.EVENT_ID_HEADER, message.eventId());
            ack = jetStream.publish(
                    subject,
                    h,
                    message.payload(),
                    PublishOptions.builder().messageId(message.idempotencyKey()).build());
        } catch (IllegalArgumentException e) {
            // jnats validates the subject, the header names and the payload size before sending
            throw new PermanentFailureException(
                    "row " + message.id() + " (event " + message.eventId() + ") cannot be published to NATS subject '"
                            + subject + "': " + e.getMessage(),
                    e);
        } catch (JetStreamApiException e) {
            int code = e.getErrorCode();
            boolean retryable = code >= 500 || code == 408 || code == 429;
            PublishFailure f = new PublishFailure(
                    "stream refused row " + message.id() + " (event "
                            + message.eventId() + ") on subject '" + subject + "': " + e.getMessage()
                            + (retryable ? "; the relay tries again" : "; publishing it again cannot succeed"),
                    retryable,
                    new Receipt(code, "apiErrorCode=" + e.getApiErrorCode() + " " + e.getErrorDescription()));
            f.initCause(e);
            throw f;
        } catch (IOException | IllegalStateException e) {
            // An IOException is a timeout or a status reply such as 503 no responders, which is
            // either a missing stream (permanent) or a stream without a leader right now (retryable).
            if (e instanceof IOException && noStreamTakes(subject)) {
                throw new PermanentFailureException(
                        "no JetStream stream takes subject '" + subject + "' of row "
                                + message.id() + " (event " + message.eventId() + "); create a stream with that subject"
                                + " and replay the row",
                        e);
            }
            throw new RetryableException(
                    "publishing row " + message.id() + " (event " + message.eventId() + ") to NATS subject '" + subject
                            + "' failed: " + e.getMessage(),
                    e);
        }
        return new Receipt(
                0, "stream=" + ack.getStream() + " seq=" + ack.getSeqno() + " duplicate=" + ack.isDuplicate());
    }

    // Asked only after a failed publish; an error here leaves the failure retryable.
    private boolean noStreamTakes(String subject) {
        try {
            List<String> streams = connection.jetStreamManagement().getStreamNames(subject);
            return streams.isEmpty();
        } catch (IOException | JetStreamApiException | RuntimeException e) {
            return false;
        }
    }
}
