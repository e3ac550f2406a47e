package dev.once.rabbitmq;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.once.IdempotentConsumer;
import dev.once.testkit.fault.FaultProxy;
import dev.once.testkit.fault.WireProtocol;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The client's automatic connection recovery (on by default) and the broker's own consumer
 * cancellation, against the real server: a TCP reset under a running consumer must not leave a
 * subscription that receives messages nobody processes, and a cancelled subscription must not
 * leave {@link RabbitConsumer#isRunning()} true.
 */
class RabbitRecoveryTest {

    private TestDatabase db;
    private Connection admin;
    private FaultProxy proxy;
    private String queue;

    @BeforeEach
    void setUp() throws Exception {
        admin = TestRabbit.connect();
        db = TestPostgres.shared().freshDatabase();
        db.execute(Effects.CREATE);
        queue = "once-test-" + System.nanoTime();
        try (Channel ch = admin.createChannel()) {
            ch.queueDeclare(queue, true, false, false, Map.of());
        }
        proxy = FaultProxy.start(new InetSocketAddress("127.0.0.1", 5672), WireProtocol.RAW);
    }

    @AfterEach
    void tearDown() throws Exception {
        proxy.close();
        try (Channel ch = admin.createChannel()) {
            ch.queueDelete(queue);
        } finally {
            admin.close();
            db.close();
        }
    }

    @Test
    void aTcpResetUnderAutomaticRecoveryKeepsTheConsumerWorkingNotAZombie() throws Exception {
        Connection recovering = recoveringConnection();
        try (RabbitConsumer c = RabbitConsumer.builder()
                .connection(recovering)
                .queue(queue)
                .consumer(engine())
                .build()
                .start()) {
            publish("evt-1");
            await().atMost(Duration.ofSeconds(30)).until(() -> effects() == 1);

            assertThat(proxy.reset()).as("connections reset").isPositive();
            await().atMost(Duration.ofSeconds(60)).until(() -> proxy.openConnections() > 0 && recovering.isOpen());
            for (int i = 2; i <= 6; i++) {
                publish("evt-" + i);
            }
            await().atMost(Duration.ofSeconds(60)).until(() -> effects() == 6);
            assertThat(c.isRunning())
                    .as("running across the client's recovery, failure: %s", c.failure())
                    .isTrue();
        } finally {
            recovering.abort();
        }
        assertThat(db.queryLong("SELECT count(DISTINCT event_id) FROM effect"))
                .as("all six applied exactly once")
                .isEqualTo(6);
        await().atMost(Duration.ofSeconds(30)).until(() -> readyAndUnacked() == 0);
    }

    @Test
    void aQueueDeletedUnderTheConsumerStopsItVisibly() throws Exception {
        Connection recovering = recoveringConnection();
        try (RabbitConsumer c = RabbitConsumer.builder()
                .connection(recovering)
                .queue(queue)
                .consumer(engine())
                .build()
                .start()) {
            publish("evt-1");
            await().atMost(Duration.ofSeconds(30)).until(() -> effects() == 1);
            try (Channel ch = admin.createChannel()) {
                ch.queueDelete(queue);
            }
            await("a subscription the broker cancelled is not reported as running")
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> !c.isRunning());
            assertThat(c.failure()).get().asString().contains("cancel").contains(queue);
        } finally {
            recovering.abort();
        }
    }

    /** As a user builds it: the client's defaults, so automatic recovery is on (every 5 s). */
    private Connection recoveringConnection() throws Exception {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setHost("127.0.0.1");
        factory.setPort(proxy.port());
        factory.setUsername("guest");
        factory.setPassword("guest");
        return factory.newConnection("once-recovery-test");
    }

    private IdempotentConsumer engine() {
        return IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("rabbit-recovery-test")
                .handler(Effects.HANDLER)
                .build();
    }

    private long effects() {
        return db.queryLong("SELECT count(*) FROM effect");
    }

    private void publish(String eventId) throws Exception {
        try (RabbitPublisher p = new RabbitPublisher(admin)) {
            p.publish(TestRabbit.message(queue, eventId, null, "1"));
        }
    }

    /** Ready plus unacknowledged messages, as the management view counts them, via a passive declare of a fresh channel. */
    private long readyAndUnacked() throws Exception {
        // messageCount is only the ready ones; with the consumer gone, unacked ones become ready again
        try (Channel ch = admin.createChannel()) {
            return ch.queueDeclarePassive(queue).getMessageCount();
        }
    }
}
