package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Receipt;
import dev.once.testkit.broker.PublisherChecks;
import dev.once.testkit.kafka.TestKafka;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.junit.jupiter.api.Test;

/**
 * How {@link KafkaPublisher} maps what Kafka answers to the publisher failure contract documented
 * on {@link dev.once.outbox.Publisher}: permanent when sending again can never succeed (the row goes
 * to {@code dead} at once), retryable when it may succeed later, each message of a batch decided on
 * its own.
 */
class KafkaPublisherFailureTest {

    /** The topic refuses records above this many bytes; the producer's own limit stays at its default. */
    private static final String TOPIC_MAX_BYTES = "1000";

    private final TestKafka kafka = TestKafka.shared();

    private static OutboxMessage message(long id, String topic, String eventId, byte[] payload) {
        return new OutboxMessage(id, eventId, topic, null, payload, Map.of(), eventId, 0, Instant.now());
    }

    private static byte[] small(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private String smallTopic() {
        String topic = "once-small-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        kafka.createTopic(topic, 1, Map.of("max.message.bytes", TOPIC_MAX_BYTES));
        return topic;
    }

    private KafkaPublisher publisher() {
        return KafkaPublisher.create(Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()));
    }

    @Test
    void aRecordTheTopicRefusesAsTooLargeIsPermanentAndTheRelayMovesTheRowToDead() {
        String topic = smallTopic();
        try (KafkaPublisher publisher = publisher()) {
            assertThatThrownBy(() -> publisher.publish(message(1, topic, "evt-1", new byte[5000])))
                    .as("refused by the broker: above the topic's max.message.bytes")
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                    .hasMessageContaining("outbox message 1")
                    .hasMessageContaining(topic);
            assertThat(publisher.publish(message(2, topic, "evt-2", small("2"))).body())
                    .as("the publisher goes on after a refused record")
                    .startsWith(topic + "-0@");

            PublisherChecks.relayMovesARefusedRowToDead(publisher, topic, new byte[5000], null);
        }
    }

    @Test
    void oneRefusedSendInABatchDecidesNoOtherMessage() throws Exception {
        String topic = smallTopic();
        try (KafkaPublisher publisher = publisher()) {
            List<CompletionStage<Receipt>> stages = publisher.publishAll(List.of(
                    message(1, topic, "evt-1", small("1")),
                    message(2, topic, "evt-2", new byte[5000]),
                    message(3, topic, "evt-3", small("3"))));
            assertThat(stages).hasSize(3);
            assertThat(stages.get(0)
                            .toCompletableFuture()
                            .get(60, TimeUnit.SECONDS)
                            .body())
                    .startsWith(topic + "-0@");
            assertThat(stages.get(2)
                            .toCompletableFuture()
                            .get(60, TimeUnit.SECONDS)
                            .body())
                    .startsWith(topic + "-0@");
            assertThatThrownBy(() -> stages.get(1).toCompletableFuture().join())
                    .isInstanceOf(CompletionException.class)
                    .cause()
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                    .hasMessageContaining("outbox message 2");
        }
    }

    /**
     * Regression: a compacted topic refuses a record without a key, and Kafka then fails the whole
     * batch, the valid records with a plain KafkaException ("part of a batch which had one more
     * more invalid records"). The publisher took that for a refusal of each of them: messages 1
     * and 3 were permanent failures, their rows dead (5 runs of 5 before the fix).
     */
    @Test
    void validMessagesBatchedWithAnInvalidOneAreSentNotDeadLettered() throws Exception {
        String topic = "once-compacted-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        kafka.createTopic(topic, 1, Map.of("cleanup.policy", "compact"));
        try (KafkaPublisher publisher = publisher()) {
            List<CompletionStage<Receipt>> stages = publisher.publishAll(List.of(
                    new OutboxMessage(1, "evt-1", topic, "k1", small("1"), Map.of(), "evt-1", 0, Instant.now()),
                    message(2, topic, "evt-2", small("2")),
                    new OutboxMessage(3, "evt-3", topic, "k3", small("3"), Map.of(), "evt-3", 0, Instant.now())));
            for (int i : new int[] {0, 2}) {
                assertThat(stages.get(i)
                                .toCompletableFuture()
                                .get(60, TimeUnit.SECONDS)
                                .body())
                        .as("message %d, keyed, is sent", i + 1)
                        .startsWith(topic + "-0@");
            }
            assertThatThrownBy(() -> stages.get(1).toCompletableFuture().join())
                    .as("message 2 has no key: refused for what it is")
                    .cause()
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                    .hasMessageContaining("outbox message 2")
                    .hasMessageContaining("InvalidRecordException");
        }
    }

