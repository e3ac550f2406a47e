package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Outcome.Status;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

/**
 * A subscription with exactly-once delivery, on the emulator: it tells the client so (the streaming
 * pull's subscription properties) and refuses an ack whose ack id expired ({@code INVALID_ARGUMENT}),
 * so the client completes that ack's future as failed. Work that outlives its lease commits and acks
 * too late: the ack fails, is counted, and the copy Pub/Sub handed to the other subscriber is absorbed.
 */
class PubSubExactlyOnceTest extends FreshSubscription {

    PubSubExactlyOnceTest() {
        super("exactly-once", s -> s.setEnableExactlyOnceDelivery(true));
    }

    @Test
    @Disabled(
            "timing-dependent on the emulator: passed in a full CI run, then counted 3 refused acks in another and timed out"
                    + " in a third on a loaded machine; PubSubDeliverySequenceTest covers the refused ack deterministically")
    void anAckAfterTheLeaseLapsedFailsIsCountedAndTheCopyIsAbsorbed() throws Exception {
        AtomicInteger handled = new AtomicInteger();
        CountDownLatch redelivered = new CountDownLatch(1);
        Recorder recorder = new Recorder(db, d -> {
            if (handled.incrementAndGet() == 1) {
                // slow: still working when the lease is over and Pub/Sub hands the message out again
                assertThat(redelivered.await(2, TimeUnit.MINUTES))
                        .as("evt-1 redelivered while its first delivery works")
                        .isTrue();
            }
        });
        AtomicInteger received = new AtomicInteger();
        recorder.onDelivery(d -> {
            if (received.incrementAndGet() == 2) {
                redelivered.countDown();
            }
        });
        try (PubSubConsumer a = consumer(recorder).start();
                PubSubConsumer b = consumer(recorder).start()) {
            try (PubSubPublisher p = TestPubSub.outboxPublisher()) {
                p.publish(OutboxRows.row(topic.getTopic(), "evt-1", null, "1"));
            }
            await().atMost(Duration.ofMinutes(2))
                    .until(() ->
                            recorder.count("evt-1", Status.DUPLICATE) >= 1 && a.failedAcks() + b.failedAcks() >= 1);
            // at least the first delivery's late ack; on a loaded machine a redelivered copy's ack can lapse too
            // (a full CI run counted 3), and each such copy is absorbed all the same (asserted below)
            assertThat(a.failedAcks() + b.failedAcks())
                    .as("the late ack refused by the exactly-once subscription, counted")
                    .isGreaterThanOrEqualTo(1);
        }
        assertThat(recorder.count("evt-1", Status.APPLIED)).as("applied once").isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM effect"))
                .as("effect applied exactly once")
                .isEqualTo(1);
    }

    private PubSubConsumer consumer(Recorder recorder) {
        return TestPubSub.consumer(subscription, recorder, null)
                .batchSize(1)
                .ackDeadline(Duration.ofSeconds(10))
                .lease(Duration.ofSeconds(1))
                .build();
    }
}
