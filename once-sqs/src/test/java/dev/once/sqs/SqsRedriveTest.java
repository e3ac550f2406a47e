package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/**
 * SQS's own retry spacing and limit: a retryable failure is left in the queue, so the visibility
 * timeout spaces the tries and the redrive policy's {@code maxReceiveCount} ends them by moving the
 * message to the dead-letter queue.
 */
class SqsRedriveTest {

    private static final Duration VISIBILITY = Duration.ofSeconds(1);

    private TestDatabase db;
    private String dlq;
    private String queue;
    private final AtomicLong downUntil = new AtomicLong();
    /** When the handler first saw each receive of the poison message (by ApproximateReceiveCount). */
    private final Map<Integer, Long> poisonReceivedAt = new ConcurrentSkipListMap<>();

    @BeforeEach
    void setUp() {
        db = TestPostgres.shared().freshDatabase();
        dlq = TestSqs.createQueue("redrive-dlq-" + System.nanoTime(), 30);
    }

    @AfterEach
    void tearDown() {
        if (queue != null) {
            TestSqs.deleteQueue(queue);
        }
        TestSqs.deleteQueue(dlq);
        db.close();
    }

    @Test
    void aThreeSecondOutageWithMaxReceiveCountFiveIsRetriedAtTheVisibilityTimeoutAndNothingIsDeadLettered() {
        queue = queueWithRedrive(5);
        for (int i = 1; i <= 5; i++) {
            publish("evt-" + i, "ok");
        }
        downUntil.set(System.nanoTime() + Duration.ofSeconds(3).toNanos());
        Recorder recorder = recorder();
        try (SqsConsumer c = consumer(recorder).start()) {
            await().atMost(Duration.ofSeconds(60)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 5);
            assertThat(c.isRunning()).isTrue();
        }
        long failed = recorder.outcomes.stream()
                .filter(o -> o.status() == Status.FAILED_RETRYABLE)
                .count();
        System.out.printf(
                "CHAOS sqs-redrive-outage: outage 3 s, visibility 1 s, maxReceiveCount 5, 5 messages: %d applied,"
                        + " %d dead-lettered, %d receives%n",
                db.queryLong("SELECT count(DISTINCT event_id) FROM effect"),
                messages(dlq),
                recorder.deliveries.stream()
                        .map(d -> d.eventId() + "#" + d.attempt())
                        .distinct()
                        .count());
        assertThat(db.queryLong("SELECT count(*) FROM effect"))
                .as("each applied once")
                .isEqualTo(5);
        assertThat(messages(dlq)).as("nothing was wrong with them").isZero();
        assertThat(failed).as("tries during the outage").isPositive();
    }

    @Test
    void aMessageThatKeepsFailingIsMovedToTheDeadLetterQueueAfterMaxReceiveCountSpacedTries() {
        queue = queueWithRedrive(3);
        publish("poison-1", "poison");
        publish("evt-1", "ok");
        Recorder recorder = recorder();
        try (SqsConsumer c = consumer(recorder).start()) {
            await().atMost(Duration.ofSeconds(60)).until(() -> messages(dlq) == 1);
            await().atMost(Duration.ofSeconds(30)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 1);
            assertThat(c.isRunning()).isTrue();
        }
        List<Long> at = new ArrayList<>(poisonReceivedAt.values());
        List<Long> gaps = new ArrayList<>();
        for (int i = 1; i < at.size(); i++) {
            gaps.add(Duration.ofNanos(at.get(i) - at.get(i - 1)).toMillis());
        }
        System.out.printf(
                "CHAOS sqs-redrive-poison: visibility 1 s, maxReceiveCount 3, a message failing retryably: receives %s,"
                        + " gaps %s ms, %d dead letters%n",
                poisonReceivedAt.keySet(), gaps, messages(dlq));
        assertThat(poisonReceivedAt.keySet()).as("maxReceiveCount receives").containsExactly(1, 2, 3);
        // Seen from the handler, not from SQS: on a loaded machine a receive can wait to be handled
        // (one run: 79 ms between the handling of receives 1 and 2), so only the span is bounded.
        assertThat(Duration.ofNanos(at.get(2) - at.get(0)))
                .as("spaced by the visibility timeout")
                .isGreaterThanOrEqualTo(VISIBILITY.minusMillis(100));
        assertThat(messages(dlq)).isEqualTo(1);
        assertThat(messages(queue)).as("moved, not copied").isZero();
    }

