package dev.once.outbox;

import dev.once.PermanentFailureException;
import dev.once.RetryableException;

/**
 * Sends one outbox message to its destination: a broker publish or an external call. The SPI the
 * {@link OutboxRelay} drives; {@link HttpPublisher} is the HTTP one, broker publishers live in their
 * adapter modules.
 *
 * <p><b>Contract.</b> Send {@link OutboxMessage#payload()} to {@link OutboxMessage#destination()}
 * with every header of {@link OutboxMessage#headers()} (it always holds
 * {@value OutboxMessage#EVENT_ID_HEADER}) and with {@link OutboxMessage#idempotencyKey()} where the
 * destination deduplicates (an {@code Idempotency-Key} header, a FIFO deduplication id, a
 * {@code Nats-Msg-Id}). Return only once the destination has accepted the message. A message may
 * be sent more than once (a relay that crashes after sending and before marking sends it again),
 * always with the same event id and idempotency key: the receiver deduplicates on them.
 *
 * <p><b>Failure contract.</b> Throw {@link PermanentFailureException} when sending again can never
 * succeed (the destination rejected the message as invalid): the row goes to {@code dead} at once.
 * Throw {@link RetryableException}, or any other exception, when it may succeed later: the row is
 * tried again with exponential backoff, then goes to {@code dead} after the relay's maximum number
 * of attempts. Both may carry a {@link Receipt} through {@link PublishFailure} to record what the
 * destination answered.
 *
 * <p>Called by one relay thread at a time per publisher instance unless several relays share it,
 * so implementations must be thread-safe.
 */
@FunctionalInterface
public interface Publisher {

    /**
     * Sends {@code message}.
     *
     * @return what the destination answered, recorded on the row; {@link Receipt#NONE} when there is nothing to record
     * @throws Exception a failure as described above
     */
    Receipt publish(OutboxMessage message) throws Exception;
}
