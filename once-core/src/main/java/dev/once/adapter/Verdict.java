package dev.once.adapter;

import dev.once.Outcome;

/**
 * How a processed message is settled on its broker: the one place that turns an
 * {@link Outcome} into an acknowledgement.
 */
public enum Verdict {
    /** The effect is durably applied (now or before): acknowledge / delete / ack. */
    ACKNOWLEDGE,
    /** Nothing applied, may succeed later, or another delivery holds the claim: leave it for redelivery. */
    REDELIVER,
    /** Nothing applied and never will be: move it to the dead letters (the adapter's rule), then acknowledge. */
    DEAD_LETTER;

    /** The verdict for {@code outcome}: acknowledge exactly when {@link Outcome#shouldAcknowledge()}. */
    public static Verdict of(Outcome outcome) {
        if (outcome.shouldAcknowledge()) {
            return ACKNOWLEDGE;
        }
        return outcome.status() == Outcome.Status.FAILED_PERMANENT ? DEAD_LETTER : REDELIVER;
    }
}
