package dev.once.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.outbox.PublishFailure;
import dev.once.outbox.Receipt;
import dev.once.testkit.broker.PublisherChecks;
import io.nats.client.Connection;
import io.nats.client.api.StorageType;
import io.nats.client.api.StreamConfiguration;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * How {@link NatsPublisher} maps what NATS answers to the publisher failure contract, each message
 * of a batch decided on its own.
 */
@ExtendWith(SkipWithoutNats.class)
class NatsPublisherFailureTest {

    private Connection nats;
    private NatsPublisher publisher;

    @BeforeEach
    void setUp() throws Exception {
        nats = TestNats.connect();
        publisher = new NatsPublisher(nats);
    }

    @AfterEach
    void tearDown() throws Exception {
        nats.close();
    }

    @Test
    void aSubjectNoStreamTakesIsPermanentAndTheRelayMovesTheRowToDead() {
        String subject = "once-no-stream-" + System.nanoTime();
        assertThatThrownBy(() -> publisher.publish(TestNats.message(subject, "evt-1", null, "1")))
                .isInstanceOfSatisfying(
                        PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                .hasMessageContaining("no JetStream stream takes subject");
        PublisherChecks.relayMovesARefusedRowToDead(publisher, subject, null);
    }

    @Test
    void aMessageLargerThanTheStreamOrServerAllowsIsPermanent() throws Exception {
        String stream = smallStream();
        try {
            assertThatThrownBy(() -> publisher.publish(TestNats.message(stream, "evt-1", null, "x".repeat(200))))
                    .as("over the stream's maximum message size")
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isFalse());
            assertThatThrownBy(() -> publisher.publish(TestNats.message(
                            stream,
                            "evt-2",
                            null,
                            "x".repeat((int) nats.getServerInfo().getMaxPayload() + 1))))
                    .as("over the server's maximum payload")
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isFalse());
        } finally {
            TestNats.deleteStream(nats, stream);
        }
    }

    @Test
    void oneRefusedMessageInABatchFailsAloneAndItsNeighboursAreStored() throws Exception {
        String stream = smallStream();
        try {
            List<CompletionStage<Receipt>> stages = publisher.publishAll(List.of(
                    TestNats.message(stream, "evt-1", "k1", "1"),
                    TestNats.message(stream, "evt-2", "k2", "x".repeat(200)),
                    TestNats.message(stream, "evt-3", "k3", "3")));
            assertThat(stages).hasSize(3);
            assertThat(stages.get(0)
                            .toCompletableFuture()
                            .get(30, TimeUnit.SECONDS)
                            .body())
                    .startsWith("stream=" + stream + " seq=");
            assertThat(stages.get(2)
                            .toCompletableFuture()
                            .get(30, TimeUnit.SECONDS)
                            .body())
                    .startsWith("stream=" + stream + " seq=");
            assertThatThrownBy(() -> stages.get(1).toCompletableFuture().get(30, TimeUnit.SECONDS))
                    .as("over the stream's maximum message size: this message alone")
                    .cause()
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                    .hasMessageContaining("event evt-2");
            assertThat(nats.jetStreamManagement()
                            .getStreamInfo(stream)
                            .getStreamState()
                            .getMsgCount())
                    .as("the refused message's neighbours are stored")
                    .isEqualTo(2);
        } finally {
            TestNats.deleteStream(nats, stream);
        }
    }

    @Test
    void aLostConnectionIsRetryableForEveryMessageOfABatch() throws Exception {
        nats.close();
        List<CompletionStage<Receipt>> stages = publisher.publishAll(
                List.of(TestNats.message("any", "evt-1", "k1", "1"), TestNats.message("any", "evt-2", "k2", "2")));
        PublisherChecks.eachRetryable(stages, 2);
    }

    @Test
    void aLostConnectionIsRetryable() throws Exception {
        nats.close();
        assertThatThrownBy(() -> publisher.publish(TestNats.message("any", "evt-1", null, "1")))
                .isInstanceOfSatisfying(
                        PublishFailure.class, f -> assertThat(f.retryable()).isTrue());
    }

    /** A memory stream over its own name that refuses messages above 100 bytes; delete it after the test. */
    private String smallStream() throws Exception {
        String stream = "once-small-" + System.nanoTime();
        nats.jetStreamManagement()
                .addStream(StreamConfiguration.builder()
                        .name(stream)
                        .subjects(stream)
                        .storageType(StorageType.Memory)
                        .maximumMessageSize(100)
                        .build());
        return stream;
    }
}
