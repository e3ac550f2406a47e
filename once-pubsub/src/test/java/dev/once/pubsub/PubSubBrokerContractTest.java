package dev.once.pubsub;

import com.google.api.core.ApiFuture;
import com.google.api.core.ApiFutures;
import com.google.cloud.pubsub.v1.Publisher;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.TopicName;
import dev.once.IdempotentConsumer;
import dev.once.testkit.broker.BrokerContract;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * once-pubsub through the shared broker contract, on Google's emulator: a topic and a
 * subscription (10 s ack deadline) per case, the permanent failures published to a dead-letter
 * topic of their own. The bulk case runs {@value #DEFAULT_EVENTS} events unless
 * {@code -Donce.pubsub.events=N} says otherwise (10,000 for the report).
 */
class PubSubBrokerContractTest extends BrokerContract {

    /**
     * 500 events + 50 copies proves what 2,000 did: copies absorbed, and four restarts that cut a
     * consumer's channel with messages in hand, whose redeliveries are absorbed (the emulator streams
     * everything to the open streams, so every cut strands many: a run here delivered 800 messages for
     * 550 published, 300 absorbed, 33 s). At 2,000 the case took 60-150 s, mostly processing.
     */
    static final int DEFAULT_EVENTS = 500;

    private Publisher deadLetters;

    @Override
    protected String createDestination(String name) {
        TopicName topic = TestPubSub.topic(name);
        TestPubSub.topic(name + "-dlq");
        TestPubSub.subscription(topic, name, s -> s);
        return name;
    }

    @Override
    protected void deleteDestination(String name) throws Exception {
        if (deadLetters != null) {
            deadLetters.shutdown();
            deadLetters.awaitTermination(30, TimeUnit.SECONDS);
        }
        TestPubSub.delete(TopicName.of(TestPubSub.PROJECT, name), ProjectSubscriptionName.of(TestPubSub.PROJECT, name));
        TestPubSub.topics().deleteTopic(TopicName.of(TestPubSub.PROJECT, name + "-dlq"));
    }

    @Override
    protected void publish(String name, List<Event> events) throws Exception {
        TopicName topic = TopicName.of(TestPubSub.PROJECT, name);
        if (events.size() == 1) {
            // through the outbox publisher, as a relay sends it
            try (PubSubPublisher publisher = TestPubSub.outboxPublisher()) {
                Event e = events.get(0);
                publisher.publish(OutboxRows.row(name, e.eventId(), null, e.payload()));
            }
            return;
        }
        // bulk: the client's batching publisher with the attribute PubSubMessages stamps
        Publisher publisher = TestPubSub.publisher(topic, false);
        try {
            List<ApiFuture<String>> sent = new ArrayList<>();
            for (Event e : events) {
                sent.add(publisher.publish(
                        PubSubMessages.message(e.eventId(), e.payload().getBytes(StandardCharsets.UTF_8))));
            }
            ApiFutures.allAsList(sent).get(2, TimeUnit.MINUTES);
        } finally {
            publisher.shutdown();
            publisher.awaitTermination(30, TimeUnit.SECONDS);
        }
    }

    @Override
    protected synchronized AutoCloseable startConsumer(String name, IdempotentConsumer consumer, int batchSize) {
        if (deadLetters == null) {
            deadLetters = TestPubSub.publisher(TopicName.of(TestPubSub.PROJECT, name + "-dlq"), false);
        }
        // A channel per consumer, cut first on restart: the batch in hand cannot be acked and
        // comes back after the ack deadline, to be absorbed by the others.
        TestPubSub.OwnChannel own = TestPubSub.newChannel(TestPubSub.host());
        PubSubConsumer c = TestPubSub.consumer(
                        ProjectSubscriptionName.of(TestPubSub.PROJECT, name), consumer, own.provider())
                .batchSize(batchSize)
                // The emulator streams every message to one subscriber's stream and ignores the
                // stream's flow control (Pub/Sub proper honours it): a second thread is what lets the
                // copy of an event run while the first delivery holds the claim.
                .threads(2)
                .ackDeadline(Duration.ofSeconds(10))
                .deadLetters(deadLetters)
                .build()
                .start();
        return () -> {
            own.cut();
            // Stopping a subscriber whose channel is gone waits out its shutdown timeout; nothing
            // of it can reach the emulator any more, so the case goes on without waiting.
            Thread closing = new Thread(c::close, "close-" + name);
            closing.setDaemon(true);
            closing.start();
        };
    }

    @Override
    protected Map<String, String> childEnvironment() {
        return TestPubSub.childEnvironment();
    }

    @Override
    protected int batchSize() {
        return 50;
    }

    @Override
    protected int manyEvents() {
        return Integer.getInteger("once.pubsub.events", DEFAULT_EVENTS);
    }
}
