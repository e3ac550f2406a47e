package dev.once;

/**
 * A {@link Delivery} could not be built from what the broker handed over: a missing, blank or
 * oversized event id, or a malformed field. Nothing was claimed or applied. The adapter routes
 * such a message by its policy (fail, skip and log, dead-letter); it is never deduplicated on a
 * broker id instead.
 */
public class InvalidDeliveryException extends OnceException {

    public InvalidDeliveryException(String message) {
        super(message);
    }
}
