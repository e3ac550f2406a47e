package dev.once;

/**
 * The root of every exception {@code once} throws. Unchecked: the failures it signals are
 * either programming errors (bad configuration, bad input) or conditions the engine already
 * reports as an {@link Outcome}; a caller never has to catch it to stay correct.
 */
public class OnceException extends RuntimeException {

    public OnceException(String message) {
        super(message);
    }

    public OnceException(String message, Throwable cause) {
        super(message, cause);
    }
}
