package dev.once.rabbitmq;

import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.once.IdempotentConsumer;
import dev.once.outbox.Publisher;
import dev.once.testkit.broker.OutboxRelayContract;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.extension.ExtendWith;

/** The outbox relay with {@link RabbitPublisher} into a durable queue, consumed by {@link RabbitConsumer}. */
@ExtendWith(SkipWithoutRabbitMq.class)
class RabbitOutboxRelayTest extends OutboxRelayContract {

    private Connection connection;
    private RabbitPublisher publisher;
    private Connection lost;

    @Override
    protected String createDestination(String name) throws Exception {
        connection = TestRabbit.connect();
        try (Channel ch = connection.createChannel()) {
            ch.queueDeclare(name, true, false, false, Map.of());
        }
        return name;
    }

    @Override
    protected void deleteDestination(String queue) throws Exception {
        try (Channel ch = connection.createChannel()) {
            ch.queueDelete(queue);
        } finally {
            if (publisher != null) {
                publisher.close();
            }
            connection.close();
            if (lost != null) {
                lost.abort();
            }
        }
    }

    @Override
    protected Publisher publisher() throws Exception {
        publisher = new RabbitPublisher(connection);
        return publisher;
    }

    @Override
    protected Refused refusedRow(String queue) {
        // the default exchange, a routing key no queue has: unroutable, AMQP reply code 312
        return new Refused("once-no-queue-" + System.nanoTime(), "1".getBytes(StandardCharsets.UTF_8), 312);
    }

    @Override
    protected Publisher unreachablePublisher() throws Exception {
        lost = TestRabbit.connect();
        RabbitPublisher unreachable = new RabbitPublisher(lost);
        lost.abort();
        return unreachable;
    }

    @Override
    protected AutoCloseable startConsumer(String queue, IdempotentConsumer consumer) throws Exception {
        return RabbitConsumer.builder()
                .connection(connection)
                .queue(queue)
                .consumer(consumer)
                .prefetch(10)
                .build()
                .start();
    }

    @Override
    protected long messagesStored(String queue) throws Exception {
        try (Channel ch = connection.createChannel()) {
            return ch.messageCount(queue);
        }
    }

    @Override
    protected boolean brokerDeduplicates() {
        return false; // RabbitMQ has no deduplication: the receiving inbox absorbs the re-send
    }

    @Override
    protected void checkReceipts(String firstSend, String reSend) {
        assertThat(firstSend)
                .as("the confirmed publish sequence number and its channel")
                .matches("confirmed seq=\\d+ channel=\\d+");
        assertThat(reSend).matches("confirmed seq=\\d+ channel=\\d+").isNotEqualTo(firstSend);
    }
}