    /**
     * A delivery whose claim another delivery holds ({@code IN_PROGRESS}) must not spend the redrive policy's
     * receives: process A received the event first and works on it in a slow transaction (its visibility lapses:
     * no heartbeat), SQS hands the message to consumer B, which finds the claim held. Each receive counts toward
     * {@code maxReceiveCount}; at the limit SQS moves the message to the dead-letter queue, and when A then fails
     * and rolls back, nobody applies the event. B keeps it instead (its visibility extended) and tries again until
     * A has ended.
     */
    @Test
    void aDeliveryWhoseClaimAnotherHoldsIsKeptUntilTheHolderEndsNotSpentOnTheRedrivePolicy() throws Exception {
        queue = queueWithRedrive(2);
        Recorder recorder = new Recorder(db, Duration.ofMillis(100), d -> {});
        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        IdempotentConsumer holderEngine = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer(Recorder.CONSUMER)
                .handler((d, tx) -> {
                    holding.countDown();
                    release.await();
                    throw new RetryableException("the holder fails after all: its transaction rolls back");
                })
                .build();
        SqsConsumer holder = SqsConsumer.builder()
                .client(TestSqs.client())
                .queueUrl(queue)
                .consumer(holderEngine)
                .concurrency(1) // its one receive thread is in the slow handler: A takes nothing more
                .waitTime(Duration.ofSeconds(1))
                .visibilityTimeout(VISIBILITY)
                .heartbeat(false) // A's visibility lapses while it works: SQS hands the message to B
                .build()
                .start();
        try {
            publish("evt-1", "ok");
            assertThat(holding.await(30, TimeUnit.SECONDS))
                    .as("A holds the claim")
                    .isTrue();
            try (SqsConsumer b = SqsConsumer.builder()
                    .client(TestSqs.client())
                    .queueUrl(queue)
                    .consumer(recorder)
                    .waitTime(Duration.ofSeconds(1))
                    .visibilityTimeout(VISIBILITY)
                    .receiveRetries(RetryPolicy.builder()
                            .initialDelay(Duration.ofMillis(20))
                            .maxDelay(Duration.ofMillis(40))
                            .jitter(RetryPolicy.Jitter.NONE)
                            .maxRetries(2)
                            .build())
                    .build()
                    .start()) {
                try {
                    // more tries in progress than the redrive policy allows receives (on the old code SQS moves
                    // the message before: then the wait times out, and the event is not applied below)
                    await().atMost(Duration.ofSeconds(10))
                            .until(() -> recorder.count("evt-1", Status.IN_PROGRESS) >= 5);
                } catch (ConditionTimeoutException e) {
                    // asserted below
                }
                release.countDown(); // A rolls back
                try {
                    await().atMost(Duration.ofSeconds(20))
                            .until(() -> db.queryLong("SELECT count(*) FROM effect") == 1 && messages(queue) == 0);
                } catch (ConditionTimeoutException e) {
                    // asserted below
                }
                System.out.printf(
                        "CHAOS sqs-held-claim: visibility 1 s, maxReceiveCount 2, A holds the claim and rolls back:"
                                + " %d applied, %d dead-lettered, B's receive counts %s, %d tries in progress%n",
                        db.queryLong("SELECT count(*) FROM effect"),
                        messages(dlq),
                        recorder.deliveries.stream()
                                .map(Delivery::attempt)
                                .distinct()
                                .toList(),
                        recorder.count("evt-1", Status.IN_PROGRESS));
                assertThat(db.queryLong("SELECT count(*) FROM effect"))
                        .as(
                                "applied by B once A rolled back; B's receive counts %s, outcomes %s, dead letters %d",
                                recorder.deliveries.stream()
                                        .map(Delivery::attempt)
                                        .toList(),
                                recorder.outcomes.stream().map(Outcome::status).toList(),
                                messages(dlq))
                        .isEqualTo(1);
                assertThat(recorder.deliveries)
                        .extracting(Delivery::attempt)
                        .as("one receive by B, kept in hand, not received again")
                        .containsOnly(2);
                assertThat(b.isRunning()).isTrue();
            }
            assertThat(messages(queue)).as("deleted").isZero();
            assertThat(messages(dlq)).as("nothing in the dead-letter queue").isZero();
        } finally {
            release.countDown();
            holder.close();
        }
    }

    private Recorder recorder() {
        return new Recorder(db, (Delivery d) -> {
            if (d.payloadText().equals("poison")) {
                poisonReceivedAt.putIfAbsent(d.attempt(), System.nanoTime());
                throw new RetryableException("downstream keeps failing for " + d.eventId());
            }
            if (System.nanoTime() < downUntil.get()) {
                throw new RetryableException("downstream unavailable for " + d.eventId());
            }
        });
    }

    private SqsConsumer consumer(Recorder recorder) {
        return SqsConsumer.builder()
                .client(TestSqs.client())
                .queueUrl(queue)
                .consumer(recorder)
                .waitTime(Duration.ofSeconds(1))
                .visibilityTimeout(VISIBILITY)
                .build();
    }

    private String queueWithRedrive(int maxReceiveCount) {
        String arn = TestSqs.client()
                .getQueueAttributes(r -> r.queueUrl(dlq).attributeNames(QueueAttributeName.QUEUE_ARN))
                .attributes()
                .get(QueueAttributeName.QUEUE_ARN);
        String name = "redrive-" + System.nanoTime();
        return TestSqs.client()
                .createQueue(r -> r.queueName(name)
                        .attributes(Map.of(
                                QueueAttributeName.VISIBILITY_TIMEOUT,
                                Long.toString(VISIBILITY.toSeconds()),
                                QueueAttributeName.REDRIVE_POLICY,
                                "{\"deadLetterTargetArn\":\"" + arn + "\",\"maxReceiveCount\":\"" + maxReceiveCount
                                        + "\"}")))
                .queueUrl();
    }

    private long messages(String url) {
        Map<QueueAttributeName, String> a = TestSqs.client()
                .getQueueAttributes(r -> r.queueUrl(url)
                        .attributeNames(
                                QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES,
                                QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE))
                .attributes();
        return Long.parseLong(a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES))
                + Long.parseLong(a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE));
    }

    private void publish(String eventId, String body) {
        new SqsPublisher(TestSqs.client()).publish(TestSqs.message(queue, eventId, null, body));
    }
}
