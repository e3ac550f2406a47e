package dev.once.adapter;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The pause after the n-th failure in a row: exponential with a cap, with full jitter so loops
 * failing together do not retry together. The one seam until the engine's {@code RetryPolicy}
 * replaces it.
 */
record Backoff(Duration initial, Duration max) {

    static final Backoff DEFAULT = new Backoff(Duration.ofMillis(200), Duration.ofSeconds(10));

    /** @param failures failures in a row, 1 or more */
    Duration delay(int failures) {
        long cap = Math.min(max.toMillis(), initial.toMillis() << Math.min(Math.max(failures - 1, 0), 20));
        // half fixed, half random: at least half the nominal pause, never more than it
        return Duration.ofMillis(cap / 2 + ThreadLocalRandom.current().nextLong(cap / 2 + 1));
    }
}
