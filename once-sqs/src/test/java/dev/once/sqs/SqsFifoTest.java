package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Outcome.Status;
import dev.once.outbox.Receipt;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.Message;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeName;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/** FIFO queues: order within a message group, and the publisher's deduplication id. */
class SqsFifoTest {

    private TestDatabase db;
    private String queue;
    private final SqsPublisher publisher = new SqsPublisher(TestSqs.client());

    @BeforeEach
    void setUp() {
        db = TestPostgres.shared().freshDatabase();
        queue = TestSqs.createQueue("fifo-" + System.nanoTime() + ".fifo", 1);
    }

    @AfterEach
    void tearDown() {
        TestSqs.deleteQueue(queue);
        db.close();
    }

    @Test
    void messageGroupsAreAppliedInOrderEvenWhenOneMessageFailsOnce() throws Exception {
        Recorder recorder = new Recorder(db, d -> {});
        List<String> g1 = new ArrayList<>();
        List<String> g2 = new ArrayList<>();
        for (int i = 1; i <= 8; i++) {
            g1.add("g1-" + i);
            g2.add("g2-" + i);
            // g1-3 fails on its first attempt: g1-4 … must wait behind it
            send("g1-" + i, "g1", i == 3 ? "fail-once" : "ok");
            send("g2-" + i, "g2", "ok");
        }
        try (SqsConsumer c = SqsConsumer.builder()
                .client(TestSqs.client())
                .queueUrl(queue)
                .consumer(recorder)
                .maxMessages(10)
                .concurrency(2)
                .waitTime(Duration.ofSeconds(1))
                .visibilityTimeout(Duration.ofSeconds(1))
                .build()
                .start()) {
            await().atMost(Duration.ofSeconds(60)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 16);
        }
        assertThat(recorder.count("g1-3", Status.FAILED_RETRYABLE))
                .as("g1-3 failed once")
                .isEqualTo(1);
        assertThat(appliedOrder("g1-%")).as("group g1 applied in publish order").isEqualTo(g1);
        assertThat(appliedOrder("g2-%")).as("group g2 applied in publish order").isEqualTo(g2);
    }

    @Test
    void aGroupsMessagesOfOneReceiveAreHandedOverAsOneOrderedBatch() throws Exception {
        Recorder recorder = new Recorder(db, d -> {});
        List<String> g = new ArrayList<>();
        for (int i = 1; i <= 10; i++) {
            g.add("g-" + i);
            send("g-" + i, "g", "ok");
        }
        try (SqsConsumer c = SqsConsumer.builder()
                .client(TestSqs.client())
                .queueUrl(queue)
                .consumer(recorder)
                .maxMessages(10)
                .concurrency(1)
                .waitTime(Duration.ofSeconds(1))
                .build()
                .start()) {
            await().atMost(Duration.ofSeconds(30)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 10);
        }
        assertThat(recorder.runs.stream().mapToInt(Integer::intValue).max().orElse(0))
                .as("messages of one group in one run")
                .isGreaterThan(1);
        assertThat(recorder.runs.size()).as("runs for 10 messages").isLessThan(10);
        assertThat(appliedOrder("g-%")).isEqualTo(g);
    }

    @Test
    void fifoDeadLetterSendCarriesTheGroupAndDeduplicationIdAndSuccessorsWaitForIt() throws Exception {
        String dlq = TestSqs.createQueue("fifo-dlq-" + System.nanoTime() + ".fifo", 30);
        try {
            Recorder recorder = new Recorder(db, Poison.BODY);
            send("g-1", "g", "poison");
            send("g-2", "g", "ok");
            send("g-3", "g", "ok");
            try (SqsConsumer c = fifoConsumer(recorder, dlq)) {
                await().atMost(Duration.ofSeconds(30)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 2);
            }
            List<Message> dead = TestSqs.client()
                    .receiveMessage(r -> r.queueUrl(dlq)
                            .maxNumberOfMessages(10)
                            .messageSystemAttributeNames(MessageSystemAttributeName.ALL)
                            .messageAttributeNames("All")
                            .waitTimeSeconds(1))
                    .messages();
            assertThat(dead)
                    .as("the poison message is on the FIFO dead-letter queue")
                    .hasSize(1);
            assertThat(dead.get(0).attributes())
                    .as("in its own message group")
                    .containsEntry(MessageSystemAttributeName.MESSAGE_GROUP_ID, "g")
                    .containsKey(MessageSystemAttributeName.MESSAGE_DEDUPLICATION_ID);
            assertThat(dead.get(0).messageAttributes().get("once-event-id").stringValue())
                    .isEqualTo("g-1");
            assertThat(appliedOrder("g-%")).isEqualTo(List.of("g-2", "g-3"));
            assertThat(recorder.count("g-1", Status.FAILED_PERMANENT))
                    .as("dead-lettered on its first delivery")
                    .isEqualTo(1);
            assertThat(messagesIn(queue))
                    .as("the dead-lettered message and its successors deleted")
                    .isZero();
        } finally {
            TestSqs.deleteQueue(dlq);
        }
    }

