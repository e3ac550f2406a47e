package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.cloud.pubsub.v1.MessageReceiver;
import com.google.cloud.pubsub.v1.Subscriber;
import com.google.pubsub.v1.DeadLetterPolicy;
import dev.once.outbox.OutboxMessage;
import java.sql.Connection;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.Test;

/**
 * An ordered consumer keeps the message it works on for as long as the work runs, so Pub/Sub hands out
 * nothing of its key meanwhile: k-0's handler works for {@value #HOLD_SECONDS} s, past two 10 s ack
 * deadlines, on a subscription with message ordering and a dead-letter policy of 5 attempts, while another
 * subscriber of the subscription nacks whatever it gets (a process whose claims time out, a crash loop).
 *
 * <p>What this guards: with a lease shorter than the work (the {@code lease(…)} that {@code orderedByKey()}
 * took before it was refused) the deadline lapsed 10 s in, that subscriber got k-0 (delivery attempt 2)
 * together with k-1, and its nacks ran both up to attempt 5 within half a second; Pub/Sub then forwards
 * k-0 to the dead-letter topic and hands k-1 to a subscriber, which applies it before the first one commits
 * k-0 (the emulator stops handing out the key at the limit instead, see docs/pubsub.md).
 */
class PubSubOrderedLeaseTest extends FreshSubscription {
    private static final int HOLD_SECONDS = 25;

    PubSubOrderedLeaseTest() {
        super(
                "ordered-lease",
                s -> s.setEnableMessageOrdering(true)
                        .setDeadLetterPolicy(DeadLetterPolicy.newBuilder()
                                .setDeadLetterTopic(s.getTopic()) // any topic: the policy's count is what matters here
                                .setMaxDeliveryAttempts(5)));
    }

    @Test
    void theKeyIsNotHandedOutWhileItsMessageIsWorkedOnPastTheAckDeadline() throws Exception {
        List<String> handedOut = new CopyOnWriteArrayList<>();
        Recorder recorder = new Recorder(db, d -> {
            if (d.eventId().equals("k-0")) {
                try {
                    await().atMost(Duration.ofSeconds(HOLD_SECONDS))
                            .pollInterval(Duration.ofMillis(100))
                            .until(() -> !handedOut.isEmpty());
                } catch (ConditionTimeoutException held) {
                    // nothing of k handed out while k-0 was worked on: what the key's order needs
                }
            }
        });
        try (PubSubPublisher p = TestPubSub.outboxPublisher()) {
            p.publish(OutboxRows.row(topic.getTopic(), "k-0", "k", "0"));
            p.publish(OutboxRows.row(topic.getTopic(), "k-1", "k", "1"));
        }
        List<String> whileWorking;
        try (PubSubConsumer a = TestPubSub.consumer(subscription, recorder, null)
                .orderedByKey()
                .batchSize(1)
                .ackDeadline(Duration.ofSeconds(10))
                .build()
                .start()) {
            await().atMost(Duration.ofMinutes(1)).until(() -> recorder.deliveries("k-0") > 0);
            Subscriber other = nacking(handedOut);
            try {
                await().atMost(Duration.ofMinutes(1)).until(() -> recorder.outcomes.size() > 0);
                whileWorking = new ArrayList<>(handedOut);
            } finally {
                other.stopAsync().awaitTerminated();
            }
            await().atMost(Duration.ofMinutes(1)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 2);
        }
        assertThat(whileWorking)
                .as("messages of k handed to another subscriber while k-0 was worked on (delivery attempts)")
                .isEmpty();
        List<String> applied = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                ResultSet rs = c.createStatement().executeQuery("SELECT event_id FROM effect ORDER BY seq")) {
            while (rs.next()) {
                applied.add(rs.getString(1));
            }
        }
        assertThat(applied).as("effects of k in commit order").containsExactly("k-0", "k-1");
    }

    /** A subscriber of the same subscription that nacks whatever it gets, noting the event id and attempt. */
    private Subscriber nacking(List<String> handedOut) {
        MessageReceiver receiver = (m, reply) -> {
            handedOut.add(m.getAttributesOrDefault(OutboxMessage.EVENT_ID_HEADER, "?") + " attempt "
                    + Subscriber.getDeliveryAttempt(m));
            reply.nack();
        };
        Subscriber s = Subscriber.newBuilder(subscription, receiver)
                .setChannelProvider(TestPubSub.channelProvider())
                .setCredentialsProvider(TestPubSub.NO_CREDENTIALS)
                .build();
        s.startAsync().awaitRunning();
        return s;
    }
}
