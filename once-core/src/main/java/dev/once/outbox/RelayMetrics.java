package dev.once.outbox;

import dev.once.internal.OutboxRepository;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A relay's meters, tagged with its name: rows sent, retried and moved to dead as its batches mark
 * them, batches fenced, and the pending and lag gauges, which show the statistics last read. Thread-safe.
 */
final class RelayMetrics {

    private final Counter sent;
    private final Counter retried;
    private final Counter dead;
    private final Counter fenceRejections;
    private final AtomicReference<OutboxStats> lastStats = new AtomicReference<>(new OutboxStats(0, Duration.ZERO, 0));

    RelayMetrics(String relay, MeterRegistry r) {
        this.sent = Counter.builder("once.outbox.sent")
                .description("outbox rows sent")
                .tag("relay", relay)
                .register(r);
        this.retried = Counter.builder("once.outbox.retried")
                .description("failed sends scheduled for a retry")
                .tag("relay", relay)
                .register(r);
        this.dead = Counter.builder("once.outbox.dead")
                .description("rows moved to dead")
                .tag("relay", relay)
                .register(r);
        this.fenceRejections = Counter.builder("once.fence.rejections")
                .description("batches rolled back because the relay's lease was taken over")
                .tag("relay", relay)
                .register(r);
        Gauge.builder("once.outbox.pending", lastStats, s -> s.get().pending())
                .description("pending outbox rows")
                .tag("relay", relay)
                .register(r);
        Gauge.builder(
                        "once.outbox.lag",
                        lastStats,
                        s -> s.get().oldestPendingAge().toMillis() / 1000.0)
                .description("seconds the oldest pending outbox row has waited")
                .baseUnit("seconds")
                .tag("relay", relay)
                .register(r);
    }

    /** Counts committed marks: each row sent, scheduled for a retry or moved to dead. */
    void count(List<OutboxRepository.Mark> marks) {
        for (OutboxRepository.Mark m : marks) {
            if (m instanceof OutboxRepository.Sent) {
                sent.increment();
            } else if (m instanceof OutboxRepository.Retry) {
                retried.increment();
            } else {
                dead.increment();
            }
        }
    }

    /** A batch rolled back because the relay's lease was taken over. */
    void fenced() {
        fenceRejections.increment();
    }

    /** The statistics the gauges show from now on. */
    void stats(OutboxStats s) {
        lastStats.set(s);
    }
}
