package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.PullRequest;
import com.google.pubsub.v1.PullResponse;
import com.google.pubsub.v1.ReceivedMessage;
import com.google.pubsub.v1.TopicName;
import dev.once.IdempotentConsumer;
import dev.once.outbox.Publisher;
import dev.once.testkit.broker.OutboxRelayContract;
import java.util.List;

/**
 * The outbox relay with {@link PubSubPublisher} into a topic, consumed by {@link PubSubConsumer};
 * a second subscription on the topic counts what was stored.
 */
class PubSubOutboxRelayTest extends OutboxRelayContract {

    private PubSubPublisher publisher;

    @Override
    protected String createDestination(String name) {
        TopicName topic = TestPubSub.topic(name);
        TestPubSub.subscription(topic, name, s -> s);
        TestPubSub.subscription(topic, name + "-count", s -> s);
        return name;
    }

    @Override
    protected void deleteDestination(String name) {
        if (publisher != null) {
            publisher.close();
        }
        TestPubSub.delete(
                TopicName.of(TestPubSub.PROJECT, name),
                ProjectSubscriptionName.of(TestPubSub.PROJECT, name),
                ProjectSubscriptionName.of(TestPubSub.PROJECT, name + "-count"));
    }

    @Override
    protected Publisher publisher() {
        publisher = TestPubSub.outboxPublisher();
        return publisher;
    }

    @Override
    protected AutoCloseable startConsumer(String name, IdempotentConsumer consumer) {
        return TestPubSub.consumer(ProjectSubscriptionName.of(TestPubSub.PROJECT, name), consumer, null)
                .batchSize(10)
                .build()
                .start();
    }

    /** Drains the counting subscription: every message published since it was created, acked as counted. */
    @Override
    @SuppressWarnings("deprecation") // returnImmediately: a pull that answers "nothing left" instead of waiting
    protected long messagesStored(String name) {
        String counting =
                ProjectSubscriptionName.of(TestPubSub.PROJECT, name + "-count").toString();
        long count = 0;
        int empty = 0;
        while (empty < 3) {
            PullResponse r = TestPubSub.subscriptions()
                    .pull(PullRequest.newBuilder()
                            .setSubscription(counting)
                            .setMaxMessages(1000)
                            .setReturnImmediately(true)
                            .build());
            List<String> ackIds = r.getReceivedMessagesList().stream()
                    .map(ReceivedMessage::getAckId)
                    .toList();
            if (ackIds.isEmpty()) {
                empty++;
                continue;
            }
            empty = 0;
            count += ackIds.size();
            TestPubSub.subscriptions().acknowledge(counting, ackIds);
        }
        return count;
    }

    @Override
    protected boolean brokerDeduplicates() {
        return false; // Pub/Sub has no publish-side deduplication: the inbox absorbs the re-send
    }

    @Override
    protected void checkReceipts(String firstSend, String reSend) {
        assertThat(firstSend).as("the topic and the server's message id").matches("topic=\\S+ messageId=\\S+");
        assertThat(reSend).as("a re-send is a new message").isNotEqualTo(firstSend);
    }
}
