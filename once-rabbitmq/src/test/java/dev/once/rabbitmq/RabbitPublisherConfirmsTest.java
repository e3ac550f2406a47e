package dev.once.rabbitmq;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ConfirmCallback;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.RetryPolicy;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Receipt;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Confirms of batches in flight together on the publisher's channels: relays sharing a
 * {@link RabbitPublisher} publish while each other's confirms are on their way, and each publish
 * must be settled by its own confirm or nack, never another's. The broker nacks for real: the
 * queue holds at most {@value #ROOM} messages and refuses the rest ({@code x-overflow:
 * reject-publish}), so the nacks land in the middle of batches that run concurrently. What is
 * reported confirmed, and what the relay marks sent, must be exactly what the queue holds; what
 * was nacked is retried and, once there is room, delivered: nothing lost.
 */
@ExtendWith(SkipWithoutRabbitMq.class)
class RabbitPublisherConfirmsTest {

    private static final int ROOM = 150;
    private static final int BATCHES = 4;
    private static final int PER_BATCH = 100;

    private Connection connection;
    private RabbitPublisher publisher;
    private String queue;

    @BeforeEach
    void setUp() throws Exception {
        connection = TestRabbit.connect();
        queue = "once-test-room-" + System.nanoTime();
        try (Channel ch = connection.createChannel()) {
            ch.queueDeclare(queue, true, false, false, Map.of("x-max-length", ROOM, "x-overflow", "reject-publish"));
        }
    }

    @AfterEach
    void tearDown() throws Exception {
        try (Channel ch = connection.createChannel()) {
            ch.queueDelete(queue);
        } finally {
            if (publisher != null) {
                publisher.close();
            }
            connection.close();
        }
    }

    /** One channel: the batches' publishes and confirms interleave on it. Four: one each, or so. */
    @ParameterizedTest(name = "{0} channels")
    @ValueSource(ints = {1, 4})
    void concurrentBatchesAreEachSettledByTheirOwnConfirmsAndNacks(int channels) throws Exception {
        publisher = new RabbitPublisher(connection, RabbitPublisher.DEFAULT_CONFIRM_TIMEOUT, channels);
        List<CompletableFuture<List<CompletionStage<Receipt>>>> calls = new ArrayList<>();
        List<List<OutboxMessage>> batches = new ArrayList<>();
        for (int b = 0; b < BATCHES; b++) {
            List<OutboxMessage> batch = new ArrayList<>();
            for (int i = 0; i < PER_BATCH; i++) {
                batch.add(TestRabbit.message(queue, "evt-" + b + "-" + i, "k" + i, "1"));
            }
            batches.add(batch);
        }
        for (List<OutboxMessage> batch : batches) {
            calls.add(CompletableFuture.supplyAsync(() -> publisher.publishAll(batch), OwnThreads.each()));
        }
        Set<String> confirmed = new HashSet<>();
        int nacked = 0;
        for (int b = 0; b < BATCHES; b++) {
            List<CompletionStage<Receipt>> stages = calls.get(b).get(1, TimeUnit.MINUTES);
            for (int i = 0; i < PER_BATCH; i++) {
                try {
                    assertThat(stages.get(i)
                                    .toCompletableFuture()
                                    .get(30, TimeUnit.SECONDS)
                                    .body())
                            .startsWith("confirmed seq=");
                    confirmed.add(batches.get(b).get(i).eventId());
                } catch (ExecutionException e) {
                    assertThat(e.getCause()).isInstanceOfSatisfying(PublishFailure.class, f -> {
                        assertThat(f.retryable()).as("a nack is retried").isTrue();
                        assertThat(f.receipt().body()).startsWith("nacked seq=");
                    });
                    nacked++;
                }
            }
        }
        assertThat(drain())
                .as("what the queue holds is exactly what was reported confirmed")
                .isEqualTo(confirmed);
        assertThat(confirmed).hasSize(ROOM);
        assertThat(nacked).isEqualTo(BATCHES * PER_BATCH - ROOM);
    }

