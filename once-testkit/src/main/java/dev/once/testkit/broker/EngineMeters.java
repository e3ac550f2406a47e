package dev.once.testkit.broker;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Outcome.Status;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The engine's counters against what a test's {@link dev.once.OutcomeListener} saw: the broker
 * adapters' state machines end with these checks, each with its own model of redeliveries.
 */
public final class EngineMeters {

    private EngineMeters() {}

    /**
     * Asserts {@code once.deliveries{outcome}} per status, {@code once.duplicates} and
     * {@code once.redeliveries} against the outcomes reported.
     *
     * @param statuses     the status of every outcome reported, one per delivery
     * @param redeliveries how many of those deliveries were redeliveries, by the test's model
     * @param what         what the assertion messages say happened (the moves)
     */
    public static void assertAgree(MeterRegistry registry, List<Status> statuses, long redeliveries, String what) {
        Map<Status, Long> byStatus = new EnumMap<>(Status.class);
        statuses.forEach(s -> byStatus.merge(s, 1L, Long::sum));
        assertThat(count(registry, "once.redeliveries"))
                .as("once.redeliveries, " + what)
                .isEqualTo(redeliveries);
        assertThat(count(registry, "once.duplicates"))
                .as("once.duplicates, " + what)
                .isEqualTo(byStatus.getOrDefault(Status.DUPLICATE, 0L));
        for (Status s : Status.values()) {
            assertThat((long) registry.get("once.deliveries")
                            .tag("outcome", s.name().toLowerCase(Locale.ROOT))
                            .counter()
                            .count())
                    .as("once.deliveries %s, %s", s, what)
                    .isEqualTo(byStatus.getOrDefault(s, 0L));
        }
    }

    /**
     * Asserts that a delivery reported {@link Status#DUPLICATE} is of an event whose effect is applied
     * exactly once: a duplicate the engine counts (once.duplicates) must stand for a real effect.
     *
     * @param effects  committed effects per event id
     * @param delivery what the assertion message names the delivery by
     */
    public static void assertDuplicateOfApplied(
            Status status, String eventId, Map<String, Long> effects, Object delivery, String what) {
        if (status == Status.DUPLICATE) {
            assertThat(effects.getOrDefault(eventId, 0L))
                    .as("%s reported a duplicate of an applied event, %s", delivery, what)
                    .isEqualTo(1);
        }
    }

    private static long count(MeterRegistry registry, String name) {
        return (long) registry.get(name).counter().count();
    }
}
