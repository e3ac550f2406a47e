package dev.once.internal;

import dev.once.Delivery;
import dev.once.Outcome;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.EnumMap;
import java.util.Map;

/**
 * The meters of one consumer, looked up once. Redeliveries (the broker handed it over again) and
 * duplicates (the claim found the event already applied) are counted apart: a redelivery handled
 * safely is not a duplicate effect, and a duplicate can arrive as a first delivery (double publish).
 * Not API.
 */
public final class OnceMetrics {

    private final Map<Outcome.Status, Counter> deliveries = new EnumMap<>(Outcome.Status.class);
    private final Counter redeliveries;
    private final Counter duplicates;
    private final Counter mismatched;
    private final Counter fenceRejections;
    private final Timer handlerDuration;

    public OnceMetrics(MeterRegistry registry, String consumer) {
        for (Outcome.Status s : Outcome.Status.values()) {
            deliveries.put(
                    s,
                    Counter.builder("once.deliveries")
                            .description("deliveries processed, by outcome")
                            .tag("consumer", consumer)
                            .tag("outcome", s.name().toLowerCase(java.util.Locale.ROOT))
                            .register(registry));
        }
        redeliveries = Counter.builder("once.redeliveries")
                .description("deliveries the broker marked as redelivered or counted past the first attempt")
                .tag("consumer", consumer)
                .register(registry);
        duplicates = Counter.builder("once.duplicates")
                .description("deliveries whose event id was already applied; their effect was not repeated")
                .tag("consumer", consumer)
                .register(registry);
        mismatched = Counter.builder("once.duplicates.mismatched")
                .description("duplicates whose payload fingerprint differs from the applied one's: an event id the"
                        + " producer reused for another event (MismatchPolicy COUNT or FAIL_PERMANENT)")
                .tag("consumer", consumer)
                .register(registry);
        fenceRejections = Counter.builder("once.fence.rejections")
                .description("writes rejected for a stale fencing token")
                .tag("consumer", consumer)
                .register(registry);
        handlerDuration = Timer.builder("once.handler.duration")
                .description("time spent in the handler")
                .tag("consumer", consumer)
                .register(registry);
    }

    public void received(Delivery d) {
        if (d.redelivered() || d.attempt() > 1) {
            redeliveries.increment();
        }
    }

    public Outcome outcome(Outcome o) {
        deliveries.get(o.status()).increment();
        if (o.status() == Outcome.Status.DUPLICATE) {
            duplicates.increment();
        }
        return o;
    }

    public void mismatched() {
        mismatched.increment();
    }

    public void fenceRejected() {
        fenceRejections.increment();
    }

    public Timer handlerDuration() {
        return handlerDuration;
    }
}
