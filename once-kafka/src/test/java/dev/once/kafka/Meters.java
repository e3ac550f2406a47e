package dev.once.kafka;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;

/** Reads runner meters in tests. */
final class Meters {

    private Meters() {}

    /** Sum of every counter named {@code name}, whatever its tags. */
    static long count(MeterRegistry registry, String name) {
        return (long) registry.find(name).counters().stream()
                .mapToDouble(Counter::count)
                .sum();
    }

    static long applied(MeterRegistry r) {
        return count(r, "once.kafka.records.applied");
    }

    static long duplicates(MeterRegistry r) {
        return count(r, "once.kafka.records.duplicate");
    }

    /** Records acknowledged: applied plus duplicate. */
    static long acknowledged(MeterRegistry r) {
        return applied(r) + duplicates(r);
    }
}
