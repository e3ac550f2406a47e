package dev.once.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.PermanentFailureException;
import dev.once.RetryPolicy;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.nats.client.Connection;
import io.nats.client.JetStreamSubscription;
import io.nats.client.Message;
import io.nats.client.PullSubscribeOptions;
import io.nats.client.api.ConsumerConfiguration;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A permanent failure on JetStream is published to the dead-letter subject the user names (with the
 * original headers and the reason) before it is terminated, so it is kept, not only logged; while
 * the dead letter cannot be stored the message is not terminated.
 */
@ExtendWith(SkipWithoutNats.class)
class NatsDeadLetterTest {

    private TestDatabase db;
    private Connection nats;
    private String stream;

    @BeforeEach
    void setUp() throws Exception {
        nats = TestNats.connect();
        db = TestPostgres.shared().freshDatabase();
        db.execute("CREATE TABLE effect (event_id text NOT NULL)");
        stream = "once-test-" + System.nanoTime();
        TestNats.createStream(nats, stream);
    }

    @AfterEach
    void tearDown() throws Exception {
        try {
            TestNats.deleteStream(nats, stream);
            try {
                TestNats.deleteStream(nats, stream + "-dlq");
            } catch (Exception e) {
                // not created by every test
            }
        } finally {
            nats.close();
            db.close();
        }
    }

    @Test
    void aPermanentFailureIsPublishedToTheDeadLetterSubjectWithItsHeadersAndReasonBeforeItIsTerminated()
            throws Exception {
        TestNats.createStream(nats, stream + "-dlq");
        NatsPublisher publisher = new NatsPublisher(nats);
        publisher.publish(TestNats.message(stream, "evt-1", "key-1", "poison"));
        publisher.publish(TestNats.message(stream, "evt-2", null, "2"));
        try (NatsConsumer c =
                consumer().deadLetterSubject(stream + "-dlq").build().start()) {
            await().atMost(Duration.ofSeconds(30)).until(() -> db.queryLong("SELECT count(*) FROM effect") == 1);
            List<Message> dead = read(stream + "-dlq", 1);
            assertThat(dead).hasSize(1);
            Message m = dead.get(0);
            assertThat(new String(m.getData())).isEqualTo("poison");
            assertThat(m.getHeaders().getFirst("once-event-id"))
                    .as("the original headers are kept")
                    .isEqualTo("evt-1");
            assertThat(m.getHeaders().getFirst(NatsConsumer.DEAD_LETTER_REASON)).contains("can never succeed");
            assertThat(m.getHeaders().getFirst(NatsConsumer.DEAD_LETTER_STREAM)).isEqualTo(stream);
            assertThat(m.getHeaders().getFirst(NatsConsumer.DEAD_LETTER_SEQUENCE))
                    .isEqualTo("1");
            assertThat(c.isRunning()).isTrue();
        }
        assertThat(read(stream, 2))
                .as("the dead-lettered message is terminated: not redelivered to the durable")
                .isEmpty();
    }

    @Test
    void whileTheDeadLetterCannotBeStoredTheMessageIsNotTerminated() throws Exception {
        // no stream captures the dead-letter subject yet: the publish gets no acknowledgement
        new NatsPublisher(nats).publish(TestNats.message(stream, "evt-1", null, "poison"));
        try (NatsConsumer c = consumer()
                .deadLetterSubject(stream + "-dlq")
                .retries(RetryPolicy.builder()
                        .initialDelay(Duration.ofMillis(200))
                        .maxDelay(Duration.ofMillis(200))
                        .build())
                .build()
                .start()) {
            await().pollDelay(Duration.ofSeconds(2))
                    .atMost(Duration.ofSeconds(30))
                    .until(c::isRunning);
            TestNats.createStream(nats, stream + "-dlq");
            await().atMost(Duration.ofSeconds(30))
                    .until(() -> read(stream + "-dlq", 1).size() == 1);
        }
    }

    @Test
    void aDeadLetterSubjectWithAWildcardIsRefused() {
        assertThatThrownBy(() -> NatsConsumer.builder().deadLetterSubject("orders.>"))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("orders.>");
    }

    private NatsConsumer.Builder consumer() {
        IdempotentConsumer engine = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("nats-dlq-test")
                .handler((Delivery d, dev.once.Tx tx) -> {
                    if (d.payloadText().equals("poison")) {
                        throw new PermanentFailureException("event " + d.eventId() + " can never succeed");
                    }
                    try (PreparedStatement ps =
                            tx.connection().prepareStatement("INSERT INTO effect (event_id) VALUES (?)")) {
                        ps.setString(1, d.eventId()); // 1: event id
                        ps.executeUpdate();
                    }
                })
                .build();
        return NatsConsumer.builder().connection(nats).stream(stream)
                .durable("once-dlq-test")
                .consumer(engine);
    }

    /** Up to {@code max} messages of {@code s} through a fresh ephemeral pull consumer (for the stream itself: the durable's view). */
    private List<Message> read(String s, int max) throws Exception {
        JetStreamSubscription sub = s.equals(stream)
                ? nats.jetStream().subscribe(null, PullSubscribeOptions.bind(stream, "once-dlq-test"))
                : nats.jetStream()
                        .subscribe(
                                s,
                                PullSubscribeOptions.builder()
                                        .configuration(ConsumerConfiguration.builder()
                                                .ackPolicy(io.nats.client.api.AckPolicy.None)
                                                .build())
                                        .build());
        try {
            return sub.fetch(max, Duration.ofMillis(500));
        } finally {
            sub.unsubscribe();
        }
    }
}
