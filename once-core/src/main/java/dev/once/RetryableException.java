package dev.once;

/**
 * Base type of failures that may succeed when tried again: a deadlock or serialization
 * failure that outlived its bounded retries, a lost connection, a downstream that is
 * temporarily unavailable. A handler may throw a subclass to say so explicitly; the engine
 * reports {@link Outcome.Status#FAILED_RETRYABLE} and the caller leaves the message
 * unacknowledged so the broker redelivers it.
 */
public class RetryableException extends OnceException {

    public RetryableException(String message) {
        super(message);
    }

    public RetryableException(String message, Throwable cause) {
        super(message, cause);
    }
}
