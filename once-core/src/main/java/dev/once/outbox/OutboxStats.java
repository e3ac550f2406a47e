package dev.once.outbox;

import java.time.Duration;
import java.util.Objects;

/**
 * The outbox at one moment, for metrics and operators. Immutable.
 *
 * @param pending          rows waiting to be sent (including ones waiting for a retry)
 * @param oldestPendingAge how long the oldest pending row has waited: the relay's lag; zero when none
 * @param dead             rows that will not be tried again until an operator replays them
 */
public record OutboxStats(long pending, Duration oldestPendingAge, long dead) {

    public OutboxStats {
        Objects.requireNonNull(oldestPendingAge, "oldestPendingAge");
    }
}
