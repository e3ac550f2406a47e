package dev.once.rabbitmq;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testkit.broker.Proxies;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** RabbitMQ-specific faults against the real server: a connection lost in the ack gap, delivery limits, dead-lettering. */
class RabbitConsumerTest {

    private TestDatabase db;
    private Connection admin;
    private String queue;
    private final List<Outcome> outcomes = new CopyOnWriteArrayList<>();
    private final List<Delivery> deliveries = new CopyOnWriteArrayList<>();

    @BeforeEach
    void setUp() {
        admin = TestRabbit.connect();
        db = TestPostgres.shared().freshDatabase();
        db.execute(Effects.CREATE);
        queue = "once-test-" + System.nanoTime();
    }

    @AfterEach
    void tearDown() throws Exception {
        try (Channel ch = admin.createChannel()) {
            ch.queueDelete(queue);
            ch.queueDelete(queue + "-dlq");
            ch.exchangeDelete(queue + "-dlx");
        } finally {
            admin.close();
            db.close();
        }
    }

    @Test
    void connectionDroppedAfterCommitBeforeAckIsRequeuedAndAbsorbed() throws Exception {
        declare(Map.of());
        Connection doomed = TestRabbit.connect();
        AtomicBoolean dropped = new AtomicBoolean();
        // the connection dies right after the commit returns, before the consumer can ack
        DataSource dropsConnection = Proxies.afterCommit(db.dataSource(), () -> {
            if (dropped.compareAndSet(false, true)) {
                doomed.abort();
            }
        });
        publish("evt-1", "1");
        try (RabbitConsumer first = RabbitConsumer.builder()
                .connection(doomed)
                .queue(queue)
                .consumer(recording(dropsConnection))
                .prefetch(10)
                .build()
                .start()) {
            await().atMost(Duration.ofSeconds(30)).until(() -> dropped.get() && !doomed.isOpen());
        }
        assertThat(db.queryLong("SELECT count(*) FROM effect"))
                .as("committed before the connection dropped")
                .isEqualTo(1);

        Connection second = TestRabbit.connect();
        try (RabbitConsumer c = RabbitConsumer.builder()
                .connection(second)
                .queue(queue)
                .consumer(recording(db.dataSource()))
                .build()
                .start()) {
            await().atMost(Duration.ofSeconds(30))
                    .until(() -> outcomes.stream().anyMatch(o -> o.status() == Status.DUPLICATE));
        } finally {
            second.close();
        }
        assertThat(deliveries).as("the requeued copy is flagged redelivered").anyMatch(Delivery::redelivered);
        assertThat(outcomes).extracting(Outcome::status).containsExactly(Status.APPLIED, Status.DUPLICATE);
        assertThat(db.queryLong("SELECT count(*) FROM effect"))
                .as("effect applied exactly once")
                .isEqualTo(1);
        assertThat(messagesIn(queue)).as("the redelivery was acked").isZero();
    }

    @Test
    void quorumQueueDeliveryLimitDeadLettersAMessageThatKeepsFailing() throws Exception {
        declare(Map.of("x-queue-type", "quorum", "x-delivery-limit", 2));
        publish("evt-1", "retry");
        publish("evt-2", "2");
        Connection connection = TestRabbit.connect();
        try (RabbitConsumer c = RabbitConsumer.builder()
                .connection(connection)
                .queue(queue)
                .consumer(recording(db.dataSource()))
                .build()
                .start()) {
            AtomicReference<GetResponse> dead = new AtomicReference<>();
            await().atMost(Duration.ofSeconds(60))
                    .until(() -> (dead.get() != null || dead.compareAndSet(null, get(queue + "-dlq")))
                            && dead.get() != null);
            assertThat(dead.get().getProps().getMessageId())
                    .as("the dead-lettered message")
                    .isEqualTo("evt-1");
        } finally {
            connection.close();
        }
        assertThat(deliveries)
                .filteredOn(d -> d.eventId().equals("evt-1"))
                .extracting(Delivery::attempt)
                .as("x-delivery-count reported as the attempt")
                .containsExactly(1, 2, 3);
        assertThat(db.queryLong("SELECT count(*) FROM effect WHERE event_id = 'evt-1'"))
                .isZero();
        assertThat(db.queryLong("SELECT count(*) FROM effect WHERE event_id = 'evt-2'"))
                .isEqualTo(1);
    }

    @Test
    void permanentFailureIsRejectedToTheDeadLetterExchangeAtOnce() throws Exception {
        declare(Map.of());
        publish("evt-1", "poison");
        publish("evt-2", "2");
        Connection connection = TestRabbit.connect();
        try (RabbitConsumer c = RabbitConsumer.builder()
                .connection(connection)
                .queue(queue)
                .consumer(recording(db.dataSource()))
                .build()
                .start()) {
            await().atMost(Duration.ofSeconds(30))
                    .until(() -> messagesIn(queue + "-dlq") == 1 && db.queryLong("SELECT count(*) FROM effect") == 1);
        } finally {
            connection.close();
        }
        assertThat(deliveries)
                .filteredOn(d -> d.eventId().equals("evt-1"))
                .as("not retried")
                .hasSize(1);
        assertThat(get(queue + "-dlq").getProps().getHeaders())
                .as("event id kept on the dead letter")
                .containsKey("once-event-id");
    }

