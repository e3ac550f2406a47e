package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.IdempotentConsumer;
import dev.once.outbox.Publisher;
import dev.once.testkit.broker.OutboxRelayContract;
import java.time.Duration;

/** The outbox relay with {@link SqsPublisher} into a FIFO queue, consumed by {@link SqsConsumer}. */
class SqsOutboxRelayTest extends OutboxRelayContract {

    @Override
    protected String createDestination(String name) {
        return TestSqs.createQueue(name + ".fifo", 2);
    }

    @Override
    protected void deleteDestination(String queueUrl) {
        TestSqs.deleteQueue(queueUrl);
    }

    @Override
    protected Publisher publisher() {
        return new SqsPublisher(TestSqs.client());
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
