package dev.once.sqs;

import dev.once.IdempotentConsumer;
import dev.once.testkit.broker.BrokerContract;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchRequestEntry;

/** once-sqs through the shared broker contract, on a standard queue with a dead-letter queue. */
class SqsBrokerContractTest extends BrokerContract {

    private static final int VISIBILITY_SECONDS = 2;

    @Override
    protected String createDestination(String name) {
        TestSqs.createQueue(name + "-dlq", VISIBILITY_SECONDS);
        return TestSqs.createQueue(name, VISIBILITY_SECONDS);
    }

    @Override
    protected void deleteDestination(String queueUrl) {
        TestSqs.deleteQueue(queueUrl);
        TestSqs.deleteQueue(queueUrl + "-dlq");
    }

    @Override
    protected void publish(String queueUrl, List<Event> events) {
        SqsPublisher publisher = new SqsPublisher(TestSqs.client());
        if (events.size() == 1) {
            Event e = events.get(0);
            publisher.publish(TestSqs.message(queueUrl, e.eventId(), null, e.payload()));
            return;
        }
        // bulk: the same attribute the publisher writes, ten messages per request
        for (int from = 0; from < events.size(); from += 10) {
            List<SendMessageBatchRequestEntry> entries = new ArrayList<>();
            for (int i = from; i < Math.min(from + 10, events.size()); i++) {
                Event e = events.get(i);
                entries.add(SendMessageBatchRequestEntry.builder()
                        .id(Integer.toString(i))
                        .messageBody(e.payload())
                        .messageAttributes(Map.of(
                                SqsDeliveries.DEFAULT_EVENT_ID_ATTRIBUTE,
                                MessageAttributeValue.builder()
                                        .dataType("String")
                                        .stringValue(e.eventId())
                                        .build()))
                        .build());
            }
            TestSqs.client().sendMessageBatch(r -> r.queueUrl(queueUrl).entries(entries));
        }
    }

    @Override
    protected AutoCloseable startConsumer(String queueUrl, IdempotentConsumer consumer, int batchSize) {
        // A client per consumer, closed first on restart: the batches in hand cannot be deleted
        // and come back after the visibility timeout, to be absorbed by the others.
        SqsClient own = TestSqs.newClient();
        SqsConsumer c = SqsConsumer.builder()
                .client(own)
                .queueUrl(queueUrl)
                .consumer(consumer)
                .maxMessages(batchSize)
                .concurrency(2)
                .waitTime(Duration.ofSeconds(1))
                .visibilityTimeout(Duration.ofSeconds(VISIBILITY_SECONDS))
                .deadLetterQueueUrl(queueUrl + "-dlq")
                .build()
                .start();
        return () -> {
            own.close();
            c.close();
        };
    }

    @Override
    protected Map<String, String> childEnvironment() {
        return TestSqs.childEnvironment();
    }
}
