package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.api.gax.grpc.GrpcStatusCode;
import com.google.api.gax.rpc.InvalidArgumentException;
import com.google.api.gax.rpc.PermissionDeniedException;
import com.google.api.gax.rpc.UnauthenticatedException;
import com.google.pubsub.v1.TopicName;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Receipt;
import dev.once.testkit.broker.PublisherChecks;
import dev.once.testsupport.SkipWithoutPubSub;
import io.grpc.Status;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * How {@link PubSubPublisher} maps what Pub/Sub answers to the publisher failure contract, each
 * message of a batch decided on its own, on the emulator.
 */
@ExtendWith(SkipWithoutPubSub.class)
class PubSubPublisherFailureTest {

    private PubSubPublisher publisher;
    private TopicName topic;

    @BeforeEach
    void setUp() {
        publisher = TestPubSub.outboxPublisher();
        topic = TestPubSub.topic("failure-" + System.nanoTime());
    }

    @AfterEach
    void tearDown() {
        publisher.close();
        TestPubSub.delete(topic);
    }

    @Test
    void aTopicThatDoesNotExistIsPermanentAndTheRelayMovesTheRowToDead() throws Exception {
        String missing = "no-topic-" + System.nanoTime();
        assertThatThrownBy(() -> publisher.publish(OutboxRows.row(missing, "evt-1", null, "1")))
                .isInstanceOfSatisfying(
                        PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                .hasMessageContaining("no topic for row 0 (event evt-1)");
        PublisherChecks.relayMovesARefusedRowToDead(publisher, missing, null);
    }

    @Test
    void oneRefusedMessageInABatchFailsAloneAndItsNeighboursArePublished() throws Exception {
        String missing = "no-topic-" + System.nanoTime();
        List<CompletionStage<Receipt>> stages = publisher.publishAll(List.of(
                OutboxRows.row(topic.getTopic(), "evt-1", "k1", "1"),
                OutboxRows.row(missing, "evt-2", "k2", "2"),
                OutboxRows.row(topic.getTopic(), "evt-3", "k3", "3")));
        assertThat(stages).hasSize(3);
        for (int i : new int[] {0, 2}) {
            assertThat(stages.get(i)
                            .toCompletableFuture()
                            .get(1, TimeUnit.MINUTES)
                            .body())
                    .as("the server's message id for row %d", i)
                    .matches("topic=" + topic + " messageId=\\S+");
        }
        assertThatThrownBy(() -> stages.get(1).toCompletableFuture().get(1, TimeUnit.MINUTES))
                .cause()
                .isInstanceOfSatisfying(
                        PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                .hasMessageContaining("event evt-2");
    }

    /**
     * A denied or unauthenticated publish is retryable, as on every publisher: permissions and
     * credentials can be fixed without changing the message. The emulator denies nothing, so the
     * client's exceptions are classified as a failed publish hands them over; an invalid message
     * stays permanent.
     */
    @Test
    void aDeniedOrUnauthenticatedPublishIsRetryableAndAnInvalidMessagePermanent() {
        var row = OutboxRows.row("orders", "evt-1", null, "1");
        assertThat(PubSubPublisher.failure(
                                row,
                                new PermissionDeniedException(
                                        null, GrpcStatusCode.of(Status.Code.PERMISSION_DENIED), false))
                        .retryable())
                .as("permission denied")
                .isTrue();
        assertThat(PubSubPublisher.failure(
                                row,
                                new UnauthenticatedException(
                                        null, GrpcStatusCode.of(Status.Code.UNAUTHENTICATED), false))
                        .retryable())
                .as("unauthenticated")
                .isTrue();
        assertThat(PubSubPublisher.failure(
                                row,
                                new InvalidArgumentException(
                                        null, GrpcStatusCode.of(Status.Code.INVALID_ARGUMENT), false))
                        .retryable())
                .as("invalid message")
                .isFalse();
    }
}
