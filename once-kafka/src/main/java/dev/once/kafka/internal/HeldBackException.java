package dev.once.kafka.internal;

import dev.once.RetryableException;

/**
 * A record the {@link OrderGuard} did not apply because a record before it (in its partition, or
 * in another partition that holds the same event id) is not settled. Not a failure of the record
 * itself: the runner tries it again after the one it waits for, without counting an attempt. Not API.
 */
final class HeldBackException extends RetryableException {

    private static final long serialVersionUID = 1L;

    HeldBackException(String message) {
        super(message);
    }
}
