package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Receipt;
import dev.once.testkit.broker.PublisherChecks;
import java.net.ServerSocket;
import java.net.URI;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;

/**
 * How {@link SqsPublisher} maps what SQS answers to the publisher failure contract, each message of
 * a batch decided on its own.
 */
class SqsPublisherFailureTest {

    private final SqsPublisher publisher = new SqsPublisher(TestSqs.client());

    @Test
    void aQueueThatDoesNotExistIsPermanentAndTheRelayMovesTheRowToDead() {
        assertThatThrownBy(() ->
                        publisher.publish(TestSqs.message("no-such-queue-" + System.nanoTime(), "evt-1", null, "1")))
                .isInstanceOfSatisfying(
                        PublishFailure.class, f -> assertThat(f.retryable()).isFalse());
        PublisherChecks.relayMovesARefusedRowToDead(publisher, "no-such-queue-" + System.nanoTime(), 400);
    }

    @Test
    void aMessageLargerThanTheQueueAllowsIsPermanent() {
        String queue = TestSqs.createQueue("large-" + System.nanoTime(), 1);
        try {
            assertThatThrownBy(() -> publisher.publish(TestSqs.message(queue, "evt-1", null, "x".repeat(1_100_000))))
                    .isInstanceOfSatisfying(PublishFailure.class, f -> {
                        assertThat(f.retryable()).isFalse();
                        assertThat(f.receipt().status()).isEqualTo(400);
                    });
        } finally {
            TestSqs.deleteQueue(queue);
        }
    }

