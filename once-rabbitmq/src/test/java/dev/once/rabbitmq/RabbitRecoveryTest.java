package dev.once.rabbitmq;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.tuple;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.Recoverable;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testkit.broker.Proxies;
import dev.once.testkit.fault.FaultProxy;
import dev.once.testkit.fault.WireProtocol;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.lang.reflect.Proxy;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The client's automatic connection recovery (on by default) and the broker's own consumer
 * cancellation, against the real server: a TCP reset under a running consumer must not leave a
 * subscription that receives messages nobody processes, and a cancelled subscription must not
 * leave {@link RabbitConsumer#isRunning()} true.
 */
@ExtendWith(SkipWithoutRabbitMq.class)
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

    /**
     * The link reset after the commit, before the ack: the consumer's settlement fails on a channel
     * the client's recovery reopens. Aborting that channel (as once done) made the client forget it:
     * the subscription was never restored and the consumer consumed nothing more.
     */
    @Test
    void aTcpResetBetweenCommitAndAckIsRecoveredAndTheConsumerGoesOn() throws Exception {
        Connection recovering = recoveringConnection();
        List<Channel> opened = new CopyOnWriteArrayList<>();
        AtomicBoolean armed = new AtomicBoolean(true);
        // the link dies right after the first commit; the ack goes to a channel already closed by it
        DataSource resetsAfterCommit = Proxies.afterCommit(db.dataSource(), () -> {
            if (armed.compareAndSet(true, false)) {
                assertThat(proxy.reset()).as("connections reset").isPositive();
                await().atMost(Duration.ofSeconds(30))
                        .until(() -> opened.stream().noneMatch(Channel::isOpen));
            }
        });
        List<Outcome> outcomes = new CopyOnWriteArrayList<>();
        IdempotentConsumer engine = IdempotentConsumer.builder()
                .dataSource(resetsAfterCommit)
                .consumer("rabbit-recovery-test")
                .handler(Effects.HANDLER)
                .outcomeListener((d, o) -> outcomes.add(o))
                .build();
        try (RabbitConsumer c = RabbitConsumer.builder()
                .connection(openedChannels(recovering, opened))
                .queue(queue)
                .consumer(engine)
                .build()
                .start()) {
            publish("evt-1");
            await("the unacknowledged evt-1 redelivered and absorbed, or the consumer stopped")
                    .atMost(Duration.ofSeconds(60))
                    .until(() -> !c.isRunning() || outcomes.stream().anyMatch(o -> o.status() == Status.DUPLICATE));
            for (int i = 2; i <= 5; i++) {
                publish("evt-" + i);
            }
            await("evt-2 to evt-5 applied, or the consumer stopped")
                    .atMost(Duration.ofSeconds(60))
                    .until(() -> !c.isRunning() || effects() == 5);
            assertThat(c.isRunning())
                    .as("running across the reset in the ack gap, failure: %s", c.failure())
                    .isTrue();
            assertThat(outcomes)
                    .extracting(Outcome::eventId, Outcome::status)
                    .as("evt-1 applied, its redelivery a duplicate, the rest applied")
                    .containsExactlyInAnyOrder(
                            tuple("evt-1", Status.APPLIED),
                            tuple("evt-1", Status.DUPLICATE),
                            tuple("evt-2", Status.APPLIED),
                            tuple("evt-3", Status.APPLIED),
                            tuple("evt-4", Status.APPLIED),
                            tuple("evt-5", Status.APPLIED));
            await("every message acked").atMost(Duration.ofSeconds(30)).until(() -> readyAndUnacked() == 0);
        } finally {
            recovering.abort();
        }
        assertThat(db.queryLong("SELECT count(DISTINCT event_id) FROM effect"))
                .as("all five applied")
                .isEqualTo(5);
        assertThat(effects()).as("each exactly once").isEqualTo(5);
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

    /** {@code c}, adding every channel it opens to {@code opened}. */
    private static Connection openedChannels(Connection c, List<Channel> opened) {
        return (Connection) Proxy.newProxyInstance(
                RabbitRecoveryTest.class.getClassLoader(),
                new Class<?>[] {Connection.class, Recoverable.class},
                (p, m, args) -> {
                    Object r = Proxies.invoke(m, c, args);
                    if (r instanceof Channel ch) {
                        opened.add(ch);
                    }
                    return r;
                });
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
