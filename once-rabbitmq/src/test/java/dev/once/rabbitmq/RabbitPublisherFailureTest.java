package dev.once.rabbitmq;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Receipt;
import dev.once.testkit.broker.PublisherChecks;
import dev.once.testkit.fault.FaultProxy;
import dev.once.testkit.fault.WireProtocol;
import dev.once.testsupport.OwnThreads;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * How {@link RabbitPublisher} maps what RabbitMQ answers to the publisher failure contract, each
 * message of a batch decided on its own.
 */
@ExtendWith(SkipWithoutRabbitMq.class)
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
        PublisherChecks.relayMovesARefusedRowToDead(publisher, missing, 312);
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

    @Test
    void anUnroutableMessageInABatchFailsAloneAndItsNeighboursAreConfirmed() throws Exception {
        List<CompletionStage<Receipt>> stages = publisher.publishAll(List.of(
                TestRabbit.message(queue, "evt-1", "k1", "1"),
                TestRabbit.message("once-no-queue-" + System.nanoTime(), "evt-2", "k2", "2"),
                TestRabbit.message(queue, "evt-3", "k3", "3")));
        assertConfirmed(stages.get(0));
        assertConfirmed(stages.get(2));
        assertRefused(stages.get(1), "evt-2", 312);
        assertThat(stored()).as("the neighbours are in the queue").isEqualTo(2);
    }

    /** A missing exchange closes the channel, naming no message: the rows without a confirm are tried alone. */
    @Test
    void aMissingExchangeInABatchFailsAloneAndItsNeighboursAreConfirmed() throws Exception {
        List<CompletionStage<Receipt>> stages = publisher.publishAll(List.of(
                TestRabbit.message(queue, "evt-1", "k1", "1"),
                TestRabbit.message("once-no-exchange-" + System.nanoTime() + "/k", "evt-2", "k2", "2"),
                TestRabbit.message(queue, "evt-3", "k3", "3"),
                TestRabbit.message(queue, "evt-4", "k4", "4")));
        assertConfirmed(stages.get(0));
        assertRefused(stages.get(1), "evt-2", 404);
        assertConfirmed(stages.get(2));
        assertConfirmed(stages.get(3));
        assertThat(stored())
                .as("every neighbour in the queue, some perhaps twice (sent again alone after the close)")
                .isGreaterThanOrEqualTo(3);
    }

    /**
     * Batches of two relays share the publisher, and its one channel: one's missing exchange
     * closes channel after channel while the other's rows go out, and each row must get its own verdict, the good ones
     * confirmed and the bad ones refused with 404, never the other's fault nor a confirm timeout
     * (a closed channel's shutdown listener runs late, on the connection's thread, after its
     * successor is open). A durable queue: its confirms wait for the disk, so rows are still
     * unconfirmed when a channel closes.
     */
    @Test
    void anotherRelaysRefusedBatchOnTheSharedChannelFailsNoneOfThisBatch() throws Exception {
        String missing = "once-no-exchange-" + System.nanoTime() + "/k";
        String durable = "once-test-durable-" + System.nanoTime();
        try (Channel ch = connection.createChannel()) {
            ch.queueDeclare(durable, true, false, false, Map.of());
        }
        // one channel, so both relays' batches go out on it (with more, they may go out on two)
        try (RabbitPublisher shared = new RabbitPublisher(connection, RabbitPublisher.DEFAULT_CONFIRM_TIMEOUT, 1)) {
            sharedChannelRounds(shared, missing, durable);
        } finally {
            try (Channel ch = connection.createChannel()) {
                ch.queueDelete(durable);
            }
        }
    }

    private static void sharedChannelRounds(RabbitPublisher publisher, String missing, String queue) throws Exception {
        for (int round = 0; round < 5; round++) {
            List<OutboxMessage> good = new ArrayList<>();
            List<OutboxMessage> bad = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                good.add(TestRabbit.message(queue, "good-" + round + "-" + i, "g" + i, "1"));
                bad.add(TestRabbit.message(missing, "bad-" + round + "-" + i, "b" + i, "1"));
            }
            CompletableFuture<List<CompletionStage<Receipt>>> refused =
                    CompletableFuture.supplyAsync(() -> publisher.publishAll(bad), OwnThreads.each());
            List<CompletionStage<Receipt>> stages = publisher.publishAll(good);
            for (CompletionStage<Receipt> stage : stages) {
                assertConfirmed(stage);
            }
            for (CompletionStage<Receipt> stage : refused.get(1, TimeUnit.MINUTES)) {
                assertThatThrownBy(() -> stage.toCompletableFuture().join())
                        .cause()
                        .isInstanceOfSatisfying(
                                PublishFailure.class,
                                f -> assertThat(f.receipt().status()).isEqualTo(404));
            }
        }
    }

    /**
     * A broker gone silent (the link frozen: publishes go out, no confirm comes back): every row of
     * the batch fails retryable once the confirm timeout has passed, none waits longer.
     */
    @Test
    void aBatchTheBrokerNeverConfirmsFailsRetryableAtTheConfirmTimeout() throws Exception {
        String open = "once-test-silent-" + System.nanoTime();
        try (Channel ch = connection.createChannel()) {
            ch.queueDeclare(open, false, false, true, Map.of());
        }
        try (FaultProxy proxy = FaultProxy.start(new InetSocketAddress("127.0.0.1", 5672), WireProtocol.RAW)) {
            ConnectionFactory factory = new ConnectionFactory();
            factory.setHost("127.0.0.1");
            factory.setPort(proxy.port());
            factory.setUsername("guest");
            factory.setPassword("guest");
            factory.setAutomaticRecoveryEnabled(false);
            Connection through = factory.newConnection("once-test-silent");
            try (RabbitPublisher silent = new RabbitPublisher(through, Duration.ofMillis(500), 1)) {
                assertConfirmed(silent.publishAll(List.of(TestRabbit.message(open, "evt-0", "k", "0")))
                        .get(0));
                proxy.freeze();
                List<OutboxMessage> batch = new ArrayList<>();
                for (int i = 1; i <= 50; i++) {
                    batch.add(TestRabbit.message(open, "evt-" + i, "k" + i, "1"));
                }
                for (CompletionStage<Receipt> stage : silent.publishAll(batch)) {
                    assertThatThrownBy(() -> stage.toCompletableFuture().get(10, TimeUnit.SECONDS))
                            .cause()
                            .isInstanceOfSatisfying(
                                    PublishFailure.class,
                                    f -> assertThat(f.retryable()).isTrue())
                            .hasMessageContaining("no confirm for")
                            .hasMessageContaining("within PT0.5S");
                }
                proxy.thaw();
            } finally {
                through.abort();
            }
        } finally {
            try (Channel ch = connection.createChannel()) {
                ch.queueDelete(open);
            }
        }
    }

    @Test
    void aLostConnectionIsRetryableForEveryMessageOfABatch() {
        connection.abort();
        List<CompletionStage<Receipt>> stages = publisher.publishAll(
                List.of(TestRabbit.message(queue, "evt-1", "k1", "1"), TestRabbit.message(queue, "evt-2", "k2", "2")));
        PublisherChecks.eachRetryable(stages, 2);
    }

    private static void assertConfirmed(CompletionStage<Receipt> stage) throws Exception {
        assertThat(stage.toCompletableFuture().get(30, TimeUnit.SECONDS).body()).startsWith("confirmed seq=");
    }

    private static void assertRefused(CompletionStage<Receipt> stage, String eventId, int replyCode) {
        assertThatThrownBy(() -> stage.toCompletableFuture().get(30, TimeUnit.SECONDS))
                .cause()
                .isInstanceOfSatisfying(PublishFailure.class, f -> {
                    assertThat(f.retryable()).isFalse();
                    assertThat(f.receipt().status()).isEqualTo(replyCode);
                })
                .hasMessageContaining("event " + eventId);
    }

    private long stored() throws Exception {
        try (Channel ch = connection.createChannel()) {
            return ch.messageCount(queue);
        }
    }
}
