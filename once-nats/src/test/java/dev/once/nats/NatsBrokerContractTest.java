package dev.once.nats;

import dev.once.IdempotentConsumer;
import dev.once.outbox.OutboxMessage;
import dev.once.testkit.broker.BrokerContract;
import io.nats.client.Connection;
import io.nats.client.PublishOptions;
import io.nats.client.api.PublishAck;
import io.nats.client.impl.Headers;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/** once-nats through the shared broker contract, on a memory stream per case. */
class NatsBrokerContractTest extends BrokerContract {

    private static final AtomicLong COPIES = new AtomicLong();
    private Connection connection;

    private synchronized Connection connection() {
        if (connection == null) {
            connection = TestNats.connect();
        }
        return connection;
    }

    @Override
    protected String createDestination(String name) throws Exception {
        TestNats.createStream(connection(), name);
        return name;
    }

    @Override
    protected void deleteDestination(String stream) throws Exception {
        TestNats.deleteStream(connection(), stream);
        connection.close();
    }

    @Override
    protected void publish(String stream, List<Event> events) throws Exception {
        NatsPublisher publisher = new NatsPublisher(connection());
        List<CompletableFuture<PublishAck>> copies = new ArrayList<>();
        for (Event e : events) {
            byte[] body = e.payload().getBytes(StandardCharsets.UTF_8);
            if (e.copy()) {
                // a copy the stream cannot deduplicate: a re-send after the duplicate window
                Headers h = new Headers().put(OutboxMessage.EVENT_ID_HEADER, e.eventId());
                copies.add(connection()
                        .jetStream()
                        .publishAsync(
                                stream,
                                h,
                                body,
                                PublishOptions.builder()
                                        .messageId(e.eventId() + "/copy-" + COPIES.incrementAndGet())
                                        .build()));
            } else if (events.size() > 100) {
                Headers h = new Headers().put(OutboxMessage.EVENT_ID_HEADER, e.eventId());
                copies.add(connection()
                        .jetStream()
                        .publishAsync(
                                stream,
                                h,
                                body,
                                PublishOptions.builder().messageId(e.eventId()).build()));
            } else {
                publisher.publish(TestNats.message(stream, e.eventId(), null, e.payload()));
            }
        }
        CompletableFuture.allOf(copies.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
    }

    @Override
    protected AutoCloseable startConsumer(String stream, IdempotentConsumer consumer, int batchSize) throws Exception {
        // A connection per consumer, closed first on restart: the batch in hand cannot be acked and
        // comes back after the ack wait, to be absorbed by the others.
        Connection own = TestNats.connect();
        NatsConsumer c = NatsConsumer.builder().connection(own).stream(stream)
                .durable(CONSUMER)
                .consumer(consumer)
                .batchSize(batchSize)
                .fetchWait(Duration.ofMillis(500))
                .ackWait(Duration.ofSeconds(3))
                .build()
                .start();
        return () -> {
            own.close();
            c.close();
        };
    }

    @Override
    protected boolean publisherDeduplicates() {
        return true;
    }

    @Override
    protected int batchSize() {
        return 50;
    }
}
