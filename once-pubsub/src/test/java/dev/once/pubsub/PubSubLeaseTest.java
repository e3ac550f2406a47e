package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Outcome.Status;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * A handler slower than the ack deadline (10 s, Pub/Sub's least), on two subscribers of one
 * subscription: with a lease shorter than the work the client stops extending and Pub/Sub hands
 * the message to a subscriber again, whose claim absorbs it; with a lease longer than the work
 * the client's extensions keep it, and it is delivered once.
 *
 * <p>The two tests run at once (each on a subscription and a database of its own, one message each): both
 * mostly wait, one for the deadline to lapse, the other for its work of 1.5 deadlines; nothing else of this
 * module runs beside them (their class runs in turn with the others).
 *
 * <p>Each subscriber has a second thread: the emulator serves every stream of a subscription from one
 * backlog and ignores the client's flow control, so the copy may come to the subscriber still working on
 * the first delivery, and with one thread it would wait there, lapse and go round again.
 */
class PubSubLeaseTest extends FreshSubscription {
    private static final Duration DEADLINE = Duration.ofSeconds(10);

    private PubSubConsumer consumer(Recorder recorder, Duration lease) {
        return TestPubSub.consumer(subscription, recorder, null)
                .batchSize(1)
                .threads(2)
                .ackDeadline(DEADLINE)
                .lease(lease)
                .build();
    }

    PubSubLeaseTest() {
        super("lease", s -> s);
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void workOutlivingTheLeaseIsRedeliveredToAnotherSubscriberAndAbsorbed() throws Exception {
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
        try (PubSubConsumer a = consumer(recorder, Duration.ofSeconds(1)).start();
                PubSubConsumer b = consumer(recorder, Duration.ofSeconds(1)).start()) {
            publish("evt-1");
            await().atMost(Duration.ofMinutes(3)).until(() -> recorder.count("evt-1", Status.DUPLICATE) >= 1);
        }
        assertThat(recorder.count("evt-1", Status.APPLIED)).as("applied once").isEqualTo(1);
        assertThat(recorder.deliveries("evt-1"))
                .as("delivered twice: the lease lapsed")
                .isGreaterThanOrEqualTo(2);
        assertThat(db.queryLong("SELECT count(*) FROM effect"))
                .as("effect applied exactly once")
                .isEqualTo(1);
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void leaseLongerThanTheWorkKeepsTheMessageSoNothingIsRedelivered() throws Exception {
        CountDownLatch never = new CountDownLatch(1);
        Recorder recorder = new Recorder(db, d -> {
            // slow: works for 1.5 ack deadlines; without an extension the message would be handed out again
            assertThat(never.await(DEADLINE.toMillis() * 3 / 2, TimeUnit.MILLISECONDS))
                    .isFalse();
        });
        try (PubSubConsumer a = consumer(recorder, Duration.ofMinutes(2)).start();
                PubSubConsumer b = consumer(recorder, Duration.ofMinutes(2)).start()) {
            publish("evt-1");
            await().atMost(Duration.ofMinutes(3)).until(() -> recorder.count("evt-1", Status.APPLIED) == 1);
        }
        assertThat(recorder.deliveries)
                .as("one delivery: the client's extensions kept the message past its deadline")
                .hasSize(1);
        assertThat(db.queryLong("SELECT count(*) FROM effect")).isEqualTo(1);
    }

    private void publish(String eventId) throws Exception {
        try (PubSubPublisher p = TestPubSub.outboxPublisher()) {
            p.publish(OutboxRows.row(topic.getTopic(), eventId, null, "1"));
        }
    }
}