    /**
     * Regression: the producer's first batch to a partition holds a valid record and one the topic
     * refuses, and the next batch is sent while Kafka refuses the first. With requests pipelined,
     * the broker (holding no sequence yet for this producer there) wrote the next batch first, then
     * refused the first batch's split records as out of sequence until the delivery timeout: the
     * valid message 1 timed out instead of being sent (4 runs of 4 before the fix). The batch size
     * puts messages 1 and 2 in one batch and message 3 in the next.
     */
    @Test
    void aBatchBehindARefusedOneIsNotWrittenBeforeIt() throws Exception {
        String topic = smallTopic();
        try (KafkaPublisher publisher = KafkaPublisher.create(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                kafka.bootstrapServers(),
                ProducerConfig.BATCH_SIZE_CONFIG,
                "5600"))) {
            List<CompletionStage<Receipt>> stages = publisher.publishAll(List.of(
                    message(1, topic, "evt-1", small("1")),
                    message(2, topic, "evt-2", new byte[5000]),
                    message(3, topic, "evt-3", new byte[700])));
            assertThat(stages.get(0)
                            .toCompletableFuture()
                            .get(60, TimeUnit.SECONDS)
                            .body())
                    .as("the valid message of the refused batch is written, and first")
                    .isEqualTo(topic + "-0@0");
            assertThat(stages.get(2)
                            .toCompletableFuture()
                            .get(60, TimeUnit.SECONDS)
                            .body())
                    .isEqualTo(topic + "-0@1");
            assertThatThrownBy(() -> stages.get(1).toCompletableFuture().join())
                    .cause()
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isFalse());
        }
    }

    /**
     * The one case where Kafka's answer is not the idiom's first reading ("it does not exist":
     * permanent): the producer waits {@code max.block.ms} for the topic's metadata and then fails
     * exactly as it does when no broker answers ("Topic … not present in metadata"), so the
     * publisher cannot tell a missing topic from an outage, and an outage must never give a message
     * up. Retryable: the relay tries again with its backoff and dead-letters the row once its
     * retry policy is spent.
     */
    @Test
    void aTopicThatDoesNotExistIsRetryableSinceKafkaAnswersAsForAnOutage() {
        String missing = "once-no-topic-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        try (KafkaPublisher publisher = KafkaPublisher.create(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                kafka.bootstrapServers(),
                ProducerConfig.MAX_BLOCK_MS_CONFIG,
                "2000"))) {
            assertThatThrownBy(() -> publisher.publish(message(1, missing, "evt-1", small("1"))))
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isTrue())
                    .hasMessageContaining("outbox message 1")
                    .hasMessageContaining("not present in metadata");
        }
    }

    /**
     * Regression: a relay thread interrupted (its relay closing) while the producer waits for a
     * topic's metadata got Kafka's InterruptException thrown by send() itself, which the publisher
     * took for a message Kafka can never send: permanent, the row dead.
     */
    @Test
    void anInterruptedSendIsRetryableAndKeepsTheInterrupt() {
        String topic = kafka.createTopic("interrupted", 1);
        try (KafkaPublisher publisher = publisher()) {
            Thread.currentThread().interrupt();
            try {
                assertThatThrownBy(() -> publisher.send(message(1, topic, "evt-1", small("1"))))
                        .isInstanceOfSatisfying(
                                PublishFailure.class,
                                f -> assertThat(f.retryable()).isTrue())
                        .hasMessageContaining("outbox message 1");
                assertThat(Thread.currentThread().isInterrupted())
                        .as("the interrupt is kept")
                        .isTrue();
            } finally {
                Thread.interrupted();
            }
        }
    }

    @Test
    void aBrokerThatCannotBeReachedIsRetryable() throws IOException {
        int closed;
        try (ServerSocket s = new ServerSocket(0)) {
            closed = s.getLocalPort(); // nothing listens there once it is closed
        }
        try (KafkaPublisher publisher = KafkaPublisher.create(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                "127.0.0.1:" + closed,
                ProducerConfig.MAX_BLOCK_MS_CONFIG,
                "1000"))) {
            assertThatThrownBy(() -> publisher.publish(message(1, "any", "evt-1", small("1"))))
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isTrue())
                    .hasMessageContaining("outbox message 1")
                    .hasMessageContaining("not present in metadata");
        }
    }

    /**
     * A denied topic or cluster and a failed authentication are retryable, as on every publisher:
     * ACLs and credentials can be fixed without changing the record, and a misconfigured deployment
     * must not send the whole outbox to dead at once. The test broker has no ACLs, so the producer's
     * errors are classified as the send callback gets them; a record too large stays permanent.
     */
    @Test
    void aDeniedOrUnauthenticatedSendIsRetryableAndATooLargeRecordPermanent() {
        OutboxMessage m = message(1, "orders", "evt-1", small("1"));
        assertThat(KafkaPublisher.refused(m, new TopicAuthorizationException(Set.of("orders")))
                        .retryable())
                .as("topic not authorized")
                .isTrue();
        assertThat(KafkaPublisher.refused(m, new ClusterAuthorizationException("denied"))
                        .retryable())
                .as("cluster not authorized")
                .isTrue();
        assertThat(KafkaPublisher.refused(m, new SaslAuthenticationException("bad credentials"))
                        .retryable())
                .as("authentication failed")
                .isTrue();
        assertThat(KafkaPublisher.refused(m, new KafkaException("part of a batch which had invalid records"))
                        .retryable())
                .as("not one of Kafka's errors: no answer about this record")
                .isTrue();
        assertThat(KafkaPublisher.refused(m, new RecordTooLargeException("too large"))
                        .retryable())
                .as("record too large")
                .isFalse();
    }
}
