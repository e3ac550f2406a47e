package dev.once.rabbitmq;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Retryable failures on RabbitMQ are spaced by the consumer's {@link RetryPolicy}, so a broker's
 * delivery limit counts spaced tries: a downstream that is down for 3 s neither loses nor
 * dead-letters healthy messages, a classic queue is not flooded with redeliveries, and a message
 * that keeps failing retryably is dead-lettered in the end.
 */
@ExtendWith(SkipWithoutRabbitMq.class)
class RabbitRetrySpacingTest {

    private static final Duration OUTAGE = Duration.ofSeconds(3);

    private TestDatabase db;
    private Connection admin;
    private Connection connection;
    private String queue;
    private final Map<String, AtomicInteger> tries = new ConcurrentHashMap<>();
    private final AtomicLong downUntil = new AtomicLong();

    @BeforeEach
    void setUp() {
        admin = TestRabbit.connect();
        connection = TestRabbit.connect();
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
            connection.close();
            admin.close();
            db.close();
        }
    }

    @Test
    void aThreeSecondOutageOnAQuorumQueueWithDeliveryLimitFiveNeitherLosesNorDeadLetters() throws Exception {
        declare(Map.of("x-queue-type", "quorum", "x-delivery-limit", 5));
        for (int i = 1; i <= 5; i++) {
            publish("evt-" + i, Integer.toString(i));
        }
        try (RabbitConsumer c = consumer(downstreamDownFor(OUTAGE)).build().start()) {
            await().atMost(Duration.ofSeconds(90)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 5);
        }
        assertThat(messagesIn(queue + "-dlq"))
                .as("nothing was wrong with the messages: none dead-lettered")
                .isZero();
        assertThat(db.queryLong("SELECT count(DISTINCT event_id) FROM effect"))
                .as("all five applied exactly once after the outage")
                .isEqualTo(5);
        assertThat(tries.get("evt-1").get())
                .as("tries of evt-1 within the delivery limit, spaced by the retry policy")
                .isBetween(2, 5);
    }

    @Test
    void aThreeSecondOutageOnAClassicQueueIsRetriedAFewTimesNotThousands() throws Exception {
        declare(Map.of());
        for (int i = 1; i <= 5; i++) {
            publish("evt-" + i, Integer.toString(i));
        }
        try (RabbitConsumer c = consumer(downstreamDownFor(OUTAGE)).build().start()) {
            await().atMost(Duration.ofSeconds(90)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 5);
        }
        int total = tries.values().stream().mapToInt(AtomicInteger::get).sum();
        System.out.printf("classic queue, %s outage: %d tries for 5 messages%n", OUTAGE, total);
        assertThat(total)
                .as("tries of 5 messages across a %s outage with the default retry policy", OUTAGE)
                .isLessThanOrEqualTo(5 * 6);
        assertThat(messagesIn(queue + "-dlq")).isZero();
    }

    @Test
    void aMessageThatKeepsFailingRetryablyOnAClassicQueueIsDeadLetteredAfterTheLastRetry() throws Exception {
        declare(Map.of());
        publish("evt-1", "retry");
        publish("evt-2", "2");
        RetryPolicy three = RetryPolicy.builder()
                .initialDelay(Duration.ofMillis(50))
                .maxDelay(Duration.ofMillis(200))
                .maxRetries(3)
                .build();
        try (RabbitConsumer c = consumer(Effects.HANDLER)
                .retries(three)
                .deadLetterAfterRetries()
                .build()
                .start()) {
            await().atMost(Duration.ofSeconds(60)).until(() -> messagesIn(queue + "-dlq") == 1);
            assertThat(c.isRunning()).isTrue();
        }
        assertThat(tries.get("evt-1").get())
                .as("the first try and the policy's three retries")
                .isEqualTo(4);
        assertThat(db.queryLong("SELECT count(*) FROM effect WHERE event_id = 'evt-2'"))
                .isEqualTo(1);
    }

    @Test
    void anOutageLongerThanTheRetryPolicyLosesNothingWithoutTheDeadLetterOptIn() throws Exception {
        declare(Map.of());
        publish("evt-1", "1");
        RetryPolicy two = RetryPolicy.builder()
                .initialDelay(Duration.ofMillis(50))
                .maxDelay(Duration.ofMillis(100))
                .maxRetries(2)
                .build();
        try (RabbitConsumer c = consumer(downstreamDownFor(Duration.ofSeconds(2)))
                .retries(two)
                .build()
                .start()) {
            await().atMost(Duration.ofSeconds(60)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 1);
            assertThat(c.isRunning()).isTrue();
        }
        assertThat(tries.get("evt-1").get())
                .as("tried past the policy's two retries, at its longest delay")
                .isGreaterThan(3);
        assertThat(messagesIn(queue + "-dlq"))
                .as("nothing rejected: on a queue without a dead-letter exchange a reject deletes the message")
                .isZero();
    }

    @Test
    void aQuorumQueueDeliveryLimitCountsSpacedTriesOfAPoisonMessage() throws Exception {
        declare(Map.of("x-queue-type", "quorum", "x-delivery-limit", 3));
        publish("evt-1", "retry");
        RetryPolicy spaced = RetryPolicy.builder()
                .initialDelay(Duration.ofMillis(300))
                .maxDelay(Duration.ofSeconds(2))
                .jitter(RetryPolicy.Jitter.NONE)
                .build();
        long start = System.nanoTime();
        try (RabbitConsumer c =
                consumer(Effects.HANDLER).retries(spaced).build().start()) {
            await().atMost(Duration.ofSeconds(60)).until(() -> messagesIn(queue + "-dlq") == 1);
        }
        Duration took = Duration.ofNanos(System.nanoTime() - start);
        assertThat(tries.get("evt-1").get())
                .as("the delivery limit of 3 lets the first delivery and 3 redeliveries through")
                .isEqualTo(4);
        assertThat(took)
                .as("three spaced retries wait 300 + 600 + 1200 ms before the broker dead-letters")
                .isGreaterThanOrEqualTo(Duration.ofMillis(2100));
    }

    private RabbitConsumer.Builder consumer(Handler handler) {
        IdempotentConsumer engine = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("rabbit-retry-test")
                .handler(handler)
                .build();
        // counts the deliveries the broker made (a batch may run the handler more than once per delivery)
        IdempotentConsumer counting = Watched.consumer(
                engine,
                ds -> ds.forEach(d -> tries.computeIfAbsent(d.eventId(), k -> new AtomicInteger())
                        .incrementAndGet()));
        return RabbitConsumer.builder().connection(connection).queue(queue).consumer(counting);
    }

    /** Every try fails retryably until {@code outage} after the first try, as a downstream that is down. */
    private Handler downstreamDownFor(Duration outage) {
        return (Delivery d, dev.once.Tx tx) -> {
            downUntil.compareAndSet(0, System.nanoTime() + outage.toNanos());
            if (System.nanoTime() < downUntil.get()) {
                throw new RetryableException("downstream down while applying " + d.eventId());
            }
            Effects.HANDLER.handle(d, tx);
        };
    }

    private void declare(Map<String, Object> arguments) throws Exception {
        try (Channel ch = admin.createChannel()) {
            ch.exchangeDeclare(queue + "-dlx", "fanout", true);
            ch.queueDeclare(queue + "-dlq", true, false, false, Map.of());
            ch.queueBind(queue + "-dlq", queue + "-dlx", "");
            Map<String, Object> args = new HashMap<>(arguments);
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
}
