package dev.once.nats;

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
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;

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
 * the {@link PublishFailure} carries the API error. Retryable: a timeout, a lost or closed connection,
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
     * @throws PublishFailure permanent when no stream takes the subject, the message can never be
     *                        published or the stream refused it with a 4xx API error; retryable for a
     *                        timeout, a lost connection or a 5xx API error
     */
    @Override
    public Receipt publish(OutboxMessage message) {
        try {
            return receipt(
                    jetStream.publish(message.destination(), headers(message), message.payload(), options(message)));
        } catch (IllegalArgumentException | JetStreamApiException | IOException | IllegalStateException e) {
            throw failure(message, e);
        }
    }

    /**
     * Publishes every row without waiting in between (JetStream's asynchronous publish) and returns
     * one stage per row, completed by the stream's ack or failed as {@link #publish} fails.
     */
    @Override
    public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
        List<CompletionStage<Receipt>> results = new ArrayList<>(messages.size());
        for (OutboxMessage m : messages) {
            CompletableFuture<PublishAck> ack;
            try {
                ack = jetStream.publishAsync(m.destination(), headers(m), m.payload(), options(m));
            } catch (IllegalArgumentException | IllegalStateException e) {
                results.add(CompletableFuture.failedFuture(failure(m, e)));
                continue;
            }
            // A failure is classified off the connection's own thread (telling a missing stream apart
            // asks the server); an ack is not: exceptionallyAsync would hop every ack through the
            // common pool (one thread on two cores), which capped a relay at a few thousand a second.
            results.add(ack.thenApply(NatsPublisher::receipt)
                    .exceptionallyCompose(e -> CompletableFuture.supplyAsync(() -> {
                        Throwable cause = e;
                        // jnats wraps the IOException of a status reply in a plain RuntimeException
                        while ((cause instanceof CompletionException || cause.getClass() == RuntimeException.class)
                                && cause.getCause() != null) {
                            cause = cause.getCause();
                        }
                        throw failure(m, cause);
                    })));
        }
        return results;
    }

    private static Headers headers(OutboxMessage message) {
        Headers h = new Headers();
        message.headers().forEach(h::put);
        h.put(OutboxMessage.EVENT_ID_HEADER, message.eventId());
        return h;
    }

    private static PublishOptions options(OutboxMessage message) {
        return PublishOptions.builder().messageId(message.idempotencyKey()).build();
    }

    private static Receipt receipt(PublishAck ack) {
        return new Receipt(
                0, "stream=" + ack.getStream() + " seq=" + ack.getSeqno() + " duplicate=" + ack.isDuplicate());
    }

    private PublishFailure failure(OutboxMessage message, Throwable e) {
        String subject = message.destination();
        if (e instanceof PublishFailure f) {
            return f;
        }
        if (e instanceof IllegalArgumentException) {
            // jnats validates the subject, the header names and the payload size before sending
            return PublishFailure.permanent(
                    "row " + message.id() + " (event " + message.eventId() + ") cannot be published to NATS subject '"
                            + subject + "': " + e.getMessage(),
                    Receipt.NONE,
                    e);
        }
        if (e instanceof JetStreamApiException api) {
            int code = api.getErrorCode();
            boolean retryable = code >= 500 || code == 408 || code == 429;
            return new PublishFailure(
                    "stream refused row " + message.id() + " (event " + message.eventId() + ") on subject '" + subject
                            + "': " + api.getMessage()
                            + (retryable ? "; the relay tries again" : "; publishing it again cannot succeed"),
                    retryable,
                    new Receipt(code, "apiErrorCode=" + api.getApiErrorCode() + " " + api.getErrorDescription()),
                    api);
        }
        // An IOException is a timeout or a status reply such as 503 no responders, which is
        // either a missing stream (permanent) or a stream without a leader right now (retryable).
        if (e instanceof IOException && noStreamTakes(subject)) {
            return PublishFailure.permanent(
                    "no JetStream stream takes subject '" + subject + "' of row " + message.id() + " (event "
                            + message.eventId() + "); create a stream with that subject and replay the row",
                    Receipt.NONE,
                    e);
        }
        return PublishFailure.retryable(
                "publishing row " + message.id() + " (event " + message.eventId() + ") to NATS subject '" + subject
                        + "' failed: " + e.getMessage(),
                Receipt.NONE,
                e);
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