    @Test
    void successorsInTheGroupAreNotAppliedWhileTheDeadLetterSendOfTheirPredecessorFails() throws Exception {
        // a dead-letter queue that does not exist: every send fails, so g-1 is never settled
        String dlq = queue.replace(".fifo", "-missing-dlq.fifo");
        Recorder recorder = new Recorder(db, Poison.BODY);
        send("g-1", "g", "poison");
        send("g-2", "g", "ok");
        send("h-1", "h", "ok");
        try (SqsConsumer c = fifoConsumer(recorder, dlq)) {
            // g-1 comes back after its visibility timeout: the group stays behind it meanwhile
            await().atMost(Duration.ofSeconds(30)).until(() -> recorder.count("g-1", Status.FAILED_PERMANENT) >= 2);
            assertThat(appliedOrder("g-%"))
                    .as("g-2 waits behind the message whose dead-letter send failed")
                    .isEmpty();
            assertThat(appliedOrder("h-%")).as("another group is not held up").containsExactly("h-1");
        }
    }

    /**
     * What a CI run of {@code SqsConsumerStateMachineTest.fifoQueueWithRedrive} saw, built on purpose: a
     * message worked on past its visibility timeout is no longer held for its group. SQS hands it out again
     * on the next receive, or, once it has been received {@code maxReceiveCount} times, moves it to the
     * dead-letter queue and hands out its successor, which another receive applies while the first is still
     * being worked on. g-1's handler waits until g-2 is applied, or three visibility timeouts: the heartbeat
     * keeps g-1 in flight, so g-2 waits behind it (without the heartbeat g-2 was applied first and g-1 after
     * it, also dead-lettered by the redrive; the builder now refuses a FIFO queue without the heartbeat).
     */
    @Test
    void theHeartbeatKeepsAGroupBehindAMessageWorkedOnPastItsVisibilityTimeoutAndRedriveCount() throws Exception {
        String dlq = TestSqs.createQueue("fifo-redrive-dlq-" + System.nanoTime() + ".fifo", 30);
        String redriven = redrivenAfterOneReceive("fifo-redrive-", dlq);
        try {
            AtomicReference<Recorder> self = new AtomicReference<>();
            Recorder recorder = new Recorder(db, d -> {
                if (d.eventId().equals("g-1")) {
                    try {
                        await().atMost(Duration.ofSeconds(3))
                                .pollInterval(Duration.ofMillis(50))
                                .until(() -> self.get().count("g-2", Status.APPLIED) > 0);
                    } catch (ConditionTimeoutException held) {
                        // g-2 was not handed out while g-1 was worked on: what FIFO order needs
                    }
                }
            });
            self.set(recorder);
            publisher.publish(TestSqs.message(redriven, "g-1", "g", "slow"));
            publisher.publish(TestSqs.message(redriven, "g-2", "g", "ok"));
            try (SqsConsumer c = SqsConsumer.builder()
                    .client(TestSqs.client())
                    .queueUrl(redriven)
                    .consumer(recorder)
                    .maxMessages(1) // g-1 alone in its receive: the successor's claim is not taken with it
                    .concurrency(2)
                    .waitTime(Duration.ofSeconds(1))
                    .visibilityTimeout(Duration.ofSeconds(1))
                    .build()
                    .start()) {
                await().atMost(Duration.ofSeconds(30)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 2);
            }
            assertThat(appliedOrder("g-%"))
                    .as("g-2 applied after g-1, which was worked on past its visibility timeout")
                    .containsExactly("g-1", "g-2");
            assertThat(messagesIn(dlq)).as("nothing redriven").isZero();
        } finally {
            TestSqs.deleteQueue(redriven);
            TestSqs.deleteQueue(dlq);
        }
    }

