package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.IdempotentConsumer;
import dev.once.outbox.Publisher;
import dev.once.testkit.broker.OutboxRelayContract;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;

/** The outbox relay with {@link SqsPublisher} into a FIFO queue, consumed by {@link SqsConsumer}. */
class SqsOutboxRelayTest extends OutboxRelayContract {

    private SqsClient unreachable;

    @Override
    protected String createDestination(String name) {
        return TestSqs.createQueue(name + ".fifo", 2);
    }

    @Override
    protected void deleteDestination(String queueUrl) {
        try {
            TestSqs.deleteQueue(queueUrl);
        } finally {
            if (unreachable != null) {
                unreachable.close();
            }
        }
    }

    @Override
    protected Publisher publisher() {
        return new SqsPublisher(TestSqs.client());
    }

    @Override
    protected Refused refusedRow(String queueUrl) {
        return new Refused("no-such-queue-" + System.nanoTime(), "1".getBytes(StandardCharsets.UTF_8), 400);
    }

    @Override
    protected Publisher unreachablePublisher() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort(); // closed again: nothing listens there
        }
        unreachable = SqsClient.builder()
                .endpointOverride(URI.create("http://127.0.0.1:" + port))
                .region(Region.US_EAST_1)
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("x", "x")))
                .build();
        return new SqsPublisher(unreachable);
    }

    @Override
    protected AutoCloseable startConsumer(String queueUrl, IdempotentConsumer consumer) {
        return SqsConsumer.builder()
                .client(TestSqs.client())
                .queueUrl(queueUrl)
                .consumer(consumer)
                .maxMessages(10)
                .waitTime(Duration.ofSeconds(1))
                .visibilityTimeout(Duration.ofSeconds(2))
                .build()
                .start();
    }

    @Override
    protected long messagesStored(String queueUrl) {
        return TestSqs.messagesStored(queueUrl);
    }

    @Override
    protected boolean brokerDeduplicates() {
        return true; // MessageDeduplicationId = the row's idempotency key
    }

    @Override
    protected void checkReceipts(String firstSend, String reSend) {
        // The relay sends through SendMessageBatch, whose answer carries the FIFO sequence number on
        // SQS but not on ElasticMQ (SqsFifoTest checks it on the single send).
        assertThat(firstSend)
                .as("SQS's message id and FIFO sequence number")
                .matches("messageId=\\S+( sequenceNumber=\\d+)?");
        assertThat(reSend).as("a deduplicated send is answered like the first").isEqualTo(firstSend);
    }
}
