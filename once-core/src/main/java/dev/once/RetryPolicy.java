package dev.once;

import java.time.Duration;
import java.util.Objects;
import java.util.Random;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How often and how far apart a failed operation is tried again: exponential backoff from
 * {@link #initialDelay()}, multiplied by {@link #multiplier()} per retry, capped at
 * {@link #maxDelay()}, randomized by {@link #jitter()}, at most {@link #maxRetries()} times. One
 * policy type for every retry in {@code once}: the engine's deadlock and serialization retries, the
 * outbox relay's failed sends, the adapters' receive failures.
 *
 * <pre>{@code
 * RetryPolicy policy = RetryPolicy.builder()
 *     .initialDelay(Duration.ofSeconds(1)).maxDelay(Duration.ofMinutes(5))
 *     .jitter(RetryPolicy.Jitter.FULL).maxRetries(10).build();
 * Duration wait = policy.delay(3);     // before the third retry
 * }</pre>
 *
 * <p>Jitter matters: rows or transactions that fail together (one deadlock, one outage) would
 * otherwise retry together and collide again. Immutable and thread-safe; without an injected
 * {@link Random} the jitter draws from {@link ThreadLocalRandom}.
 */
public final class RetryPolicy {

    /** How the computed delay is randomized. */
    public enum Jitter {
        /** The delay as computed: every failure of one moment retries at the same moment. */
        NONE,
        /** Uniform between zero and the computed delay: spreads retries most, shortest average wait. */
        FULL,
        /** Half the computed delay plus a uniform part of the other half: never shorter than half. */
        EQUAL
    }

    /** The engine's deadlock/serialization retries: 5 ms doubling to 200 ms, full jitter, 5 retries. */
    public static final RetryPolicy DEFAULT_CONFLICT_RETRIES = builder()
            .initialDelay(Duration.ofMillis(5))
            .maxDelay(Duration.ofMillis(200))
            .jitter(Jitter.FULL)
            .maxRetries(5)
            .build();

    /** The largest {@link #maxRetries()} a builder accepts. */
    public static final int MAX_RETRIES_LIMIT = 1_000_000;

    private final Duration initialDelay;
    private final Duration maxDelay;
    private final double multiplier;
    private final Jitter jitter;
    private final int maxRetries;
    private final Random random;

    private RetryPolicy(Builder b) {
        this.initialDelay = b.initialDelay;
        this.maxDelay = b.maxDelay;
        this.multiplier = b.multiplier;
        this.jitter = b.jitter;
        this.maxRetries = b.maxRetries;
        this.random = b.random;
    }

    /** A builder with defaults 100 ms, ×2, 30 s cap, full jitter, 10 retries. */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding this policy's settings, to derive a changed copy. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.initialDelay = initialDelay;
        b.maxDelay = maxDelay;
        b.multiplier = multiplier;
        b.jitter = jitter;
        b.maxRetries = maxRetries;
        b.random = random;
        return b;
    }

    public Duration initialDelay() {
        return initialDelay;
    }

    public Duration maxDelay() {
        return maxDelay;
    }

    public double multiplier() {
        return multiplier;
    }

    public Jitter jitter() {
        return jitter;
    }

    /** How many times a failure is tried again; 0 means never. */
    public int maxRetries() {
        return maxRetries;
    }

    /** True when the {@code retry}-th retry (1-based) is still allowed. */
    public boolean allowsRetry(int retry) {
        return retry >= 1 && retry <= maxRetries;
    }

    /**
     * The wait before the {@code retry}-th retry (1-based): {@code min(maxDelay, initialDelay ×
     * multiplier^(retry-1))}, then jittered. Defined for any retry number, also past {@link #maxRetries()}
     * (a caller that keeps retrying forever, like the relay's dead-letter replay, stays at the cap).
     *
     * @throws IllegalArgumentException if {@code retry < 1}
     */
    public Duration delay(int retry) {
        if (retry < 1) {
            throw new IllegalArgumentException("retry is counted from 1, but was " + retry);
        }
        double nanos = initialDelay.toNanos() * Math.pow(multiplier, retry - 1);
        long cap = maxDelay.toNanos();
        long base = nanos >= cap || Double.isNaN(nanos) ? cap : (long) nanos;
        long jittered = switch (jitter) {
            case NONE -> base;
            case FULL -> uniform(0, base);
            case EQUAL -> base / 2 + uniform(0, base - base / 2);
        };
        return Duration.ofNanos(jittered);
    }

    private long uniform(long from, long toInclusive) {
        if (toInclusive <= from) {
            return from;
        }
        long bound = toInclusive - from + 1;
        return from
                + (random != null
                        ? random.nextLong(bound)
                        : ThreadLocalRandom.current().nextLong(bound));
    }

    @Override
    public String toString() {
        return "RetryPolicy[initialDelay=" + initialDelay + ", multiplier=" + multiplier + ", maxDelay=" + maxDelay
                + ", jitter=" + jitter + ", maxRetries=" + maxRetries + "]";
    }

    /** Builds a {@link RetryPolicy}; every setter checks its value at once. Not thread-safe. */
    public static final class Builder {
        private Duration initialDelay = Duration.ofMillis(100);
        private Duration maxDelay = Duration.ofSeconds(30);
        private double multiplier = 2.0;
        private Jitter jitter = Jitter.FULL;
        private int maxRetries = 10;
        private Random random;

        private Builder() {}

        /** The wait before the first retry, more than zero and at most one day. */
        public Builder initialDelay(Duration initialDelay) {
            this.initialDelay = positive("initialDelay", initialDelay);
            return this;
        }

        /** The longest wait, more than zero and at most one day; at least {@code initialDelay} (checked at build). */
        public Builder maxDelay(Duration maxDelay) {
            this.maxDelay = positive("maxDelay", maxDelay);
            return this;
        }

        /** Growth per retry, 1.0 (constant) to 100.0, default 2.0. */
        public Builder multiplier(double multiplier) {
            if (!(multiplier >= 1.0 && multiplier <= 100.0)) {
                throw new InvalidConfigurationException(
                        "multiplier must be between 1.0 and 100.0, but was " + multiplier);
            }
            this.multiplier = multiplier;
            return this;
        }

        /** How the delay is randomized, default {@link Jitter#FULL}. */
        public Builder jitter(Jitter jitter) {
            this.jitter = Objects.requireNonNull(jitter, "jitter");
            return this;
        }

        /** How many times to try again, 0 to {@value RetryPolicy#MAX_RETRIES_LIMIT}, default 10. */
        public Builder maxRetries(int maxRetries) {
            if (maxRetries < 0 || maxRetries > MAX_RETRIES_LIMIT) {
                throw new InvalidConfigurationException(
                        "maxRetries must be between 0 and " + MAX_RETRIES_LIMIT + ", but was " + maxRetries);
            }
            this.maxRetries = maxRetries;
            return this;
        }

        /** The source of jitter; tests inject a seeded one for repeatable delays. */
        public Builder random(Random random) {
            this.random = Objects.requireNonNull(random, "random");
            return this;
        }

        /** Shorthand for {@code random(new Random(seed))}. */
        public Builder seed(long seed) {
            return random(new Random(seed));
        }

        /** @throws InvalidConfigurationException if {@code maxDelay} is shorter than {@code initialDelay} */
        public RetryPolicy build() {
            if (maxDelay.compareTo(initialDelay) < 0) {
                throw new InvalidConfigurationException(
                        "maxDelay must be at least initialDelay (" + initialDelay + "), but was " + maxDelay);
            }
            return new RetryPolicy(this);
        }

        private static Duration positive(String name, Duration d) {
            if (d == null || d.isNegative() || d.isZero() || d.compareTo(Duration.ofDays(1)) > 0) {
                throw new InvalidConfigurationException(
                        name + " must be more than zero and at most 1 day, but was " + d);
            }
            return d;
        }
    }
}