    /**
     * Four relays share the publisher and send at once into the queue with room for {@value #ROOM}:
     * the rows marked sent are exactly the messages the queue holds; the nacked rows stay pending
     * and, the queue emptied between rounds, are all delivered in the end.
     */
    @ParameterizedTest(name = "{0} channels")
    @ValueSource(ints = {1, 4})
    void relaysMarkSentOnlyWhatTheBrokerConfirmedAndLoseNothing(int channels) throws Exception {
        publisher = new RabbitPublisher(connection, RabbitPublisher.DEFAULT_CONFIRM_TIMEOUT, channels);
        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            IdempotentConsumer upstream = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("orders")
                    .handler((d, tx) -> tx.outbox().add(queue, d.eventId(), new byte[] {'1'}, Map.of(), null))
                    .build();
            for (int i = 0; i < BATCHES * PER_BATCH; i++) {
                upstream.process(Delivery.builder("order-" + i).build());
            }
            List<OutboxRelay> relays = new ArrayList<>();
            for (int r = 0; r < BATCHES; r++) {
                relays.add(OutboxRelay.builder()
                        .dataSource(db.dataSource())
                        .publisher(publisher)
                        .name("room-" + r)
                        .batchSize(PER_BATCH)
                        .retryPolicy(RetryPolicy.builder()
                                .initialDelay(Duration.ofMillis(1))
                                .maxDelay(Duration.ofMillis(1))
                                .maxRetries(100)
                                .build())
                        .meterRegistry(new SimpleMeterRegistry())
                        .build());
            }
            Set<String> delivered = new HashSet<>();
            for (int round = 0; round < 20 && sentRows(db).size() < BATCHES * PER_BATCH; round++) {
                Set<String> sentBefore = sentRows(db);
                List<CompletableFuture<Integer>> runs = new ArrayList<>();
                for (OutboxRelay relay : relays) {
                    runs.add(CompletableFuture.supplyAsync(relay::relayOnce, OwnThreads.each()));
                }
                for (CompletableFuture<Integer> run : runs) {
                    run.get(1, TimeUnit.MINUTES);
                }
                Set<String> sentNow = sentRows(db);
                sentNow.removeAll(sentBefore);
                Set<String> stored = drain();
                assertThat(stored)
                        .as("round %d: the rows marked sent are exactly what the queue holds", round)
                        .isEqualTo(sentNow);
                assertThat(stored.size()).isLessThanOrEqualTo(ROOM);
                delivered.addAll(stored);
                Thread.sleep(10); // past the nacked rows' retry delay
            }
            relays.forEach(OutboxRelay::close);
            assertThat(delivered)
                    .as("every row delivered, none lost to a nack")
                    .hasSize(BATCHES * PER_BATCH)
                    .isEqualTo(sentRows(db));
        }
    }

    /**
     * publishAll does not wait for the batch's confirms: it returns once the rows are published,
     * and each row's stage completes with its own confirm. Here the confirms are held back (the
     * channels' confirm listeners wait for a gate): the call returns with every stage open, and once
     * the gate opens each completes with its own sequence number. A publishAll that waits for the
     * confirms itself would make every row wait for the batch's last one (the relay's
     * commit-to-acknowledgement measure saw that time for each row).
     */
    @Test
    void publishAllReturnsBeforeTheConfirmsAndEachRowIsSettledByItsOwn() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        publisher = new RabbitPublisher(gatedConfirms(connection, gate), Duration.ofSeconds(30));
        List<OutboxMessage> batch = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            batch.add(TestRabbit.message(queue, "gated-" + i, "k" + i, "1"));
        }
        List<CompletionStage<Receipt>> stages;
        try {
            stages = CompletableFuture.supplyAsync(() -> publisher.publishAll(batch), OwnThreads.each())
                    .get(10, TimeUnit.SECONDS);
            assertThat(stages)
                    .as("the confirms are held back: no row is settled yet")
                    .noneMatch(stage -> stage.toCompletableFuture().isDone());
        } finally {
            gate.countDown();
        }
        Set<String> receipts = new HashSet<>();
        for (CompletionStage<Receipt> stage : stages) {
            receipts.add(stage.toCompletableFuture().get(30, TimeUnit.SECONDS).body());
        }
        assertThat(receipts).hasSize(3).allMatch(body -> body.startsWith("confirmed seq="));
        assertThat(drain()).containsExactlyInAnyOrder("gated-0", "gated-1", "gated-2");
    }

    // The connection as it is, but the confirm listeners of its channels wait for the gate first
    // (they run on the connection's thread, so every confirm of the connection waits).
    private static Connection gatedConfirms(Connection connection, CountDownLatch gate) {
        return proxy(Connection.class, connection, (method, args) -> {
            Object result = method.invoke(connection, args);
            return "createChannel".equals(method.getName()) && result instanceof Channel ch
                    ? proxy(Channel.class, ch, (m, a) -> {
                        if ("addConfirmListener".equals(m.getName()) && a.length == 2) {
                            a = new Object[] {gated((ConfirmCallback) a[0], gate), gated((ConfirmCallback) a[1], gate)};
                        }
                        return m.invoke(ch, a);
                    })
                    : result;
        });
    }

    private static ConfirmCallback gated(ConfirmCallback callback, CountDownLatch gate) {
        return (seq, multiple) -> {
            try {
                gate.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            callback.handle(seq, multiple);
        };
    }

    @FunctionalInterface
    private interface Call {
        Object invoke(Method method, Object[] args) throws Exception;
    }

    private static <T> T proxy(Class<T> type, T target, Call call) {
        return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (p, method, args) -> {
            try {
                return call.invoke(method, args == null ? new Object[0] : args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        }));
    }

    @Test
    void aPublisherWithoutChannelsIsRefusedNamingTheValue() {
        assertThatThrownBy(() -> new RabbitPublisher(connection, RabbitPublisher.DEFAULT_CONFIRM_TIMEOUT, 0))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("channels must be at least 1, but was 0");
    }

    private static Set<String> sentRows(TestDatabase db) throws Exception {
        Set<String> ids = new HashSet<>();
        try (java.sql.Connection c = db.dataSource().getConnection();
                Statement st = c.createStatement();
                ResultSet rs = st.executeQuery("SELECT event_id FROM once_outbox WHERE status = 'sent'")) {
            while (rs.next()) {
                ids.add(rs.getString(1));
            }
        }
        return ids;
    }

    /** Takes every message off the queue; returns their message ids (the event ids). */
    private Set<String> drain() throws Exception {
        Set<String> ids = new HashSet<>();
        try (Channel ch = connection.createChannel()) {
            for (GetResponse r = ch.basicGet(queue, true); r != null; r = ch.basicGet(queue, true)) {
                assertThat(ids.add(r.getProps().getMessageId()))
                        .as("one copy each")
                        .isTrue();
            }
        }
        return ids;
    }
}
