package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.testkit.fault.FaultProxy;
import dev.once.testsupport.TestDatabase;
import java.time.Duration;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * R8: network faults on the database link while 10,000 events (and 10% producer duplicates) flow
 * through four workers: the link frozen for two seconds, every connection reset, 200 ms added to
 * every round trip for two seconds. Figures: lost, applied twice, and the seconds from the end of
 * each fault until the acknowledgement rate is back to {@value #RECOVERED} of what it was before.
 */
@Tag("chaos")
@RunsAlone
class NetworkFaultsUnderLoadTest {

    static final double RECOVERED = 0.75;
    private static final Duration WINDOW = Duration.ofMillis(500);
    private static final Duration FAULT = Duration.ofSeconds(2);

    @Test
    void freezeResetAndLatencyOnTheDatabaseLinkLoseNothingAndApplyNothingTwice() throws Exception {
        int events = Chaos.scaled(10_000);
        Databases database = Databases.POSTGRES;
        ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
        try (TestDatabase db = database.fresh(2);
                FaultProxy proxy = FaultProxy.forJdbcUrl(database.directUrl(db));
                HikariDataSource ds = Databases.pool(proxy.jdbcUrl(database.directUrl(db)), 4, "network-faults")) {
            Effects.create(db);
            IdempotentConsumer once = IdempotentConsumer.builder()
                    .dataSource(ds)
                    .consumer("network-faults")
                    .handler(Effects.HANDLER)
                    .build();
            Broker broker = publish(events, new Random(11));
            Predicate<Delivery> consumer = d -> once.process(d).shouldAcknowledge();
            try (Load load = new Load(broker, 4, consumer)) {
                await("a tenth of the events").atMost(Duration.ofMinutes(2)).until(() -> broker.acks() >= events / 10);
                double baseline = load.rate(Duration.ofSeconds(1));
                double freeze = fault(load, baseline, () -> during(timer, FAULT, proxy::freeze, proxy::thaw));
                double reset = fault(load, baseline, proxy::reset);
                double latency = fault(
                        load,
                        baseline,
                        () -> during(
                                timer,
                                FAULT,
                                () -> proxy.latency(Duration.ofMillis(100)), // each way: 200 ms per round trip
                                () -> proxy.latency(Duration.ZERO)));
                load.awaitDrained("every event acknowledged", Duration.ofMinutes(3));
                load.check();
                Map<String, Long> counts = Effects.counts(db);
                Chaos.Figure f = Chaos.figure("network-faults")
                        .rounds(events)
                        .lost(Effects.lost(broker.published(), counts))
                        .appliedTwice(Effects.appliedTwice(counts))
                        .put("db", "postgres")
                        .put("deliveries", broker.deliveries())
                        .put("redeliveries", broker.redeliveries())
                        .put("baseline_per_s", baseline)
                        .put("freeze_2s_recovery_s", freeze)
                        .put("reset_recovery_s", reset)
                        .put("latency_200ms_2s_recovery_s", latency)
                        .put("resets", proxy.resets())
                        .print();
                assertThat(f.get("lost"))
                        .as("events published and never applied")
                        .isZero();
                assertThat(f.get("applied_twice"))
                        .as("events applied more than once")
                        .isZero();
            }
        } finally {
            timer.shutdownNow();
        }
    }

    /** Starts a fault, ends it {@code length} later, returns then. */
    static void during(ScheduledExecutorService timer, Duration length, Runnable start, Runnable end)
            throws InterruptedException {
        CountDownLatch over = new CountDownLatch(1);
        start.run();
        timer.schedule(
                () -> {
                    end.run();
                    over.countDown();
                },
                length.toMillis(),
                TimeUnit.MILLISECONDS);
        if (!over.await(length.toMillis() * 10, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("the fault did not end after " + length);
        }
    }

    /** Publishes {@code events} events and, at random places, a duplicate of one in ten. */
    static Broker publish(int events, Random random) {
        Broker broker = new Broker();
        for (int i = 0; i < events; i++) {
            Delivery d = Delivery.of("evt-" + i, "event " + i);
            broker.publish(d);
            if (random.nextInt(10) == 0) {
                broker.publish(Delivery.of("evt-" + random.nextInt(i + 1), "duplicate"));
            }
        }
        return broker;
    }

    interface Fault {
        void inject() throws Exception;
    }

    /**
     * Injects a fault (returns when it is over) and measures the seconds from then to the first
     * {@link #WINDOW} whose rate is back to {@link #RECOVERED} of the baseline; -1 if the events ran
     * out first.
     */
    static double fault(Load load, double baseline, Fault fault) throws Exception {
        return fault(load.throughput(), () -> load.broker().drained(), baseline, fault);
    }

    /** As above, for any consumer whose acknowledgements {@code throughput} counts; {@code done} when they ran out. */
    static double fault(Throughput throughput, BooleanSupplier done, double baseline, Fault fault) throws Exception {
        fault.inject();
        long end = System.nanoTime();
        await("throughput back to " + RECOVERED + " of " + Math.round(baseline) + "/s")
                .atMost(Duration.ofMinutes(1))
                .pollInterval(Duration.ofMillis(50))
                .until(() -> done.getAsBoolean() || throughput.recoveredAt(end, baseline * RECOVERED, WINDOW) >= 0);
        long at = throughput.recoveredAt(end, baseline * RECOVERED, WINDOW);
        return at < 0 ? -1 : (at - end) / 1e9;
    }
}
