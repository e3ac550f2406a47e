package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.Message;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;
import software.amazon.awssdk.services.sqs.model.ReceiveMessageResponse;

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

    /**
     * The handler deletes its own message from the queue (as another consumer settling a copy would), so the
     * heartbeat's next extension names a receipt handle SQS no longer knows: SQS refuses that entry in a
     * successful batch call, and the consumer says so with the message's id and SQS's error code.
     */
    @Test
    void heartbeatEntrySqsRefusesIsLoggedWithTheMessageIdAndErrorCode() throws Exception {
        List<Message> received = new CopyOnWriteArrayList<>();
        SqsClient recording = (SqsClient) Proxy.newProxyInstance(
                SqsClient.class.getClassLoader(), new Class<?>[] {SqsClient.class}, (p, method, args) -> {
                    Object result;
                    try {
                        result = method.invoke(TestSqs.client(), args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (result instanceof ReceiveMessageResponse r) {
                        received.addAll(r.messages());
                    }
                    return result;
                });
        List<String> stderr = new CopyOnWriteArrayList<>();
        Recorder recorder = new Recorder(db, d -> {
            Message m = received.get(0);
            TestSqs.client().deleteMessage(r -> r.queueUrl(queue).receiptHandle(m.receiptHandle()));
            await().atMost(Duration.ofSeconds(30))
                    .until(() -> stderr.stream().anyMatch(l -> l.contains(m.messageId())));
        });
        publish("evt-1");
        capturingStderr(stderr, () -> {
            try (SqsConsumer c = SqsConsumer.builder()
                    .client(recording)
                    .queueUrl(queue)
                    .consumer(recorder)
                    .maxMessages(1)
                    .concurrency(1)
                    .waitTime(Duration.ofSeconds(1))
                    .visibilityTimeout(HEARTBEAT_VISIBILITY)
                    .heartbeat(true)
                    .build()
                    .start()) {
                await().atMost(Duration.ofSeconds(60)).until(() -> recorder.count("evt-1", Status.APPLIED) == 1);
            }
        });
        String id = received.get(0).messageId();
        assertThat(stderr)
                .as("a warning naming the message and the code SQS refused its extension with")
                .anyMatch(l -> l.contains("WARN")
                        && l.contains("could not change the visibility of message " + id)
                        && l.contains("ReceiptHandleIsInvalid"));
    }

    /** Runs {@code work} with stderr (slf4j-simple's output) copied line by line into {@code lines}. */
    private static void capturingStderr(List<String> lines, Runnable work) {
        PrintStream original = System.err;
        StringBuilder line = new StringBuilder();
        System.setErr(new PrintStream(
                new OutputStream() {
                    @Override
                    public synchronized void write(int b) {
                        original.write(b);
                        if (b == '\n') {
                            lines.add(line.toString());
                            line.setLength(0);
                        } else {
                            line.append((char) b);
                        }
                    }
                },
                true,
                StandardCharsets.ISO_8859_1));
        try {
            work.run();
        } finally {
            System.setErr(original);
        }
    }

    private void publish(String eventId) {
        new SqsPublisher(TestSqs.client()).publish(TestSqs.message(queue, eventId, null, "1"));
    }
}
