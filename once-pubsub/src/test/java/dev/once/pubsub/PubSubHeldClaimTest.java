package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.api.core.ApiFutures;
import com.google.cloud.pubsub.v1.AckResponse;
import com.google.protobuf.ByteString;
import com.google.pubsub.v1.DeadLetterPolicy;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.PubsubMessage;
import com.google.pubsub.v1.PullRequest;
import com.google.pubsub.v1.PullResponse;
import com.google.pubsub.v1.ReceivedMessage;
import com.google.pubsub.v1.TopicName;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.outbox.OutboxMessage;
import dev.once.pubsub.PubSubDeliverySequenceTest.Reply;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A delivery whose claim another delivery holds ({@code IN_PROGRESS}) on a subscription whose dead-letter policy
 * allows 5 delivery attempts (Pub/Sub's least): process A holds event e's claim (its handler waits inside its
 * transaction, on the same database; how A got e does not matter: a delivery whose lease lapsed, a producer's second
 * copy), consumer B gets e, and A then fails retryably and rolls back. Each nack is a delivery attempt, and past the
 * fifth Pub/Sub forwards the message to the dead-letter topic unapplied, so B keeps its delivery in hand and tries it
 * again until A has ended: e is applied once, by B, on its one delivery.
 *
 * <p>The emulator honours the policy as Pub/Sub does: every nack of a message counts one delivery attempt, and the
 * nack of attempt 5 forwards it to the dead-letter topic (seen by hand through its REST API), on a subscription
 * without message ordering. A is the engine called
 * on a thread of the test, B a {@link PubSubConsumer}; both claims wait at most {@value #LOCK_TIMEOUT_MS} ms for
 * each other.
 */
class PubSubHeldClaimTest {

    private static final int MAX_DELIVERY_ATTEMPTS = 5;
    private static final long LOCK_TIMEOUT_MS = 100;
    /** B's tries of a kept delivery: quick, so that the test's holder does not wait long. */
    private static final RetryPolicy TRIES = RetryPolicy.builder()
            .initialDelay(Duration.ofMillis(50))
            .maxDelay(Duration.ofMillis(200))
            .maxRetries(RetryPolicy.MAX_RETRIES_LIMIT)
            .build();

    /** One processed delivery: who processed it, its attempt and what came of it. */
    record Seen(String source, String eventId, int attempt, Status status) {}

    private TestDatabase db;
    private TopicName topic;
    private TopicName deadLetterTopic;
    private ProjectSubscriptionName subscription;
    private ProjectSubscriptionName deadLetterSubscription;
    private final List<Seen> seen = new CopyOnWriteArrayList<>();
    private final CountDownLatch holding = new CountDownLatch(1);
    private final CountDownLatch release = new CountDownLatch(1);

    @BeforeEach
    void create() {
        TestPubSub.host();
        db = TestPostgres.shared().freshDatabase();
        db.execute(Recorder.CREATE);
        String name = "held-" + System.nanoTime();
        topic = TestPubSub.topic(name);
        deadLetterTopic = TestPubSub.topic(name + "-dlq");
        deadLetterSubscription = TestPubSub.subscription(deadLetterTopic, name + "-dlq", s -> s);
        subscription = TestPubSub.subscription(
                topic,
                name,
                // no message ordering: the emulator's ordered backlog fails to forward at the limit (a
                // NullPointerException in its MessageBacklog.pull) and holds the message instead
                s -> s.setDeadLetterPolicy(DeadLetterPolicy.newBuilder()
                        .setDeadLetterTopic(deadLetterTopic.toString())
                        .setMaxDeliveryAttempts(MAX_DELIVERY_ATTEMPTS)));
    }

    @AfterEach
    void delete() {
        release.countDown();
        TestPubSub.delete(topic, subscription);
        TestPubSub.delete(deadLetterTopic, deadLetterSubscription);
        db.close();
    }

    /** The engine of A and B: A's call (source {@code process-a}) holds its transaction until released, then fails. */
    private IdempotentConsumer engine() {
        return IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("pubsub-held")
                .lockTimeout(Duration.ofMillis(LOCK_TIMEOUT_MS))
                .handler((d, tx) -> {
                    if (d.source().equals("process-a")) {
                        holding.countDown();
                        assertThat(release.await(2, TimeUnit.MINUTES)).isTrue();
                        throw new RetryableException("A fails after B met its claim; its transaction rolls back");
                    }
                    try (PreparedStatement ps =
                            tx.connection().prepareStatement("INSERT INTO effect (event_id, body) VALUES (?, ?)")) {
                        ps.setString(1, d.eventId()); // 1: event id
                        ps.setString(2, d.payloadText()); // 2: body
                        ps.executeUpdate();
                    }
                })
                .outcomeListener((d, o) -> seen.add(new Seen(d.source(), d.eventId(), d.attempt(), o.status())))
                .build();
    }

    /** A holds {@code eventId}'s claim, on a thread of its own, until {@link #release}. */
    private CompletableFuture<Outcome> aHolds(IdempotentConsumer engine, String eventId) throws Exception {
        CompletableFuture<Outcome> a = CompletableFuture.supplyAsync(
                () -> engine.process(Delivery.builder(eventId)
                        .payload(new byte[0])
                        .source("process-a")
                        .build()),
                OwnThreads.each());
        assertThat(holding.await(30, TimeUnit.SECONDS)).as("A holds the claim").isTrue();
        return a;
    }

    private long inProgress(String eventId) {
        return seen.stream()
                .filter(s -> s.eventId().equals(eventId) && s.status() == Status.IN_PROGRESS)
                .count();
    }

    @Test
    void aDeliveryWhoseClaimAnotherHoldsIsKeptUntilTheHolderEndsNotNackedIntoTheDeadLetterPolicy() throws Exception {
        IdempotentConsumer engine = engine();
        CompletableFuture<Outcome> a = aHolds(engine, "e");
        List<ReceivedMessage> deadLettered = new ArrayList<>();
        try (PubSubConsumer b = TestPubSub.consumer(subscription, engine, null)
                        .receiveRetries(TRIES)
                        .build()
                        .start();
                PubSubPublisher publisher = TestPubSub.outboxPublisher()) {
            publisher.publish(OutboxRows.row(topic.getTopic(), "e", null, "1"));
            // as many times as the policy allows attempts: B's nacks would have spent them all by now
            await().atMost(Duration.ofSeconds(60)).until(() -> inProgress("e") >= MAX_DELIVERY_ATTEMPTS);
            release.countDown();
            assertThat(a.get(30, TimeUnit.SECONDS).status()).isEqualTo(Status.FAILED_RETRYABLE);
            await().atMost(Duration.ofSeconds(60)).until(() -> {
                deadLettered.addAll(pullDeadLetters());
                return applied("e") > 0 || !deadLettered.isEmpty();
            });
        }
        String what = "B's deliveries and tries " + seen;
        assertThat(deadLettered)
                .as("forwarded unapplied to the dead-letter topic by the subscription's policy; " + what)
                .isEmpty();
        assertThat(applied("e")).as("e applied exactly once; " + what).isEqualTo(1);
        assertThat(seen.stream()
                        .filter(s -> !s.source().equals("process-a"))
                        .map(Seen::attempt)
                        .distinct()
                        .toList())
                .as("B's delivery attempts: one delivery, kept in hand; " + what)
                .containsExactly(1);
    }

    /**
     * Ordered: k-0's claim is held by A when k-0 and k-1 are handed to B, and k-2 comes while B keeps k-0. Nothing of
     * k is nacked (each nack spends an attempt of k-0 and of its successors) or applied ahead of k-0: k-1 and k-2 wait
     * in hand behind it, and once A rolled back and B's try applied k-0 they follow in order. Played through the
     * receiver, as {@link PubSubDeliverySequenceTest}: the emulator hands out a key's next message only after the one
     * before is settled.
     */
    @Test
    void aKeptHeadHoldsItsKeyInHandAndItsSuccessorsFollowItInOrder() throws Exception {
        IdempotentConsumer engine = engine();
        CompletableFuture<Outcome> a = aHolds(engine, "k-0");
        List<Reply> replies = new ArrayList<>();
        try (PubSubConsumer b = TestPubSub.consumer(subscription, engine, null)
                .receiveRetries(TRIES)
                .batchSize(10)
                .orderedByKey()
                .build()
                .start()) {
            replies.add(deliver(b, "k-0"));
            replies.add(deliver(b, "k-1"));
            await().atMost(Duration.ofSeconds(30))
                    .until(() -> inProgress("k-0") >= 1 || replies.stream().allMatch(r -> r.answer != null));
            replies.add(deliver(b, "k-2")); // comes while k-0 is kept
            await().atMost(Duration.ofSeconds(30))
                    .until(() -> inProgress("k-0") >= 3 || replies.stream().allMatch(r -> r.answer != null));
            assertThat(effects()).as("nothing of k applied while A holds k-0").isEmpty();
            release.countDown();
            assertThat(a.get(30, TimeUnit.SECONDS).status()).isEqualTo(Status.FAILED_RETRYABLE);
            await().atMost(Duration.ofSeconds(30)).until(() -> replies.stream().allMatch(r -> r.answer != null));
        }
        assertThat(replies.stream().map(r -> r.eventId + "=" + r.answer).toList())
                .as("k's messages kept in hand until A ended, then acked; " + seen)
                .containsExactly("k-0=ack", "k-1=ack", "k-2=ack");
        assertThat(effects()).as("k's effects in publish order").containsExactly("k-0", "k-1", "k-2");
    }

    private static Reply deliver(PubSubConsumer consumer, String eventId) {
        Reply r = new Reply(eventId, ApiFutures.immediateFuture(AckResponse.SUCCESSFUL));
        consumer.receive(
                PubsubMessage.newBuilder()
                        .setMessageId("id-" + eventId)
                        .setOrderingKey("k")
                        .putAllAttributes(Map.of(OutboxMessage.EVENT_ID_HEADER, eventId))
                        .setData(ByteString.copyFromUtf8(eventId))
                        .build(),
                r);
        return r;
    }

    private long applied(String eventId) {
        return db.queryLong("SELECT count(*) FROM effect WHERE event_id = '" + eventId + "'");
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

    private List<ReceivedMessage> pullDeadLetters() {
        // returnImmediately: the emulator's pull otherwise waits for a message that may never come
        @SuppressWarnings("deprecation")
        PullResponse r = TestPubSub.subscriptions()
                .pull(PullRequest.newBuilder()
                        .setSubscription(deadLetterSubscription.toString())
                        .setMaxMessages(10)
                        .setReturnImmediately(true)
                        .build());
        return r.getReceivedMessagesList();
    }
}
