package dev.once.rabbitmq;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.once.IdempotentConsumer;
import dev.once.outbox.OutboxMessage;
import dev.once.testkit.broker.BrokerContract;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

/** once-rabbitmq through the shared broker contract, on a durable classic queue. */
class RabbitBrokerContractTest extends BrokerContract {

    private Connection connection;

    private synchronized Connection connection() {
        if (connection == null || !connection.isOpen()) {
            connection = TestRabbit.connect();
        }
        return connection;
    }

    @Override
    protected String createDestination(String name) throws Exception {
        try (Channel ch = connection().createChannel()) {
            ch.queueDeclare(name, true, false, false, Map.of());
        }
        return name;
    }

    @Override
    protected void deleteDestination(String queue) throws Exception {
        try (Channel ch = connection().createChannel()) {
            ch.queueDelete(queue);
        }
        connection.close();
    }

    @Override
    protected void publish(String queue, List<Event> events) throws Exception {
        if (events.size() < 100) {
            try (RabbitPublisher publisher = new RabbitPublisher(connection())) {
                for (Event e : events) {
                    publisher.publish(TestRabbit.message(queue, e.eventId(), null, e.payload()));
                }
            }
            return;
        }
        // bulk: the same properties the publisher sets, one confirm wait for all
        try (Channel ch = connection().createChannel()) {
            ch.confirmSelect();
            for (Event e : events) {
                ch.basicPublish(
                        "",
                        queue,
                        new AMQP.BasicProperties.Builder()
                                .messageId(e.eventId())
                                .headers(Map.of(OutboxMessage.EVENT_ID_HEADER, e.eventId()))
                                .deliveryMode(2)
                                .build(),
                        e.payload().getBytes(StandardCharsets.UTF_8));
            }
            if (!ch.waitForConfirms(60_000)) {
                throw new IOException("broker nacked part of the bulk publish");
            }
        }
    }

    @Override
    protected AutoCloseable startConsumer(String queue, IdempotentConsumer consumer, int batchSize) throws Exception {
        // A connection per consumer, and a restart aborts it (no clean close, no last acks): the
        // broker requeues whatever that consumer held, committed or not, and the others absorb it.
        Connection own = TestRabbit.connect();
        RabbitConsumer c = RabbitConsumer.builder()
                .connection(own)
                .queue(queue)
                .consumer(consumer)
                .prefetch(batchSize)
                .build()
                .start();
        return () -> {
            own.abort();
            c.close();
        };
    }

    @Override
    protected int batchSize() {
        return 50;
    }
}
