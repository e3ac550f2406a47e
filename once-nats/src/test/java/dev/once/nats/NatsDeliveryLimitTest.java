package dev.once.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.nats.client.Connection;
import io.nats.client.JetStreamManagement;
import io.nats.client.api.AckPolicy;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.ConsumerInfo;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * JetStream's {@code max_deliver}: when a message reaches it the server stops delivering it and
 * only publishes an advisory. Retryable failures must be spaced so that an ordinary outage does not
 * spend the deliveries, and the last delivery of a message that still fails must go to the
 * dead-letter subject (once), not vanish.
 */
@ExtendWith(SkipWithoutNats.class)
class NatsDeliveryLimitTest {

    private static final String DURABLE = "once-limit-test";

    private TestDatabase db;
    private Connection nats;
    private String stream;
    private final Map<String, AtomicInteger> tries = new ConcurrentHashMap<>();
    private final AtomicLong downUntil = new AtomicLong();

    @BeforeEach
    void setUp() throws Exception {
        nats = TestNats.connect();
        db = TestPostgres.shared().freshDatabase();
        db.execute("CREATE TABLE effect (event_id text NOT NULL)");
        stream = "once-limit-" + System.nanoTime();
        TestNats.createStream(nats, stream);
        TestNats.createStream(nats, stream + "-dlq");
    }

    @AfterEach
    void tearDown() throws Exception {
        try {
            TestNats.deleteStream(nats, stream);
            TestNats.deleteStream(nats, stream + "-dlq");
        } finally {
            nats.close();
            db.close();
        }
    }

    @Test
    void aFiveSecondOutageWithMaxDeliverFiveOnTheDurableNeitherLosesNorDeadLetters() throws Exception {
        durableWithMaxDeliver(5); // set by the user, as JetStream's docs advise
        NatsPublisher publisher = new NatsPublisher(nats);
        for (int i = 1; i <= 5; i++) {
            publisher.publish(TestNats.message(stream, "evt-" + i, null, "ok"));
        }
        downUntil.set(System.nanoTime() + Duration.ofSeconds(5).toNanos());
        long start = System.nanoTime();
        try (NatsConsumer c =
                consumer().deadLetterSubject(stream + "-dlq").build().start()) {
            assertThat(info().getConsumerConfiguration().getMaxDeliver())
                    .as("the durable's max_deliver is kept")
                    .isEqualTo(5);
            await().atMost(Duration.ofSeconds(90))
                    .until(() -> db.queryLong("SELECT count(*) FROM effect") == 5
                            || (info().getNumAckPending() == 0 && info().getNumPending() == 0));
            int total = tries.values().stream().mapToInt(AtomicInteger::get).sum();
            System.out.printf(
                    "CHAOS nats-max-deliver-outage: outage 5 s, max_deliver 5, 5 messages: %d applied, %d dead-lettered,"
                            + " %d tries, %d ms%n",
                    db.queryLong("SELECT count(*) FROM effect"),
                    messages(stream + "-dlq"),
                    total,
                    Duration.ofNanos(System.nanoTime() - start).toMillis());
            assertThat(db.queryLong("SELECT count(*) FROM effect"))
                    .as("every message applied after the outage, none dropped at max_deliver")
                    .isEqualTo(5);
            assertThat(messages(stream + "-dlq"))
                    .as("nothing was wrong with them")
                    .isZero();
            assertThat(c.isRunning()).isTrue();
        }
    }

    @Test
    void aMessageThatKeepsFailingIsDeadLetteredOnceOnItsLastDeliveryNotDroppedByTheServer() throws Exception {
        durableWithMaxDeliver(3);
        NatsPublisher publisher = new NatsPublisher(nats);
        publisher.publish(TestNats.message(stream, "poison-1", null, "poison"));
        publisher.publish(TestNats.message(stream, "evt-1", null, "ok"));
        try (NatsConsumer c = consumer()
                .deadLetterSubject(stream + "-dlq")
                .retries(fast(10))
                .build()
                .start()) {
            await().atMost(Duration.ofSeconds(60))
                    .until(() -> info().getNumAckPending() == 0
                            && info().getNumPending() == 0
                            && db.queryLong("SELECT count(*) FROM effect") == 1);
            System.out.printf(
                    "CHAOS nats-max-deliver-poison: max_deliver 3, a message failing retryably: %d tries, %d dead"
                            + " letters%n",
                    tries.get("poison-1").get(), messages(stream + "-dlq"));
            assertThat(messages(stream + "-dlq"))
                    .as("the last delivery is dead-lettered, once")
                    .isEqualTo(1);
            assertThat(tries.get("poison-1").get()).isEqualTo(3);
            assertThat(c.isRunning()).isTrue();
        }
    }

    @Test
    void deadLetterAfterRetriesSetsMaxDeliverFromThePolicyAndDeadLettersTheLastTry() throws Exception {
        new NatsPublisher(nats).publish(TestNats.message(stream, "poison-1", null, "poison"));
        try (NatsConsumer c = consumer()
                .deadLetterSubject(stream + "-dlq")
                .retries(fast(2))
                .deadLetterAfterRetries()
                .build()
                .start()) {
            assertThat(info().getConsumerConfiguration().getMaxDeliver()).isEqualTo(3);
            await().atMost(Duration.ofSeconds(60)).until(() -> messages(stream + "-dlq") == 1);
            await().atMost(Duration.ofSeconds(30))
                    .until(() -> info().getNumAckPending() == 0 && info().getNumPending() == 0);
            assertThat(tries.get("poison-1").get()).isEqualTo(3);
            assertThat(messages(stream + "-dlq")).isEqualTo(1);
        }
    }

    @Test
    void deadLetterAfterRetriesWithoutADeadLetterSubjectIsRefused() {
        assertThatThrownBy(() -> consumer().deadLetterAfterRetries().build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("deadLetterSubject");
    }

    private static RetryPolicy fast(int maxRetries) {
        return RetryPolicy.builder()
                .initialDelay(Duration.ofMillis(50))
                .maxDelay(Duration.ofMillis(200))
                .maxRetries(maxRetries)
                .build();
    }

    private void durableWithMaxDeliver(int maxDeliver) throws Exception {
        nats.jetStreamManagement()
                .addOrUpdateConsumer(
                        stream,
                        ConsumerConfiguration.builder()
                                .durable(DURABLE)
                                .ackPolicy(AckPolicy.Explicit)
                                .maxDeliver(maxDeliver)
                                .build());
    }

    private ConsumerInfo info() throws Exception {
        return nats.jetStreamManagement().getConsumerInfo(stream, DURABLE);
    }

    private long messages(String s) throws Exception {
        JetStreamManagement jsm = nats.jetStreamManagement();
        return jsm.getStreamInfo(s).getStreamState().getMsgCount();
    }

    private NatsConsumer.Builder consumer() {
        IdempotentConsumer engine = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("nats-limit-test")
                .handler((Delivery d, dev.once.Tx tx) -> {
                    tries.computeIfAbsent(d.eventId(), k -> new AtomicInteger()).incrementAndGet();
                    if (d.payloadText().equals("poison") || System.nanoTime() < downUntil.get()) {
                        throw new RetryableException("downstream unavailable for " + d.eventId());
                    }
                    try (PreparedStatement ps =
                            tx.connection().prepareStatement("INSERT INTO effect (event_id) VALUES (?)")) {
                        ps.setString(1, d.eventId()); // 1: event id
                        ps.executeUpdate();
                    }
                })
                .build();
        return NatsConsumer.builder().connection(nats).stream(stream)
                .durable(DURABLE)
                .consumer(engine)
                .batchSize(1);
    }
}