    @Test
    void whatCanNeverBeAnSqsMessageIsPermanent() {
        OutboxMessage binary =
                new OutboxMessage(1, "evt-1", "q", null, new byte[] {(byte) 0xC3, 0x28}, Map.of(), "evt-1", 0, null);
        assertThatThrownBy(() -> publisher.publish(binary))
                .isInstanceOfSatisfying(
                        PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                .hasMessageContaining("not valid UTF-8");
        Map<String, String> headers = new HashMap<>();
        for (int i = 0; i < 10; i++) {
            headers.put("h" + i, "v");
        }
        OutboxMessage crowded = new OutboxMessage(2, "evt-2", "q", null, new byte[] {'1'}, headers, "evt-2", 0, null);
        assertThatThrownBy(() -> publisher.publish(crowded))
                .isInstanceOfSatisfying(
                        PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                .hasMessageContaining("SQS allows 10 message attributes");
        List<CompletionStage<Receipt>> stages = publisher.publishAll(List.of(binary, crowded));
        assertThat(stages)
                .as("a batch of nothing SQS can take: each row's own permanent failure, no request")
                .hasSize(2)
                .allSatisfy(stage -> assertThatThrownBy(
                                () -> stage.toCompletableFuture().join())
                        .cause()
                        .isInstanceOfSatisfying(
                                PublishFailure.class,
                                f -> assertThat(f.retryable()).isFalse()));
    }

    @Test
    void anUnreachableSqsIsRetryable() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort(); // closed again: nothing listens there
        }
        try (SqsClient unreachable = SqsClient.builder()
                .endpointOverride(URI.create("http://127.0.0.1:" + port))
                .region(Region.US_EAST_1)
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("x", "x")))
                .build()) {
            assertThatThrownBy(() -> new SqsPublisher(unreachable)
                            .publish(TestSqs.message(
                                    "http://127.0.0.1:" + port + "/000000000000/q", "evt-1", null, "1")))
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isTrue());
        }
    }

    @Test
    void oneRefusedEntryInABatchFailsAloneAndItsNeighboursAreStored() throws Exception {
        String queue = TestSqs.createQueue("batch-" + System.nanoTime(), 30);
        try {
            List<CompletionStage<Receipt>> stages = publisher.publishAll(List.of(
                    TestSqs.message(queue, "evt-1", "k1", "1"),
                    TestSqs.message(queue, "evt-2", "k2", "a character SQS refuses: \u0000"),
                    TestSqs.message(queue, "evt-3", "k3", "3")));
            assertThat(stages).hasSize(3);
            for (int i : new int[] {0, 2}) {
                assertThat(stages.get(i)
                                .toCompletableFuture()
                                .get(30, TimeUnit.SECONDS)
                                .body())
                        .as("SQS's message id for row %d", i)
                        .startsWith("messageId=");
            }
            assertThatThrownBy(() -> stages.get(1).toCompletableFuture().get(30, TimeUnit.SECONDS))
                    .cause()
                    .isInstanceOfSatisfying(
                            PublishFailure.class, f -> assertThat(f.retryable()).isFalse())
                    .hasMessageContaining("event evt-2");
            assertThat(TestSqs.messagesStored(queue))
                    .as("the refused entry's neighbours are stored")
                    .isEqualTo(2);
        } finally {
            TestSqs.deleteQueue(queue);
        }
    }

    @Test
    void concurrentRequestsBelowOneAreRefusedNamingTheValue() {
        assertThatThrownBy(() -> new SqsPublisher(TestSqs.client(), 0))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("concurrentRequests must be at least 1")
                .hasMessageContaining("but was 0");
    }

    /** 95 rows are ten requests; with one request in flight the publisher's one thread sends nine in turn. */
    @Test
    void withOneRequestInFlightABatchOfManyRequestsIsStoredWhole() throws Exception {
        String queue = TestSqs.createQueue("one-in-flight-" + System.nanoTime(), 30);
        try {
            List<OutboxMessage> rows = new ArrayList<>();
            for (int i = 0; i < 95; i++) {
                rows.add(TestSqs.message(queue, "evt-" + i, null, Integer.toString(i)));
            }
            List<CompletionStage<Receipt>> stages = new SqsPublisher(TestSqs.client(), 1).publishAll(rows);
            for (CompletionStage<Receipt> stage : stages) {
                assertThat(stage.toCompletableFuture().get(30, TimeUnit.SECONDS).body())
                        .startsWith("messageId=");
            }
            assertThat(TestSqs.messagesStored(queue)).as("every row stored").isEqualTo(95);
        } finally {
            TestSqs.deleteQueue(queue);
        }
    }

    /** Twelve rows of 100 KiB: more than one request's 256 KiB, so the batch goes in several requests. */
    @Test
    void aBatchLargerThanOneRequestTakesIsStoredWhole() throws Exception {
        String queue = TestSqs.createQueue("large-batch-" + System.nanoTime(), 30);
        try {
            List<OutboxMessage> rows = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                rows.add(TestSqs.message(queue, "evt-" + i, "k" + i, "x".repeat(100 * 1024)));
            }
            for (CompletionStage<Receipt> stage : publisher.publishAll(rows)) {
                assertThat(stage.toCompletableFuture().get(30, TimeUnit.SECONDS).body())
                        .startsWith("messageId=");
            }
            assertThat(TestSqs.messagesStored(queue)).isEqualTo(12);
        } finally {
            TestSqs.deleteQueue(queue);
        }
    }

    /** Batch entries carry the FIFO ids the single send sets: a re-sent batch is deduplicated, not stored again. */
    @Test
    void aFifoBatchSentTwiceIsStoredOnce() throws Exception {
        String queue = TestSqs.createQueue("batch-" + System.nanoTime() + ".fifo", 30);
        try {
            List<OutboxMessage> rows = new ArrayList<>();
            for (int i = 0; i < 15; i++) {
                rows.add(TestSqs.message(queue, "evt-" + i, i % 2 == 0 ? "k" + i : null, "body-" + i));
            }
            for (int send = 0; send < 2; send++) {
                for (CompletionStage<Receipt> stage : publisher.publishAll(rows)) {
                    assertThat(stage.toCompletableFuture()
                                    .get(30, TimeUnit.SECONDS)
                                    .body())
                            .startsWith("messageId=");
                }
            }
            assertThat(TestSqs.messagesStored(queue))
                    .as("the second send deduplicated by MessageDeduplicationId")
                    .isEqualTo(15);
        } finally {
            TestSqs.deleteQueue(queue);
        }
    }

    @Test
    void anUnreachableSqsIsRetryableForEveryMessageOfABatch() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort(); // closed again: nothing listens there
        }
        String queue = "http://127.0.0.1:" + port + "/000000000000/q";
        try (SqsClient unreachable = SqsClient.builder()
                .endpointOverride(URI.create("http://127.0.0.1:" + port))
                .region(Region.US_EAST_1)
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("x", "x")))
                .build()) {
            List<CompletionStage<Receipt>> stages = new SqsPublisher(unreachable)
                    .publishAll(List.of(
                            TestSqs.message(queue, "evt-1", "k1", "1"), TestSqs.message(queue, "evt-2", "k2", "2")));
            PublisherChecks.eachRetryable(stages, 2);
        }
    }
}
