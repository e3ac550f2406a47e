package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The fault tests' load: what a worker that dies does to the wait for the broker to drain. */
class LoadTest {

    /**
     * A worker that dies (an Error out of the consumer) takes its delivery with it: the broker can
     * never drain. The wait must fail at once with the worker's exception, not time out without it
     * (as PatroniFailoverTest's drain once did after two minutes, its cause unseen).
     */
    @Test
    void aDeadWorkerFailsTheDrainAtOnceWithItsException() throws Exception {
        Broker broker = new Broker();
        broker.publish(Delivery.of("evt-1", "event 1"));
        broker.publish(Delivery.of("evt-2", "event 2"));
        long started = System.nanoTime();
        try (Load load = new Load(broker, 1, d -> {
            if (d.eventId().equals("evt-2")) {
                throw new StackOverflowError("worker died on evt-2");
            }
            return true;
        })) {
            assertThatThrownBy(() -> load.awaitDrained("every event acknowledged", Duration.ofMinutes(1)))
                    .hasMessageContaining("a load worker died")
                    .hasRootCauseMessage("worker died on evt-2");
        }
        assertThat(Duration.ofNanos(System.nanoTime() - started))
                .as("failed at once, not after the wait's minute")
                .isLessThan(Duration.ofSeconds(30));
    }
}
