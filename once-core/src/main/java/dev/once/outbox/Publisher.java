package dev.once.outbox;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Sends outbox messages to their destination: a broker publish or an external call. The SPI the
 * {@link OutboxRelay} drives; {@link HttpPublisher} is the HTTP one, broker publishers live in their
 * adapter modules.
 *
 * <p><b>Contract.</b> Send {@link OutboxMessage#payload()} to {@link OutboxMessage#destination()}
 * with every header of {@link OutboxMessage#headers()} (it always holds
 * {@value OutboxMessage#EVENT_ID_HEADER}) and with {@link OutboxMessage#idempotencyKey()} where the
 * destination deduplicates (an {@code Idempotency-Key} header, a FIFO deduplication id, a
 * {@code Nats-Msg-Id}). A message counts as sent only once the destination has accepted it. A
 * message may be sent more than once (a relay that crashes after sending and before marking sends
 * it again), always with the same event id and idempotency key: the receiver deduplicates on them.
 *
 * <p><b>Failure contract: one idiom.</b> Throw (or complete a send's stage with) a
 * {@link PublishFailure}: {@link PublishFailure#permanent} when sending again can never succeed (the
 * destination rejected the message as invalid, it does not exist): the row goes to {@code dead} at
 * once; {@link PublishFailure#retryable} when it may succeed later: the row is tried again with the
 * relay's backoff, and goes to {@code dead} once its retry policy is spent. Either carries a
 * {@link Receipt} of what the destination answered, recorded on the row. Any other exception counts
 * as retryable: an unexpected failure is never a reason to give a message up. Every publisher of
 * {@code once} draws the line in the same place: permanent when the destination does not exist or
 * refuses the message for what it is (invalid, too large, unroutable); retryable for a timeout, a
 * lost or refused connection, throttling, a server error, and a denied publish (authentication or
 * authorization: credentials and permissions can be fixed without changing the message, and a
 * misconfigured deployment must not send the whole outbox to {@code dead} at once). The handler's
 * {@link dev.once.PermanentFailureException} is not a publisher signal; a publisher throwing it is
 * retried like any other unexpected failure. {@code OutboxRelayContract} in once-testkit holds
 * every broker publisher to this.
 *
 * <p><b>Batches.</b> The relay hands a batch to {@link #publishAll} in waves. A wave never holds two
 * messages of one key (a key's next row of the batch goes in the next wave, once this one was
 * sent), so its sends may run concurrently without breaking per-key order. The default sends them one after another through
 * {@link #publish} (and the relay drives a publisher that keeps it send by send, renewing its lease
 * in between); a publisher whose client can pipeline (asynchronous sends, batch requests)
 * overrides it, and must then report each message's outcome apart: one failed send never decides
 * another message's outcome. A wrapper (routing, decorating) that only implements {@link #publish}
 * turns a concurrent publisher sequential: delegate {@link #publishAll} too.
 *
 * <p>Implementations must be thread-safe: several relays may share one.
 */
@FunctionalInterface
public interface Publisher {

    /**
     * Sends {@code message} and returns once the destination has accepted it.
     *
     * @return what the destination answered, recorded on the row; {@link Receipt#NONE} when there is nothing to record
     * @throws Exception a {@link PublishFailure}, or any exception, as described above
     */
    Receipt publish(OutboxMessage message) throws Exception;

    /**
     * Starts sending every message of a batch and returns one stage per message, in the order
     * given, each completed with the message's receipt or failed with its failure (as
     * {@link #publish} would throw it). The relay waits for all of them (bounded by its
     * {@link OutboxRelay.Builder#sendTimeout}), then records each outcome on its row. The messages
     * have distinct keys (or none).
     *
     * <p>The default calls {@link #publish} for each message in turn, in this thread; after an
     * interruption it sends nothing more and fails the remaining stages with the
     * {@link InterruptedException}.
     *
     * @param messages the batch, in id order, never empty
     * @return exactly one stage per message, in the same order
     */
    default List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
        List<CompletionStage<Receipt>> results = new ArrayList<>(messages.size());
        InterruptedException interrupted = null;
        for (OutboxMessage m : messages) {
            if (interrupted != null) {
                results.add(CompletableFuture.failedFuture(interrupted));
                continue;
            }
            try {
                Receipt r = publish(m);
                results.add(CompletableFuture.completedFuture(r == null ? Receipt.NONE : r));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                interrupted = e;
                results.add(CompletableFuture.failedFuture(e));
            } catch (Exception e) {
                results.add(CompletableFuture.failedFuture(e));
            }
        }
        return results;
    }
}
