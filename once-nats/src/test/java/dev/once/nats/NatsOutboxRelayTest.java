package dev.once.nats;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.IdempotentConsumer;
import dev.once.outbox.Publisher;
import dev.once.testkit.broker.OutboxRelayContract;
import io.nats.client.Connection;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.extension.ExtendWith;

/** The outbox relay with {@link NatsPublisher} into a JetStream stream, consumed by {@link NatsConsumer}. */
@ExtendWith(SkipWithoutNats.class)
class NatsOutboxRelayTest extends OutboxRelayContract {

    private Connection connection;
    private Connection lost;

    @Override
    protected String createDestination(String name) throws Exception {
        connection = TestNats.connect();
        TestNats.createStream(connection, name);
        return name;
    }

    @Override
    protected void deleteDestination(String stream) throws Exception {
        try {
            TestNats.deleteStream(connection, stream);
        } finally {
            connection.close();
            if (lost != null) {
                lost.close();
            }
        }
    }

    @Override
    protected Publisher publisher() throws Exception {
        return new NatsPublisher(connection);
    }

    @Override
    protected Refused refusedRow(String stream) {
        return new Refused("once-no-stream-" + System.nanoTime(), "1".getBytes(StandardCharsets.UTF_8), null);
    }

    @Override
    protected Publisher unreachablePublisher() throws Exception {
        lost = TestNats.connect();
        NatsPublisher publisher = new NatsPublisher(lost);
        lost.close();
        return publisher;
    }

    @Override
    protected AutoCloseable startConsumer(String stream, IdempotentConsumer consumer) throws Exception {
        return NatsConsumer.builder().connection(connection).stream(stream)
                .durable("billing")
                .consumer(consumer)
                .batchSize(10)
                .fetchWait(Duration.ofMillis(300))
                .ackWait(Duration.ofSeconds(2))
                .build()
                .start();
    }

    @Override
    protected long messagesStored(String stream) throws Exception {
        return connection
                .jetStreamManagement()
                .getStreamInfo(stream)
                .getStreamState()
                .getMsgCount();
    }

    @Override
    protected boolean brokerDeduplicates() {
        return true; // Nats-Msg-Id = the row's idempotency key
    }

    @Override
    protected void checkReceipts(String firstSend, String reSend) {
        assertThat(firstSend).as("the stream sequence that stored it").matches("stream=\\S+ seq=\\d+ duplicate=false");
        assertThat(reSend)
                .as("the stream's duplicate ack names the first message's sequence")
                .isEqualTo(firstSend.replace("duplicate=false", "duplicate=true"));
    }
}
