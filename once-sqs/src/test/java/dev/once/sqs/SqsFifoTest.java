package dev.once.sqs;

import dev.once.Outcome.Status;
import dev.once.outbox.Receipt;
import dev.once.testkit.TestDatabase;
import dev.once.testkit.TestPostgres;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

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
        Recorder recorder = new Recorder(db, d -> { });
        List<String> g1 = new ArrayList<>();
        List<String> g2 = new ArrayList<>();
        for (int i = 1; i <= 8; i++) {
            g1.add("g1-" + i);
            g2.add("g2-" + i);
            // g1-3 fails on its first attempt: g1-4 … must wait behind it
            send("g1-" + i, "g1", i == 3 ? "fail-once" : "ok");
            send("g2-" + i, "g2", "ok");
        }
        try (SqsConsumer c = SqsConsumer.builder().client(TestSqs.client()).queueUrl(queue).consumer(recorder)
                .maxMessages(10).concurrency(2).waitTime(Duration.ofSeconds(1))
                .visibilityTimeout(Duration.ofSeconds(1)).build().start()) {
            await().atMost(Duration.ofSeconds(60)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 16);
        }
        assertThat(recorder.count("g1-3", Status.FAILED_RETRYABLE)).as("g1-3 failed once").isEqualTo(1);
        assertThat(appliedOrder("g1-%")).as("group g1 applied in publish order").isEqualTo(g1);
        assertThat(appliedOrder("g2-%")).as("group g2 applied in publish order").isEqualTo(g2);
    }

    @Test
    void publisherSetsTheDeduplicationIdFromTheEventId() {
        Receipt first = send("evt-1", null, "1");
        Receipt again = send("evt-1", null, "1");   // the relay re-sends after a crash: same event id, same dedup id
        send("evt-2", null, "2");
        assertThat(first.status()).isEqualTo(200);
        assertThat(first.body()).as("SQS's answer: message id and FIFO sequence number")
                .matches("messageId=\\S+ sequenceNumber=\\d+");
        assertThat(again.body()).as("SQS answers a deduplicated send like the first").isEqualTo(first.body());
        Map<QueueAttributeName, String> attributes = TestSqs.client().getQueueAttributes(r -> r.queueUrl(queue)
                .attributeNames(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES)).attributes();
        assertThat(attributes).as("the second send of evt-1 was deduplicated by SQS")
                .containsEntry(QueueAttributeName.APPROXIMATE_NUMBER_OF_MESSAGES, "2");
        assertThat(SqsPublisher.sqsId("evt-1")).isEqualTo("evt-1");
        assertThat(SqsPublisher.sqsId("évènement " + "x".repeat(200))).as("ids SQS refuses are hashed").hasSize(64);
    }

    private Receipt send(String eventId, String group, String body) {
        return publisher.publish(TestSqs.message(queue, eventId, group, body));
    }

    private List<String> appliedOrder(String like) throws Exception {
        List<String> ids = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT event_id FROM effect WHERE event_id LIKE '" + like + "' ORDER BY seq")) {
            while (rs.next()) {
                ids.add(rs.getString(1));
            }
        }
        return ids;
    }
}
