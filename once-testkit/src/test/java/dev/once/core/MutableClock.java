package dev.once.core;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.concurrent.atomic.AtomicReference;

/** A clock tests move by hand: the only fake in these tests is time. Thread-safe. */
final class MutableClock extends Clock {

    private final AtomicReference<Instant> now;

    MutableClock(Instant start) {
        this.now = new AtomicReference<>(start);
    }

    static MutableClock startingNow() {
        return new MutableClock(Instant.now().truncatedTo(java.time.temporal.ChronoUnit.MILLIS));
    }

    void advance(Duration d) {
        now.updateAndGet(t -> t.plus(d));
    }

    @Override
    public ZoneId getZone() {
        return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
        return this;
    }

    @Override
    public Instant instant() {
        return now.get();
    }
}
