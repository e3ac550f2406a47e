package dev.once;

/**
 * The handler tried to end or reshape the claim transaction itself: a call such as {@code commit}
 * or {@code setAutoCommit} on the connection from {@link Tx#connection()}, or SQL such as
 * {@code COMMIT} (the full list is on {@link Tx#connection()}). Doing so would separate the claim from the effect, so the
 * engine refuses the call, rolls everything back and reports the delivery as
 * {@link Outcome.Status#FAILED_PERMANENT}. Fix the handler; the engine owns the transaction.
 */
public class HandlerMisuseException extends OnceException {

    public HandlerMisuseException(String message) {
        super(message);
    }
}
