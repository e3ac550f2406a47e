package dev.once.rabbitmq;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.PublishFailure;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** How {@link RabbitPublisher} maps what RabbitMQ answers to the publisher failure contract. */
class RabbitPublisherFailureTest {

    private Connection connection;
    private RabbitPublisher publisher;
    private String queue;

    @BeforeEach
    void setUp() throws Exception {
        connection = TestRabbit.connect();
        publisher = new RabbitPublisher(connection);
        queue = "once-test-" + System.nanoTime();
        try (Channel ch = connection.createChannel()) {
            ch.queueDeclare(queue, false, true, false, Map.of()); // exclusive: gone with the connection
        }
    }

    @AfterEach
    void tearDown() throws Exception {
        if (connection.isOpen()) {
            publisher.close();
            connection.close();
        }
    }

    @Test
    void aQueueThatDoesNotExistIsPermanentAndTheRelayMovesTheRowToDead() throws Exception {
        String missing = "once-no-queue-" + System.nanoTime();
        assertThatThrownBy(() -> publisher.publish(TestRabbit.message(missing, "evt-1", null, "1")))
                .as("unroutable")
                .isInstanceOfSatisfying(PublishFailure.class, f -> {
                    assertThat(f.retryable()).isFalse();
                    assertThat(f.receipt().status()).isEqualTo(312);
                });
        assertThat(publisher
                        .publish(TestRabbit.message(queue, "evt-2", null, "2"))
                        .body())
                .startsWith("confirmed");
        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("orders")
                    .handler((d, tx) -> tx.outbox().add(missing, null, new byte[] {'1'}, Map.of(), null))
                    .build()
                    .process(Delivery.builder("order-1").build());
            OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(db.dataSource())
                    .publisher(publisher)
                    .meterRegistry(new SimpleMeterRegistry())
                    .build();
            assertThat(relay.relayOnce()).isEqualTo(1);
            assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'dead' AND attempts = 1"
                            + " AND response_status = 312"))
                    .as("dead after one attempt, the reply code recorded")
                    .isEqualTo(1);
        }
    }

    @Test
    void anExchangeThatDoesNotExistIsPermanentAndThePublisherRecoversItsChannel() throws Exception {
        assertThatThrownBy(() -> publisher.publish(
                        TestRabbit.message("once-no-exchange-" + System.nanoTime() + "/k", "evt-1", null, "1")))
                .isInstanceOfSatisfying(PublishFailure.class, f -> {
                    assertThat(f.retryable()).isFalse();
                    assertThat(f.receipt().status()).isEqualTo(404);
                });
        assertThat(publisher
                        .publish(TestRabbit.message(queue, "evt-2", null, "2"))
                        .body())
                .as("the next publish goes out on a new channel")
                .startsWith("confirmed");
    }

    @Test
    void aLostConnectionIsRetryable() {
        connection.abort();
        assertThatThrownBy(() -> publisher.publish(TestRabbit.message(queue, "evt-1", null, "1")))
                .isInstanceOfSatisfying(
                        PublishFailure.class, f -> assertThat(f.retryable()).isTrue());
    }
}
