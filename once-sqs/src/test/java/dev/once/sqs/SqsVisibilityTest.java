package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/** A handler slower than the visibility timeout, with and without the heartbeat. */
class SqsVisibilityTest {

    private static final Duration VISIBILITY = Duration.ofSeconds(1);
    /**
     * With the heartbeat: renewed every third of it (1 s), so a 1 s stall of a loaded machine
     * still leaves a renewal a second before expiry; the handler works for 2.5 of them, so
     * without the heartbeat the message would be handed out again.
     */
    private static final Duration HEARTBEAT_VISIBILITY = Duration.ofSeconds(3);

    private TestDatabase db;
    private String queue;

    @BeforeEach
    void setUp() {
        db = TestPostgres.shared().freshDatabase();
        queue = TestSqs.createQueue("visibility-" + System.nanoTime(), (int) VISIBILITY.toSeconds());
    }

    @AfterEach
    void tearDown() {
        TestSqs.deleteQueue(queue);
        db.close();
    }

    private SqsConsumer consumer(Recorder recorder, boolean heartbeat) {
        return SqsConsumer.builder()
                .client(TestSqs.client())
                .queueUrl(queue)
                .consumer(recorder)
                .maxMessages(1)
                .concurrency(2)
                .waitTime(Duration.ofSeconds(1))
                .visibilityTimeout(heartbeat ? HEARTBEAT_VISIBILITY : VISIBILITY)
                .heartbeat(heartbeat)
                .build();
    }

    @Test
    void visibilityExpiringDuringSlowHandlerWithoutHeartbeatRedeliversAndIsAbsorbed() throws Exception {
        CountDownLatch redelivered = new CountDownLatch(1);
        Recorder recorder = new Recorder(db, d -> {
            if (d.attempt() == 1) {
                // slow: still working when the visibility timeout expires and SQS hands the message out again
                assertThat(redelivered.await(60, TimeUnit.SECONDS))
                        .as("redelivery while the first attempt works")
                        .isTrue();
            }
        });
        recorder.onDelivery(d -> {
            if (d.attempt() > 1) {
                redelivered.countDown();
            }
        });
        publish("evt-1");
        try (SqsConsumer c = consumer(recorder, false).start()) {
            await().atMost(Duration.ofSeconds(60)).until(() -> recorder.count("evt-1", Status.DUPLICATE) >= 1);
        }
        assertThat(recorder.count("evt-1", Status.APPLIED)).as("applied once").isEqualTo(1);
        assertThat(recorder.deliveries)
                .as("the redelivery carries ApproximateReceiveCount as the attempt")
                .anyMatch(d -> d.attempt() >= 2 && d.redelivered());
        assertThat(db.queryLong("SELECT count(*) FROM effect"))
                .as("effect applied exactly once")
                .isEqualTo(1);
    }

    @Test
    void heartbeatKeepsSlowHandlerInvisibleSoNothingIsRedelivered() throws Exception {
        CountDownLatch never = new CountDownLatch(1);
        Recorder recorder = new Recorder(db, d -> {
            // slow: works for 2.5 visibility timeouts, far past the one asked for on receive
            assertThat(never.await(HEARTBEAT_VISIBILITY.toMillis() * 5 / 2, TimeUnit.MILLISECONDS))
                    .isFalse();
        });
        publish("evt-1");
        try (SqsConsumer c = consumer(recorder, true).start()) {
            await().atMost(Duration.ofSeconds(60)).until(() -> recorder.count("evt-1", Status.APPLIED) == 1);
        }
        assertThat(recorder.deliveries)
                .as("one delivery: the heartbeat kept the message invisible")
                .hasSize(1);
        Map<QueueAttributeName, String> left = TestSqs.client()
                .getQueueAttributes(r -> r.queueUrl(queue)
                        .attributeNames(
                                QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES,
                                QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE))
                .attributes();
        assertThat(left)
                .as("deleted after commit")
                .containsEntry(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES, "0")
                .containsEntry(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE, "0");
        assertThat(db.queryLong("SELECT count(*) FROM effect")).isEqualTo(1);
    }

    private void publish(String eventId) {
        new SqsPublisher(TestSqs.client()).publish(TestSqs.message(queue, eventId, null, "1"));
    }
}