    private void declare(Map<String, Object> arguments) throws Exception {
        try (Channel ch = admin.createChannel()) {
            ch.exchangeDeclare(queue + "-dlx", "fanout", true);
            ch.queueDeclare(queue + "-dlq", true, false, false, Map.of());
            ch.queueBind(queue + "-dlq", queue + "-dlx", "");
            Map<String, Object> args = new java.util.HashMap<>(arguments);
            args.put("x-dead-letter-exchange", queue + "-dlx");
            ch.queueDeclare(queue, true, false, false, args);
        }
    }

    private void publish(String eventId, String body) throws Exception {
        try (RabbitPublisher p = new RabbitPublisher(admin)) {
            p.publish(TestRabbit.message(queue, eventId, null, body));
        }
    }

    private long messagesIn(String q) throws Exception {
        try (Channel ch = admin.createChannel()) {
            return ch.messageCount(q);
        }
    }

    private GetResponse get(String q) throws Exception {
        try (Channel ch = admin.createChannel()) {
            return ch.basicGet(q, true);
        }
    }

    @Test
    void aBatchWhoseProcessingThrewIsRequeuedNotAcknowledgedByTheNextBatch() throws Exception {
        declare(Map.of());
        AtomicBoolean failed = new AtomicBoolean();
        // the first batch fails outside the handler (a broken pool, a bug): nothing is applied
        IdempotentConsumer failsOnce = recording(db.dataSource(), batch -> {
            if (failed.compareAndSet(false, true)) {
                throw new IllegalStateException("connection pool shut down");
            }
        });
        Connection connection = TestRabbit.connect();
        try (RabbitConsumer c = RabbitConsumer.builder()
                .connection(connection)
                .queue(queue)
                .consumer(failsOnce)
                .build()
                .start()) {
            publish("evt-1", "1");
            await().atMost(Duration.ofSeconds(30)).until(failed::get);
            for (int i = 2; i <= 6; i++) {
                publish("evt-" + i, Integer.toString(i));
            }
            await().atMost(Duration.ofSeconds(30)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 6);
            assertThat(c.failure()).as("a failed batch is requeued, not fatal").isEmpty();
        } finally {
            connection.close();
        }
        assertThat(db.queryLong("SELECT count(DISTINCT event_id) FROM effect"))
                .as("all six applied, none lost")
                .isEqualTo(6);
        assertThat(db.queryLong("SELECT count(*) FROM effect WHERE event_id = 'evt-1'"))
                .as("evt-1 applied once")
                .isEqualTo(1);
        assertThat(messagesIn(queue)).isZero();
    }

    @Test
    void anErrorInTheWorkerIsVisibleAndItsBatchGoesBackToTheQueue() throws Exception {
        declare(Map.of());
        IdempotentConsumer dies = recording(db.dataSource(), batch -> {
            throw new OutOfMemoryError("simulated");
        });
        Connection connection = TestRabbit.connect();
        try (RabbitConsumer c = RabbitConsumer.builder()
                .connection(connection)
                .queue(queue)
                .consumer(dies)
                .build()
                .start()) {
            publish("evt-1", "1");
            await().atMost(Duration.ofSeconds(30)).until(() -> c.failure().isPresent());
            assertThat(c.failure().get()).isInstanceOf(OutOfMemoryError.class);
            assertThat(c.isRunning())
                    .as("a dead worker is reported, not hidden")
                    .isFalse();
            await().atMost(Duration.ofSeconds(30)).until(() -> messagesIn(queue) == 1);
        } finally {
            connection.close();
        }
        Connection second = TestRabbit.connect();
        try (RabbitConsumer c = RabbitConsumer.builder()
                .connection(second)
                .queue(queue)
                .consumer(recording(db.dataSource()))
                .build()
                .start()) {
            await().atMost(Duration.ofSeconds(30)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 1);
            assertThat(c.isRunning()).isTrue();
        } finally {
            second.close();
        }
    }

    private IdempotentConsumer recording(DataSource ds) {
        return recording(ds, batch -> {});
    }

    private IdempotentConsumer recording(DataSource ds, java.util.function.Consumer<List<Delivery>> beforeBatch) {
        IdempotentConsumer engine = IdempotentConsumer.builder()
                .dataSource(ds)
                .consumer("rabbit-test")
                .handler(Effects.HANDLER)
                .build();
        return new IdempotentConsumer() {
            @Override
            public String consumer() {
                return engine.consumer();
            }

            @Override
            public Inbox inbox() {
                return engine.inbox();
            }

            @Override
            public Outcome process(Delivery d) {
                deliveries.add(d);
                Outcome o = engine.process(d);
                outcomes.add(o);
                return o;
            }

            @Override
            public List<Outcome> processBatch(List<Delivery> ds) {
                deliveries.addAll(ds);
                beforeBatch.accept(ds);
                List<Outcome> os = engine.processBatch(ds);
                outcomes.addAll(os);
                return os;
            }
        };
    }
}
