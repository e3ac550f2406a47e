package dev.once;

/**
 * The handler tried to end or reshape the claim transaction itself: {@code commit},
 * {@code rollback}, {@code close}, {@code setAutoCommit} or {@code abort} on the connection
 * from {@link Tx#connection()}. Doing so would separate the claim from the effect, so the
 * engine refuses the call, rolls everything back and reports the delivery as
 * {@link Outcome.Status#FAILED_PERMANENT}. Fix the handler; the engine owns the transaction.
 */
public class HandlerMisuseException extends OnceException {

    public HandlerMisuseException(String message) {
        super(message);
    }
}