    /**
     * What a chain of {@code SqsConsumerStateMachineTest.fifoQueueWithRedrive} found (a process that lost SQS but not
     * its database, the "zombie"), built on purpose: process A has received g-1 when its SQS client is cut off, so its
     * heartbeat fails and g-1's visibility lapses before A's run of it reaches the database; the next receive, by
     * process B, is past g-1's {@code maxReceiveCount}, so SQS moves g-1 to the dead-letter queue and hands out g-2,
     * which B applies. A's run then goes on: g-1 must not be applied after g-2, and its handler must not run (what a
     * handler does outside the transaction no rollback undoes). The group's position in the database (SQS's sequence
     * numbers) refuses it right after its claim, as a fencing token does a stale lease holder's write.
     */
    @Test
    void aProcessCutOffFromSqsDoesNotApplyAMessageAfterItsGroupWentOnWithoutIt() throws Exception {
        String dlq = TestSqs.createQueue("fifo-cut-dlq-" + System.nanoTime() + ".fifo", 30);
        String redriven = redrivenAfterOneReceive("fifo-cut-", dlq);
        SqsClient cut = TestSqs.newClient();
        AtomicReference<SqsConsumer> b = new AtomicReference<>();
        List<String> handled = new CopyOnWriteArrayList<>();
        try {
            Recorder recorder = new Recorder(db, d -> handled.add(d.eventId()));
            recorder.onDelivery(d -> {
                if (d.eventId().equals("g-1") && d.attempt() == 1) {
                    // A, g-1 in hand, not yet at the database: it loses SQS, not its database, and stalls
                    cut.close();
                    b.set(consumer(redriven, recorder, TestSqs.client()));
                    await().atMost(Duration.ofSeconds(20))
                            .pollInterval(Duration.ofMillis(50))
                            .until(() -> recorder.count("g-2", Status.APPLIED) > 0);
                }
            });
            publisher.publish(TestSqs.message(redriven, "g-1", "g", "ok"));
            publisher.publish(TestSqs.message(redriven, "g-2", "g", "ok"));
            try (SqsConsumer a = consumer(redriven, recorder, cut)) {
                await().atMost(Duration.ofSeconds(30))
                        .until(() -> recorder.outcomes.stream()
                                .anyMatch(o -> o.eventId().equals("g-1")));
            } finally {
                if (b.get() != null) {
                    b.get().close();
                }
            }
            assertThat(appliedOrder("g-%"))
                    .as("g-1, held by a process cut off from SQS while SQS moved it to the dead-letter queue, is not"
                            + " applied after g-2")
                    .containsExactly("g-2");
            assertThat(recorder.count("g-1", Status.FAILED_PERMANENT))
                    .as("A's g-1 refused: its group went on without it; outcomes %s", recorder.outcomes)
                    .isEqualTo(1);
            assertThat(handled).as("g-1's handler never ran: refused before it").containsExactly("g-2");
            await().atMost(Duration.ofSeconds(10)).until(() -> messagesIn(dlq) == 1);
        } finally {
            cut.close();
            TestSqs.deleteQueue(redriven);
            TestSqs.deleteQueue(dlq);
        }
    }

