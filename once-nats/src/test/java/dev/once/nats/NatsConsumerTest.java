package dev.once.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.nats.client.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** JetStream-specific behaviour against the real server: ack wait expiry, the inProgress heartbeat, Nats-Msg-Id. */
class NatsConsumerTest {

    private static final Duration ACK_WAIT = Duration.ofSeconds(1);

    private TestDatabase db;
    private Connection nats;
    private String stream;
    private final List<Delivery> deliveries = new CopyOnWriteArrayList<>();
    private final List<Outcome> outcomes = new CopyOnWriteArrayList<>();

    /** What the handler does before it writes. */
    @FunctionalInterface
    interface Work {
        void before(Delivery d) throws Exception;
    }

    @BeforeEach
    void setUp() throws Exception {
        nats = TestNats.connect();
        db = TestPostgres.shared().freshDatabase();
        db.execute("CREATE TABLE effect (event_id text NOT NULL, attempt int NOT NULL)");
        stream = "once-test-" + System.nanoTime();
        TestNats.createStream(nats, stream);
    }

    @AfterEach
    void tearDown() throws Exception {
        try {
            TestNats.deleteStream(nats, stream);
        } finally {
            nats.close();
            db.close();
        }
    }

    @Test
    void ackWaitExpiringDuringSlowHandlerRedeliversAndIsAbsorbed() throws Exception {
        CountDownLatch redelivered = new CountDownLatch(1);
        IdempotentConsumer engine = recording(
                d -> {
                    if (d.attempt() == 1) {
                        // slow, no heartbeat: the ack wait expires and JetStream hands the message to the other
                        // consumer
                        assertThat(redelivered.await(60, TimeUnit.SECONDS))
                                .as("redelivery while the first attempt works")
                                .isTrue();
                    }
                },
                d -> {
                    if (d.attempt() > 1) {
                        redelivered.countDown();
                    }
                });
        new NatsPublisher(nats).publish(TestNats.message(stream, "evt-1", null, "1"));
        try (NatsConsumer a = consumer(engine, false);
                NatsConsumer b = consumer(engine, false)) {
            await().atMost(Duration.ofSeconds(60))
                    .until(() -> outcomes.stream().anyMatch(o -> o.status() == Status.DUPLICATE));
        }
        assertThat(outcomes).filteredOn(o -> o.status() == Status.APPLIED).hasSize(1);
        assertThat(deliveries)
                .as("the redelivery reports JetStream's delivery count")
                .anyMatch(d -> d.attempt() == 2 && d.redelivered());
        assertThat(db.queryLong("SELECT count(*) FROM effect"))
                .as("effect applied exactly once")
                .isEqualTo(1);
    }

    @Test
    void inProgressHeartbeatKeepsLongWorkFromBeingRedelivered() throws Exception {
        CountDownLatch never = new CountDownLatch(1);
        IdempotentConsumer engine = recording(
                d -> {
                    // long work: four ack waits
                    assertThat(never.await(ACK_WAIT.toMillis() * 4, TimeUnit.MILLISECONDS))
                            .isFalse();
                },
                d -> {});
        new NatsPublisher(nats).publish(TestNats.message(stream, "evt-1", null, "1"));
        try (NatsConsumer a = consumer(engine, true);
                NatsConsumer b = consumer(engine, true)) {
            await().atMost(Duration.ofSeconds(60))
                    .until(() -> outcomes.stream().anyMatch(o -> o.status() == Status.APPLIED));
        }
        assertThat(deliveries)
                .as("one delivery: inProgress() kept extending the ack wait")
                .hasSize(1);
        assertThat(nats.jetStreamManagement()
                        .getConsumerInfo(stream, "nats-test")
                        .getNumAckPending())
                .as("acked after commit")
                .isZero();
    }

    @Test
    void publisherSetsNatsMsgIdSoTheStreamDropsARepublish() throws Exception {
        NatsPublisher publisher = new NatsPublisher(nats);
        assertThat(publisher
                        .publish(TestNats.message(stream, "evt-1", null, "1"))
                        .body())
                .as("first publish stored")
                .isEqualTo("stream=" + stream + " seq=1 duplicate=false");
        assertThat(publisher
                        .publish(TestNats.message(stream, "evt-1", null, "1"))
                        .body())
                .as("re-publish of the same event id: the stream answers with the first message's sequence")
                .isEqualTo("stream=" + stream + " seq=1 duplicate=true");
        assertThat(nats.jetStreamManagement()
                        .getStreamInfo(stream)
                        .getStreamState()
                        .getMsgCount())
                .isEqualTo(1);
    }

    @Test
    void fetchWaitLongerThanAckWaitIsRefused() {
        NatsConsumer.Builder b = NatsConsumer.builder().connection(nats).stream(stream)
                .durable("x")
                .consumer(recording(d -> {}, d -> {}))
                .ackWait(Duration.ofSeconds(1))
                .fetchWait(Duration.ofSeconds(2));
        org.assertj.core.api.Assertions.assertThatThrownBy(b::build)
                .hasMessageContaining("fetchWait must be shorter than ackWait");
    }

    private NatsConsumer consumer(IdempotentConsumer engine, boolean heartbeat) throws Exception {
        return NatsConsumer.builder().connection(nats).stream(stream)
                .durable("nats-test")
                .consumer(engine)
                .batchSize(1)
                .fetchWait(Duration.ofMillis(300))
                .ackWait(ACK_WAIT)
                .heartbeat(heartbeat)
                .build()
                .start();
    }

    private IdempotentConsumer recording(Work work, java.util.function.Consumer<Delivery> onDelivery) {
        IdempotentConsumer engine = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("nats-test")
                .handler((d, tx) -> {
                    work.before(d);
                    try (PreparedStatement ps =
                            tx.connection().prepareStatement("INSERT INTO effect (event_id, attempt) VALUES (?, ?)")) {
                        ps.setString(1, d.eventId()); // 1: event id
                        ps.setInt(2, d.attempt()); // 2: attempt
                        ps.executeUpdate();
                    }
                })
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
                return processBatch(List.of(d)).get(0);
            }

            @Override
            public List<Outcome> processBatch(List<Delivery> ds) {
                deliveries.addAll(ds);
                ds.forEach(onDelivery);
                List<Outcome> os = engine.processBatch(ds);
                outcomes.addAll(os);
                return os;
            }
        };
    }
}
