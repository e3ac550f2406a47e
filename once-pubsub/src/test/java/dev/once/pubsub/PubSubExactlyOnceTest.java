package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Outcome.Status;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A subscription with exactly-once delivery, on the emulator: it tells the client so (the streaming
 * pull's subscription properties) and refuses an ack whose ack id expired ({@code INVALID_ARGUMENT}),
 * so the client completes that ack's future as failed. Work that outlives its lease commits and acks
 * too late: the ack fails, is counted, and the copy Pub/Sub handed out again is absorbed.
 *
 * <p>The emulator serves every stream of a subscription from one backlog and ignores the client's flow
 * control, so the copy may come to the subscriber whose only thread is still in the first delivery: it
 * would wait there, lapse, and go round again until it reached the other one (the run that timed out).
 * Each subscriber has a second thread, so the copy runs wherever it lands.
 */
class PubSubExactlyOnceTest extends FreshSubscription {

    PubSubExactlyOnceTest() {
        super("exactly-once", s -> s.setEnableExactlyOnceDelivery(true));
    }

    @Test
    void anAckAfterTheLeaseLapsedFailsIsCountedAndTheCopyIsAbsorbed() throws Exception {
        AtomicInteger handled = new AtomicInteger();
        CountDownLatch redelivered = new CountDownLatch(1);
        Recorder recorder = new Recorder(db, d -> {
            if (handled.incrementAndGet() == 1) {
                // slow: still working when the lease is over and Pub/Sub hands the message out again
                assertThat(redelivered.await(3, TimeUnit.MINUTES))
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
            await().atMost(Duration.ofMinutes(3))
                    .until(() ->
                            recorder.count("evt-1", Status.DUPLICATE) >= 1 && a.failedAcks() + b.failedAcks() >= 1);
            // The first delivery's ack is refused for certain: it is sent after the copy was handed out, so
            // after its ack id expired. A copy's ack is refused too when a stalled machine sends it after the
            // copy's own deadline (a full CI run counted 3); each such copy is absorbed all the same.
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
                .threads(2)
                .ackDeadline(Duration.ofSeconds(10))
                .lease(Duration.ofSeconds(1))
                .build();
    }
}
