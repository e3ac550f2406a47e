package dev.once;

/**
 * The business effect of one event. Runs inside the claim transaction: everything it writes
 * through {@link Tx#connection()} commits together with the claim of the event id, or not at all.
 *
 * <p>A handler must not call external systems (payments, e-mail, HTTP) directly: it enqueues
 * them with {@link Tx#outbox()} so that they leave only after commit, with an idempotency key.
 * It must not commit, roll back or close the connection ({@link HandlerMisuseException}).
 *
 * <p>Throw {@link PermanentFailureException} for a message that can never succeed; any other
 * exception is reported as retryable and the message is redelivered.
 */
@FunctionalInterface
public interface Handler {

    void handle(Delivery delivery, Tx tx) throws Exception;
}