    /**
     * As {@link #aProcessCutOffFromSqsDoesNotApplyAMessageAfterItsGroupWentOnWithoutIt}, but A is cut off while g-1's
     * handler runs: A's transaction took the group's row lock before the handler, so B's run of g-2 waits for A's
     * commit before its own handler and follows it. The group goes on in SQS without g-1 (its dead-letter queue), but
     * never in the database: g-1 then g-2.
     */
    @Test
    void aProcessCutOffFromSqsInItsHandlerHoldsItsGroupBackUntilItCommits() throws Exception {
        String dlq = TestSqs.createQueue("fifo-held-dlq-" + System.nanoTime() + ".fifo", 30);
        String redriven = redrivenAfterOneReceive("fifo-held-", dlq);
        SqsClient cut = TestSqs.newClient();
        AtomicReference<Recorder> self = new AtomicReference<>();
        AtomicReference<SqsConsumer> b = new AtomicReference<>();
        try {
            Recorder recorder = new Recorder(db, d -> {
                if (d.eventId().equals("g-1") && d.attempt() == 1) {
                    cut.close(); // A loses SQS, not its database, in g-1's handler
                    b.set(consumer(redriven, self.get(), TestSqs.client()));
                    await().atMost(Duration.ofSeconds(20))
                            .pollInterval(Duration.ofMillis(50))
                            .until(() -> self.get().deliveries.stream()
                                            .anyMatch(x -> x.eventId().equals("g-2"))
                                    && db.queryLong("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                                                    + " current_database() AND wait_event_type = 'Lock'")
                                            > 0);
                }
            });
            self.set(recorder);
            publisher.publish(TestSqs.message(redriven, "g-1", "g", "ok"));
            publisher.publish(TestSqs.message(redriven, "g-2", "g", "ok"));
            try (SqsConsumer a = consumer(redriven, recorder, cut)) {
                await().atMost(Duration.ofSeconds(30)).until(() -> recorder.count("g-2", Status.APPLIED) > 0);
            } finally {
                if (b.get() != null) {
                    b.get().close();
                }
            }
            assertThat(appliedOrder("g-%"))
                    .as("B's g-2 waited for A's g-1, whose handler held the group's row lock: applied after it")
                    .containsExactly("g-1", "g-2");
            assertThat(recorder.count("g-1", Status.APPLIED))
                    .as("outcomes %s", recorder.outcomes)
                    .isEqualTo(1);
        } finally {
            cut.close();
            TestSqs.deleteQueue(redriven);
            TestSqs.deleteQueue(dlq);
        }
    }

    private static SqsConsumer consumer(String queueUrl, Recorder recorder, SqsClient client) {
        return SqsConsumer.builder()
                .client(client)
                .queueUrl(queueUrl)
                .consumer(recorder)
                .maxMessages(1)
                .concurrency(1)
                .waitTime(Duration.ofSeconds(1))
                .visibilityTimeout(Duration.ofSeconds(1))
                .build()
                .start();
    }

    /** A FIFO queue, visibility 1 s, whose redrive policy moves a message to {@code dlq} after one receive. */
    private static String redrivenAfterOneReceive(String name, String dlq) {
        return TestSqs.createQueue(
                name + System.nanoTime() + ".fifo",
                1,
                "{\"deadLetterTargetArn\":\"" + arn(dlq) + "\",\"maxReceiveCount\":\"1\"}");
    }

    private static String arn(String queueUrl) {
        return TestSqs.client()
                .getQueueAttributes(r -> r.queueUrl(queueUrl).attributeNames(QueueAttributeName.QUEUE_ARN))
                .attributes()
                .get(QueueAttributeName.QUEUE_ARN);
    }

    /** A handler step that fails permanently on the body "poison". */
    private enum Poison implements Recorder.Slow {
        BODY;

        @Override
        public void before(dev.once.Delivery d) {
            if (d.payloadText().equals("poison")) {
                throw new dev.once.PermanentFailureException("event " + d.eventId() + " can never succeed");
            }
        }
    }

    private SqsConsumer fifoConsumer(Recorder recorder, String dlq) {
        return SqsConsumer.builder()
                .client(TestSqs.client())
                .queueUrl(queue)
                .consumer(recorder)
                .maxMessages(10)
                .concurrency(1)
                .waitTime(Duration.ofSeconds(1))
                .visibilityTimeout(Duration.ofSeconds(1))
                .deadLetterQueueUrl(dlq)
                .build()
                .start();
    }

    private long messagesIn(String url) {
        Map<QueueAttributeName, String> a = TestSqs.client()
                .getQueueAttributes(r -> r.queueUrl(url)
                        .attributeNames(
                                QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES,
                                QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE))
                .attributes();
        return Long.parseLong(a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES))
                + Long.parseLong(a.get(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES_NOT_VISIBLE));
    }

    @Test
    void publisherSetsTheDeduplicationIdFromTheEventId() {
        Receipt first = send("evt-1", null, "1");
        Receipt again = send("evt-1", null, "1"); // the relay re-sends after a crash: same event id, same dedup id
        send("evt-2", null, "2");
        assertThat(first.status()).isEqualTo(200);
        assertThat(first.body())
                .as("SQS's answer: message id and FIFO sequence number")
                .matches("messageId=\\S+ sequenceNumber=\\d+");
        assertThat(again.body())
                .as("SQS answers a deduplicated send like the first")
                .isEqualTo(first.body());
        Map<QueueAttributeName, String> attributes = TestSqs.client()
                .getQueueAttributes(
                        r -> r.queueUrl(queue).attributeNames(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES))
                .attributes();
        assertThat(attributes)
                .as("the second send of evt-1 was deduplicated by SQS")
                .containsEntry(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES, "2");
        assertThat(SqsPublisher.sqsId("evt-1")).isEqualTo("evt-1");
        assertThat(SqsPublisher.sqsId("évènement " + "x".repeat(200)))
                .as("ids SQS refuses are hashed")
                .hasSize(64);
    }

    private Receipt send(String eventId, String group, String body) {
        return publisher.publish(TestSqs.message(queue, eventId, group, body));
    }

    private List<String> appliedOrder(String like) throws Exception {
        List<String> ids = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs =
                        s.executeQuery("SELECT event_id FROM effect WHERE event_id LIKE '" + like + "' ORDER BY seq")) {
            while (rs.next()) {
                ids.add(rs.getString(1));
            }
        }
        return ids;
    }
}
