package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.api.gax.core.NoCredentialsProvider;
import com.google.api.gax.grpc.GrpcTransportChannel;
import com.google.api.gax.rpc.FixedTransportChannelProvider;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.PullRequest;
import com.google.pubsub.v1.PullResponse;
import com.google.pubsub.v1.ReceivedMessage;
import com.google.pubsub.v1.TopicName;
import dev.once.IdempotentConsumer;
import dev.once.outbox.Publisher;
import dev.once.testkit.broker.OutboxRelayContract;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.SkipWithoutPubSub;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The outbox relay with {@link PubSubPublisher} into a topic, consumed by {@link PubSubConsumer};
 * a second subscription on the topic counts what was stored.
 */
@ExtendWith(SkipWithoutPubSub.class)
class PubSubOutboxRelayTest extends OutboxRelayContract {

    private PubSubPublisher publisher;
    private PubSubPublisher unreachable;
    private ManagedChannel nowhere;

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
        if (unreachable != null) {
            // The client's close waits for the publish it still retries (about 20 s here, after the
            // relay gave it up at its send timeout): let it end on its own, the case is decided.
            nowhere.shutdownNow();
            CompletableFuture.runAsync(unreachable::close, OwnThreads.each());
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
    protected Refused refusedRow(String name) {
        return new Refused("no-topic-" + System.nanoTime(), "1".getBytes(StandardCharsets.UTF_8), 404); // NOT_FOUND
    }

    @Override
    protected Publisher unreachablePublisher() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort(); // closed again: nothing listens there
        }
        nowhere = ManagedChannelBuilder.forAddress("127.0.0.1", port)
                .usePlaintext()
                .build();
        unreachable = PubSubPublisher.builder()
                .project(TestPubSub.PROJECT)
                .channelProvider(FixedTransportChannelProvider.create(GrpcTransportChannel.create(nowhere)))
                .credentialsProvider(NoCredentialsProvider.create())
                .build();
        return unreachable;
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
