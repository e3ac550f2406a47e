package dev.once.rabbitmq;

import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.once.outbox.OutboxMessage;
import dev.once.testsupport.Services;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/** The RabbitMQ server on this machine (127.0.0.1:5672, guest/guest), or a skip saying how to start it. */
final class TestRabbit {

    private TestRabbit() {}

    static Connection connect() {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setHost(System.getenv().getOrDefault("ONCE_TEST_RABBITMQ_HOST", "127.0.0.1"));
        factory.setPort(5672);
        factory.setUsername("guest");
        factory.setPassword("guest");
        // recovery would re-register consumers on a new channel; the tests drop connections on purpose
        factory.setAutomaticRecoveryEnabled(false);
        try {
            return factory.newConnection("once-test");
        } catch (Exception e) {
            throw Services.unavailable("rabbitmq", "start RabbitMQ on 127.0.0.1:5672 (rabbitmq-server -detached)", e);
        }
    }

    /** A message as the outbox relay would hand it to the publisher: the event id is also its idempotency key. */
    static OutboxMessage message(String destination, String eventId, String key, String body) {
        return new OutboxMessage(
                0, eventId, destination, key, body.getBytes(StandardCharsets.UTF_8), Map.of(), eventId, 0, null);
    }
}
