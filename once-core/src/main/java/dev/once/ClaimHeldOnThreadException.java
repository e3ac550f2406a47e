package dev.once;

/**
 * Why a delivery is {@link Outcome.Status#IN_PROGRESS} without its claim having been tried: a transaction of the
 * calling thread, open and suspended (Spring's {@code REQUIRES_NEW} or {@code NOT_SUPPORTED} inside it), claimed
 * the event and holds the claim's row lock until it ends, which it cannot before the call returns. Waiting for the
 * claim, as for a holder on another thread, would never end: leave the message unacknowledged, and its
 * redelivery, after that transaction ended, is applied or a duplicate.
 */
public class ClaimHeldOnThreadException extends RetryableException {

    public ClaimHeldOnThreadException(String message) {
        super(message);
    }
}
