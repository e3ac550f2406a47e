package dev.once.keys;

import dev.once.OnceException;

/**
 * A scope, idempotency key or request fingerprint is missing, blank, too long or contains
 * control characters. The message names the value and the limit. A client error: answer 400 (HTTP)
 * and do not retry with the same value.
 */
public class InvalidIdempotencyKeyException extends OnceException {

    public InvalidIdempotencyKeyException(String message) {
        super(message);
    }
}
