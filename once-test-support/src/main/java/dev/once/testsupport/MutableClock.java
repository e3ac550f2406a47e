package dev.once.testsupport;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.temporal.ChronoUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A clock a test moves by hand, for expiries the test must cross without waiting: lock and lease
 * timeouts, retention, backoff. Pass it to a builder's {@code clock(...)} and {@link #advance} it;
 * time is the only thing these tests fake. Thread-safe; the zone is UTC.
 */
public final class MutableClock extends Clock {

    private final AtomicReference<Instant> now;

    private MutableClock(Instant start) {
        this.now = new AtomicReference<>(start);
    }

    /** A clock at the current time, truncated to milliseconds. */
    public static MutableClock startingNow() {
        return new MutableClock(Instant.now().truncatedTo(ChronoUnit.MILLIS));
    }

    /** Moves the clock forward (or back, for a negative {@code d}). */
    public void advance(Duration d) {
        now.updateAndGet(t -> t.plus(d));
    }

    @Override
    public ZoneId getZone() {
        return ZoneOffset.UTC;
    }

    /** This clock: it keeps one zone, UTC. */
    @Override
    public Clock withZone(ZoneId zone) {
        return this;
    }

    @Override
    public Instant instant() {
        return now.get();
    }
}
