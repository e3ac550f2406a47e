package dev.once;

/**
 * Thrown by a handler to say that this message can never succeed (malformed payload, unknown
 * account, a business rule that rejects it). The engine rolls the transaction back, leaves the
 * event id unclaimed and reports {@link Outcome.Status#FAILED_PERMANENT}; the adapter sends the
 * message to its dead-letter destination instead of redelivering it forever.
 */
public class PermanentFailureException extends OnceException {

    public PermanentFailureException(String message) {
        super(message);
    }

    public PermanentFailureException(String message, Throwable cause) {
        super(message, cause);
    }
}
