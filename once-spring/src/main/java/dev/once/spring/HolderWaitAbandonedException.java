package dev.once.spring;

import dev.once.RetryableException;
import java.util.Objects;

/**
 * A Kafka or RabbitMQ {@link IdempotentListener} record whose event another transaction holds (a container evicted
 * from the group, still running its poll, or a slow call whose channel a partition closed, is the usual holder)
 * stopped waiting for that transaction: its listener container is stopping, or its thread was interrupted. Thrown
 * from the listener call; nothing was applied or acknowledged, and the record comes back to whoever owns the
 * partition next (a RabbitMQ message: requeued, one delivery toward a quorum queue's {@code x-delivery-limit}). The
 * container wraps it (a {@code ListenerExecutionFailedException}); find it among the causes.
 *
 * <p>Retryable, and meant to be retried: never list it in {@code DefaultErrorHandler.addNotRetryableExceptions} (nor
 * give it a back-off without attempts). A failure the error handler does not retry is recovered at once (dead-lettered,
 * or logged and skipped by the default recoverer): the record would be skipped while the event is in progress
 * elsewhere, and the records after it in its partition applied before it. Immutable.
 */
public final class HolderWaitAbandonedException extends RetryableException {

    /** Why the wait ended. */
    public enum Reason {
        /** The listener container whose consumer thread waited was told to stop. */
        CONTAINER_STOPPING("its listener container is stopping"),
        /** The waiting thread was interrupted. */
        INTERRUPTED("the thread was interrupted");

        private final String text;

        Reason(String text) {
            this.text = text;
        }
    }

    private final String consumer;
    private final String eventId;
    private final String source;
    private final Reason reason;

    /**
     * @param consumer the listener's consumer name
     * @param eventId  the record's event id
     * @param source   where the record came from ({@code kafka:topic/partition@offset}, {@code rabbitmq:queue})
     * @param reason   why the wait ended
     */
    public HolderWaitAbandonedException(String consumer, String eventId, String source, Reason reason) {
        super("consumer '" + consumer + "' stopped waiting for event '" + eventId + "' (" + source
                + "), in progress in another transaction: " + Objects.requireNonNull(reason, "reason").text
                + "; not applied, not acknowledged: "
                + (source != null && source.startsWith("kafka:")
                        ? "the record is redelivered to the partition's next owner"
                        : "the broker redelivers the message"));
        this.consumer = consumer;
        this.eventId = eventId;
        this.source = source;
        this.reason = reason;
    }

    /** The listener's consumer name. */
    public String consumer() {
        return consumer;
    }

    /** The record's event id. */
    public String eventId() {
        return eventId;
    }

    /** Where the record came from, as {@code kafka:topic/partition@offset} or {@code rabbitmq:queue}. */
    public String source() {
        return source;
    }

    /** Why the wait ended. */
    public Reason reason() {
        return reason;
    }
}
