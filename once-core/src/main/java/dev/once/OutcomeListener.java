package dev.once;

/**
 * Told each delivery's final outcome, once, after its transaction ended: right after the commit or
 * rollback when the engine owns the transaction; from the caller's commit or rollback when it joins
 * one (see {@link IdempotentConsumerBuilder#transactions}), where an {@code APPLIED} whose caller
 * rolled back arrives as {@link Outcome.Status#FAILED_RETRYABLE}. Called on the thread that ended
 * the transaction; must be thread-safe and quick. An exception it throws is logged and ignored.
 */
@FunctionalInterface
public interface OutcomeListener {

    void outcome(Delivery delivery, Outcome outcome);
}
