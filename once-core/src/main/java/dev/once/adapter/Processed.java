package dev.once.adapter;

import dev.once.Delivery;
import dev.once.Outcome;
import java.util.Objects;

/**
 * One broker message after processing: the delivery decoded from it (null when it carried no
 * usable event id) and what became of it. Immutable.
 *
 * @param message  the broker's message
 * @param delivery what the engine saw, or null when the message could not be decoded
 * @param outcome  the engine's outcome; {@link Outcome.Status#FAILED_PERMANENT} for an undecodable message
 * @param <M>      the broker's message type
 */
public record Processed<M>(M message, Delivery delivery, Outcome outcome) {

    public Processed {
        Objects.requireNonNull(message, "message");
        Objects.requireNonNull(outcome, "outcome");
    }

    /** How to settle it. */
    public Verdict verdict() {
        return Verdict.of(outcome);
    }
}
