package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.api.core.ApiFuture;
import com.google.api.core.ApiFutures;
import com.google.cloud.pubsub.v1.AckReplyConsumerWithResponse;
import com.google.cloud.pubsub.v1.AckResponse;
import com.google.protobuf.ByteString;
import com.google.pubsub.v1.PubsubMessage;
import dev.once.Outcome.Status;
import dev.once.RetryableException;
import dev.once.outbox.OutboxMessage;
import java.sql.Connection;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Delivery sequences Pub/Sub produces and the emulator does not, played into a started
 * {@link PubSubConsumer} through the receiver the client calls ({@link PubSubConsumer#receive}),
 * each message with a reply of the client's {@link AckReplyConsumerWithResponse} type whose ack
 * future completes as the client completes it. Everything behind the receiver is real: the buffer,
 * the driver, the engine, PostgreSQL. (The consumer's own subscriber, on an empty emulator
 * subscription, receives nothing.)
 *
 * <ul>
 *   <li>Ordering: with message ordering on, Pub/Sub hands a stream several messages of one key at
 *       once, and the client calls the receiver with the next as soon as the receiver returned from
 *       the one before, not when it was acked. After a failure Pub/Sub redelivers the failed message
 *       and every later one of its key. The emulator hands out a key's next message only after the
 *       one before is settled, so on it the hold-back below has nothing to do.
 *   <li>Exactly-once delivery: the client completes an ack's future with {@code SUCCESSFUL} only
 *       when Pub/Sub confirmed it, and with {@code INVALID} (the ack id expired: the message was
 *       already handed out again), {@code FAILED_PRECONDITION} (the subscription is detached or
 *       changed), {@code PERMISSION_DENIED} or {@code OTHER} otherwise. The emulator refuses only
 *       expired or unknown ack ids ({@link PubSubExactlyOnceTest} covers that one on it).
 * </ul>
 */
class PubSubDeliverySequenceTest extends FreshSubscription {

    /** A reply as the client gives it: records what the consumer answered; the ack's future says {@code ack}. */
    static final class Reply implements AckReplyConsumerWithResponse {
        final String eventId;
        final ApiFuture<AckResponse> ackResult;
        volatile String answer;

        Reply(String eventId, ApiFuture<AckResponse> ackResult) {
            this.eventId = eventId;
            this.ackResult = ackResult;
        }

        @Override
        public ApiFuture<AckResponse> ack() {
            answer = "ack";
            return ackResult;
        }

        @Override
        public ApiFuture<AckResponse> nack() {
            answer = "nack";
            return ApiFutures.immediateFuture(AckResponse.SUCCESSFUL);
        }
    }

    private final List<Reply> replies = new ArrayList<>();

    private Reply deliver(PubSubConsumer consumer, String eventId, ApiFuture<AckResponse> ackResult) {
        Reply r = new Reply(eventId, ackResult);
        replies.add(r);
        consumer.receive(message(eventId), r);
        return r;
    }

    private static PubsubMessage message(String eventId) {
        return PubsubMessage.newBuilder()
                .setMessageId("id-" + eventId)
                .setOrderingKey(eventId.substring(0, eventId.indexOf('-')))
                .putAttributes(OutboxMessage.EVENT_ID_HEADER, eventId)
                .setData(ByteString.copyFromUtf8(eventId))
                .build();
    }

    /** Set when the test plays Pub/Sub's redelivery: until then {@code k-2} fails on every attempt. */
    private final AtomicBoolean redelivering = new AtomicBoolean();

    private Recorder failingUntilRedelivered(String eventId) {
        // every attempt, also the engine's own re-run of a split batch: only Pub/Sub's redelivery gets it through
        return new Recorder(db, d -> {
            if (d.eventId().equals(eventId) && !redelivering.get()) {
                throw new RetryableException(eventId + " fails until Pub/Sub delivers it again");
            }
        });
    }

    private void awaitSettled() {
        await().atMost(Duration.ofSeconds(30)).until(() -> replies.stream().allMatch(r -> r.answer != null));
    }

    private List<String> effects() throws Exception {
        List<String> ids = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                ResultSet rs = c.createStatement().executeQuery("SELECT event_id FROM effect ORDER BY seq")) {
            while (rs.next()) {
                ids.add(rs.getString(1));
            }
        }
        return ids;
    }

    /**
     * k-0 … k-4 handed out at once; k-2 fails; k-5 arrives from the stream before k-2 comes again;
     * then Pub/Sub redelivers k-2 and every later message of k. With {@code orderedByKey()} nothing of
     * k is applied ahead of k-2, and what came early is nacked, unapplied.
     */
    PubSubDeliverySequenceTest() {
        super("sequence", s -> s.setEnableMessageOrdering(true));
    }

    @Test
    void successorsAlreadyReceivedAreHeldBackUntilTheFailedMessageComesAgain() throws Exception {
        Recorder recorder = failingUntilRedelivered("k-2");
        try (PubSubConsumer c = TestPubSub.consumer(subscription, recorder, null)
                .batchSize(10)
                .orderedByKey()
                .build()
                .start()) {
            playFailureAndRedelivery(c);
        }
        assertThat(effects())
                .as("k's effects in publish order")
                .containsExactly("k-0", "k-1", "k-2", "k-3", "k-4", "k-5");
        assertThat(answers("k-3"))
                .as("k-3: nacked unapplied behind k-2, then acked")
                .containsExactly("nack", "ack");
        assertThat(answers("k-5"))
                .as("k-5: nacked unapplied behind k-2, then acked")
                .containsExactly("nack", "ack");
        assertThat(recorder.count("k-3", Status.APPLIED)).isEqualTo(1);
    }

    /** The same sequence without {@code orderedByKey()}: successors overtake the failed message (why the option exists). */
    @Test
    void withoutOrderedByKeySuccessorsOvertakeTheFailedMessage() throws Exception {
        Recorder recorder = failingUntilRedelivered("k-2");
        try (PubSubConsumer c = TestPubSub.consumer(subscription, recorder, null)
                .batchSize(10)
                .build()
                .start()) {
            playFailureAndRedelivery(c);
        }
        List<String> effects = effects();
        assertThat(effects)
                .as("every event applied once")
                .containsExactlyInAnyOrder("k-0", "k-1", "k-2", "k-3", "k-4", "k-5");
        assertThat(effects.indexOf("k-3")).as("k-3 applied before k-2").isLessThan(effects.indexOf("k-2"));
    }

    private void playFailureAndRedelivery(PubSubConsumer c) {
        ApiFuture<AckResponse> ok = ApiFutures.immediateFuture(AckResponse.SUCCESSFUL);
        for (int i = 0; i <= 4; i++) {
            deliver(c, "k-" + i, ok);
        }
        awaitSettled();
        deliver(c, "k-5", ok); // already in the client's hands when k-2 was nacked
        awaitSettled();
        redelivering.set(true);
        for (int i = 2; i <= 5; i++) {
            deliver(c, "k-" + i, ok); // Pub/Sub's redelivery: the failed message and every later one of its key
        }
        await().atMost(Duration.ofSeconds(30))
                .until(() -> replies.stream().allMatch(r -> r.answer != null)
                        && effects().size() == 6);
    }

    private List<String> answers(String eventId) {
        return replies.stream()
                .filter(r -> r.eventId.equals(eventId))
                .map(r -> r.answer)
                .toList();
    }

    /**
     * Exactly-once delivery: the ack after the commit fails as the client reports it; the consumer
     * counts it and does nothing else (the effect is committed), and the copy Pub/Sub then sends is
     * absorbed as a duplicate and acked.
     */
    @ParameterizedTest
    @EnumSource(
            value = AckResponse.class,
            names = {"INVALID", "FAILED_PRECONDITION", "PERMISSION_DENIED", "OTHER"})
    void aFailedAckIsCountedAndTheRedeliveryAbsorbed(AckResponse failure) throws Exception {
        Recorder recorder = new Recorder(db, d -> {});
        try (PubSubConsumer c = TestPubSub.consumer(subscription, recorder, null)
                .batchSize(10)
                .build()
                .start()) {
            Reply first = deliver(c, "e-1", ApiFutures.immediateFuture(failure));
            await().atMost(Duration.ofSeconds(30)).until(() -> c.failedAcks() == 1);
            assertThat(first.answer).isEqualTo("ack");
            Reply again = deliver(c, "e-1", ApiFutures.immediateFuture(AckResponse.SUCCESSFUL));
            await().atMost(Duration.ofSeconds(30)).until(() -> again.answer != null);
            assertThat(c.failedAcks()).as("failed acks counted").isEqualTo(1);
            assertThat(again.answer).as("the copy is acked").isEqualTo("ack");
        }
        assertThat(recorder.count("e-1", Status.APPLIED)).isEqualTo(1);
        assertThat(recorder.count("e-1", Status.DUPLICATE))
                .as("the copy absorbed")
                .isEqualTo(1);
        assertThat(effects()).as("effect applied exactly once").containsExactly("e-1");
    }

    /** The ack future fails outright (the stream broke before Pub/Sub answered): counted the same way. */
    @Test
    void anAckFutureThatFailsIsCounted() throws Exception {
        Recorder recorder = new Recorder(db, d -> {});
        try (PubSubConsumer c = TestPubSub.consumer(subscription, recorder, null)
                .batchSize(10)
                .build()
                .start()) {
            deliver(c, "e-2", ApiFutures.immediateFailedFuture(new IllegalStateException("stream closed")));
            await().atMost(Duration.ofSeconds(30)).until(() -> c.failedAcks() == 1);
        }
        assertThat(effects()).containsExactly("e-2");
    }
}
