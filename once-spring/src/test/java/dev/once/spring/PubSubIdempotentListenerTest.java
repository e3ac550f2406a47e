package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.cloud.pubsub.v1.Subscriber;
import com.google.cloud.spring.pubsub.core.PubSubTemplate;
import com.google.cloud.spring.pubsub.core.subscriber.PubSubSubscriberTemplate;
import com.google.cloud.spring.pubsub.integration.AckMode;
import com.google.cloud.spring.pubsub.integration.inbound.PubSubInboundChannelAdapter;
import com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage;
import com.google.cloud.spring.pubsub.support.DefaultSubscriberFactory;
import com.google.cloud.spring.pubsub.support.GcpPubSubHeaders;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.PubsubMessage;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import dev.once.testsupport.TestPubSubEmulator;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.integration.annotation.ServiceActivator;
import org.springframework.integration.channel.DirectChannel;
import org.springframework.integration.config.EnableIntegration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.Message;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * {@code @IdempotentListener} with Spring Cloud GCP Pub/Sub on Google's emulator: a method fed by
 * {@code PubSubTemplate.subscribe} (a {@code BasicAcknowledgeablePubsubMessage} argument, settled by once:
 * ack after the commit, nack after a rollback) and a {@code @ServiceActivator} fed by a
 * {@code PubSubInboundChannelAdapter} in {@code AckMode.MANUAL} (the body's {@code ack()} deferred to the
 * commit). Subscriptions have a 10 s ack deadline.
 */
class PubSubIdempotentListenerTest {

    static final String SUFFIX = Long.toString(System.nanoTime(), 36);
    static final String TOPIC = "spring-" + SUFFIX;
    static final String TEMPLATE_SUB = "spring-template-" + SUFFIX;
    static final String ADAPTER_TOPIC = "spring-adapter-" + SUFFIX;
    static final String ADAPTER_SUB = "spring-adapter-" + SUFFIX;
    static final String CRASH_TOPIC = "spring-crash-" + SUFFIX;
    static final String CRASH_SUB = "spring-crash-" + SUFFIX;

    static PubSubTestBeans emulator;
    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static Subscriber subscriber;

    @BeforeAll
    static void start() throws Exception {
        emulator = new PubSubTestBeans();
        for (String[] t :
                new String[][] {{TOPIC, TEMPLATE_SUB}, {ADAPTER_TOPIC, ADAPTER_SUB}, {CRASH_TOPIC, CRASH_SUB}}) {
            emulator.create(t[0], t[1]);
        }
        db = TestPostgres.shared().freshDatabase(4);
        db.execute("CREATE TABLE ledger (event_id text NOT NULL, amount bigint NOT NULL)");
        context = new AnnotationConfigApplicationContext(Config.class);
        Payments payments = context.getBean(Payments.class);
        // the application's way: the template's subscriber calls the (proxied) listener method
        subscriber = context.getBean(PubSubTemplate.class).subscribe(TEMPLATE_SUB, payments::on);
    }

    @AfterAll
    static void stop() throws Exception {
        if (subscriber != null) {
            subscriber.stopAsync().awaitTerminated(30, TimeUnit.SECONDS);
        }
        if (context != null) {
            context.close();
        }
        if (emulator != null) {
            emulator.delete(TOPIC, TEMPLATE_SUB);
            emulator.delete(ADAPTER_TOPIC, ADAPTER_SUB);
            emulator.delete(CRASH_TOPIC, CRASH_SUB);
            emulator.close();
        }
        if (db != null) {
            db.close();
        }
    }

    /**
     * Gives every streaming pull on a channel a 5 s deadline (the client opens the next one). The emulator
     * never learns that a stream died when its connection did (its gRPC server fails with a NoSuchMethodError
     * on the cancellation), so the dead stream lives on in it and keeps taking the subscription's messages,
     * each back only after its ack deadline and then as likely to go to that stream again: the copy of c-1 and
     * c-2 took 30-130 s to reach the survivor. With a deadline the emulator ends the stream itself.
     */
    static final ClientInterceptor STREAMS_END_WITHIN_5_S = new ClientInterceptor() {
        @Override
        public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
            return next.newCall(
                    method,
                    method.getFullMethodName().equals("google.pubsub.v1.Subscriber/StreamingPull")
                            ? options.withDeadlineAfter(5, TimeUnit.SECONDS)
                            : options);
        }
    };

    /** A subscriber factory on {@code c}, as Spring Cloud GCP's auto-configuration builds one for the emulator. */
    static DefaultSubscriberFactory subscriberFactory(ManagedChannel c) {
        DefaultSubscriberFactory f = PubSubTestBeans.subscriberFactory(c);
        // the deadline a lost ack leaves the message with: Pub/Sub's shortest, so the copy comes in ~10 s
        f.setMaxDurationPerAckExtension(org.threeten.bp.Duration.ofSeconds(10));
        return f;
    }

    @Configuration(proxyBeanMethods = false)
    @Import(JdbcListenerBeans.class)
    @EnableIdempotentListeners
    @EnableIntegration
    static class Config {
        @Bean
        DataSource dataSource() {
            return db.dataSource();
        }

        @Bean
        PubSubTemplate pubSubTemplate() {
            return PubSubTestBeans.template(emulator.channel, subscriberFactory(emulator.channel));
        }

        @Bean
        DirectChannel pubsubInput() {
            return new DirectChannel();
        }

        @Bean
        PubSubInboundChannelAdapter adapter(PubSubTemplate template, DirectChannel pubsubInput) {
            PubSubInboundChannelAdapter a = new PubSubInboundChannelAdapter(template, ADAPTER_SUB);
            a.setOutputChannel(pubsubInput);
            a.setAckMode(AckMode.MANUAL);
            a.setPayloadType(String.class);
            return a;
        }

        @Bean
        Payments payments(JdbcTemplate jdbc) {
            return new Payments(jdbc);
        }
    }

    /** The application's listeners. */
    public static class Payments {
        final JdbcTemplate jdbc;
        final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
        /** Event id → what to do in the body's transaction before it commits (test faults). */
        final Map<String, Runnable> beforeCommit = new ConcurrentHashMap<>();

        Payments(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        /** Runs {@code fault} in the transaction of {@code eventId}'s next call, before it commits. */
        public void beforeCommit(String eventId, Runnable fault) {
            beforeCommit.put(eventId, fault);
        }

        int calls(String eventId) {
            return calls.computeIfAbsent(eventId, k -> new AtomicInteger()).get();
        }

        /** Fed by {@code PubSubTemplate.subscribe}: once acks after the commit, nacks after a rollback. */
        @IdempotentListener(consumer = "pubsub-template")
        public void on(BasicAcknowledgeablePubsubMessage message) {
            String id = message.getPubsubMessage().getAttributesOrThrow("once-event-id");
            int call = calls.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", id);
            Runnable fault = beforeCommit.remove(id);
            if (fault != null) {
                fault.run();
            }
            if (message.getPubsubMessage().getData().toStringUtf8().equals("flaky") && call == 1) {
                throw new IllegalStateException("first attempt of " + id + " fails after its write");
            }
        }

        /** Fed by a {@code PubSubInboundChannelAdapter} in MANUAL mode: the body acks, as its recipe says. */
        @ServiceActivator(inputChannel = "pubsubInput")
        @IdempotentListener(consumer = "pubsub-adapter")
        public void onAdapter(Message<String> message) {
            String id = (String) message.getHeaders().get("once-event-id");
            int call = calls.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", id);
            // acks first, then fails: the ack must wait for a commit that never comes
            GcpPubSubHeaders.getOriginalMessage(message).ifPresent(BasicAcknowledgeablePubsubMessage::ack);
            if (message.getPayload().equals("flaky") && call == 1) {
                throw new IllegalStateException("first attempt of " + id + " fails after its ack");
            }
        }
    }

    static void publish(String topic, String eventId, String body) throws Exception {
        context.getBean(PubSubTemplate.class)
                .publish(topic, body, Map.of("once-event-id", eventId))
                .get(30, TimeUnit.SECONDS);
    }

    static long ledger(String eventId) {
        return context.getBean(JdbcTemplate.class)
                .queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, eventId);
    }

    static int calls(String eventId) {
        return context.getBean(Payments.class).calls(eventId);
    }

    @Test
    void duplicateDeliveredTwiceIsAppliedOnce() throws Exception {
        publish(TOPIC, "t-1", "20");
        publish(TOPIC, "t-1", "20");
        publish(TOPIC, "t-2", "20");
        await().atMost(Duration.ofMinutes(3)).until(() -> ledger("t-2") == 1 && ledger("t-1") == 1);
        assertThat(calls("t-1")).as("the body ran for the first copy only").isEqualTo(1);
        assertThat(ledger("t-1")).as("effect applied exactly once").isEqualTo(1);
    }

    @Test
    void failureIsRolledBackNackedRedeliveredAndAppliedOnce() throws Exception {
        publish(TOPIC, "t-3", "flaky");
        // nacked, it comes again at once; left unsettled, the client would hold it for its lease (60 min)
        await().atMost(Duration.ofMinutes(3)).until(() -> calls("t-3") == 2 && ledger("t-3") == 1);
        assertThat(ledger("t-3")).as("the failed attempt's write rolled back").isEqualTo(1);
    }

    @Test
    void adapterBodyThatAcksAndThenFailsIsRedeliveredAndAppliedOnce() throws Exception {
        publish(ADAPTER_TOPIC, "a-1", "flaky");
        publish(ADAPTER_TOPIC, "a-2", "20");
        publish(ADAPTER_TOPIC, "a-2", "20");
        await().atMost(Duration.ofMinutes(3))
                .until(() -> calls("a-1") == 2 && ledger("a-1") == 1 && ledger("a-2") == 1);
        assertThat(ledger("a-1"))
                .as("the failed attempt's write rolled back, its early ack withheld")
                .isEqualTo(1);
        assertThat(calls("a-2")).as("the adapter's duplicate skipped the body").isEqualTo(1);
    }

    @Test
    void crashBetweenCommitAndAckIsAbsorbed() throws Exception {
        // A second application instance on a channel of its own, whose link dies right after the commit of
        // c-1, before the ack: the ack cannot reach Pub/Sub, which hands c-1 again once its deadline lapses.
        ManagedChannel own = ManagedChannelBuilder.forTarget(TestPubSubEmulator.host())
                .usePlaintext()
                .intercept(STREAMS_END_WITHIN_5_S)
                .build();
        Payments payments = context.getBean(Payments.class);
        Map<String, AtomicInteger> delivered = new ConcurrentHashMap<>();
        java.util.function.Consumer<BasicAcknowledgeablePubsubMessage> counting = m -> {
            delivered
                    .computeIfAbsent(
                            m.getPubsubMessage().getAttributesOrThrow("once-event-id"), k -> new AtomicInteger())
                    .incrementAndGet();
            payments.on(m);
        };
        Subscriber doomed = new PubSubSubscriberTemplate(subscriberFactory(own)).subscribe(CRASH_SUB, counting);
        payments.beforeCommit(
                "c-1",
                () -> TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                    @Override
                    public void afterCommit() {
                        own.shutdownNow();
                    }
                }));
        try {
            publish(CRASH_TOPIC, "c-1", "20");
            await().atMost(Duration.ofMinutes(5)).until(() -> ledger("c-1") == 1 && own.isShutdown());
        } finally {
            // its channel is shut down: it can neither ack nor open another stream on the subscription
            doomed.stopAsync();
        }
        // The survivor pulls (the Pull RPC) instead of holding a streaming pull open: the emulator may keep a
        // message that is due again until the client reopens its stream (it does not answer the client's
        // keep-alive pings), so on a streaming survivor the copy of c-1 came after 50 s in one run and c-2
        // not within 60 s in another. A pull returns what is due when it is asked.
        PubSubSubscriberTemplate survivor = new PubSubSubscriberTemplate(subscriberFactory(emulator.channel));
        List<String> survivorSettled = new CopyOnWriteArrayList<>();
        java.util.function.Consumer<BasicAcknowledgeablePubsubMessage> pulled =
                m -> counting.accept(new Settling(m, survivorSettled));
        await().atMost(Duration.ofMinutes(5)).until(() -> {
            survivor.pull(CRASH_SUB, 10, true).forEach(pulled);
            return survivorSettled.stream().anyMatch(a -> a.startsWith("c-1 "));
        });
        publish(CRASH_TOPIC, "c-2", "20");
        await().atMost(Duration.ofMinutes(5)).until(() -> {
            survivor.pull(CRASH_SUB, 10, true).forEach(pulled);
            return ledger("c-2") == 1;
        });
        assertThat(calls("c-1"))
                .as("the body ran once; the redelivery was a duplicate")
                .isEqualTo(1);
        assertThat(ledger("c-1")).as("effect applied exactly once").isEqualTo(1);
        // twice at least: a copy whose ack a stalled machine sends after its deadline comes once more, the same way
        assertThat(delivered.get("c-1").get())
                .as("c-1 delivered again after the lost ack")
                .isGreaterThanOrEqualTo(2);
        assertThat(survivorSettled)
                .as("every copy of c-1 the survivor got acked as a duplicate, none nacked")
                .filteredOn(a -> a.startsWith("c-1 "))
                .isNotEmpty()
                .containsOnly("c-1 ack");
    }

    /**
     * A Pub/Sub listener called in a caller's transaction (a {@code @Transactional} around it): acked only after that
     * transaction commits (the claim visible to another connection by then), nacked when it rolls back. It was acked
     * as soon as the call returned, before the caller's commit: a caller that then rolled back lost the message.
     */
    @Test
    void inACallersTransactionTheMessageIsAckedAfterItsCommitAndNackedAfterItsRollback() {
        Payments payments = context.getBean(Payments.class);
        var tt = new org.springframework.transaction.support.TransactionTemplate(
                context.getBean(OnceSpring.class).transactionManager());
        List<String> settled = new CopyOnWriteArrayList<>();
        tt.executeWithoutResult(s -> {
            payments.on(new Settling(received("in-tx-1"), settled));
            assertThat(settled).as("nothing settled before the caller's commit").isEmpty();
        });
        assertThat(settled).containsExactly("in-tx-1 ack");
        assertThat(context.getBean(JdbcTemplate.class)
                        .queryForObject("SELECT count(*) FROM once_inbox WHERE event_id = 'in-tx-1'", Long.class))
                .isEqualTo(1);

        org.assertj.core.api.Assertions.assertThatThrownBy(() -> tt.executeWithoutResult(s -> {
                    payments.on(new Settling(received("in-tx-2"), settled));
                    throw new IllegalStateException("the caller fails after the listener returned");
                }))
                .hasMessageContaining("the caller fails");
        assertThat(settled).as("rolled back: nacked, never acked").containsExactly("in-tx-1 ack", "in-tx-2 nack");
        assertThat(ledger("in-tx-2")).isZero();
    }

    /** A message as the subscriber hands it over, settled through {@link Settling}. */
    static BasicAcknowledgeablePubsubMessage received(String eventId) {
        PubsubMessage m = PubsubMessage.newBuilder()
                .putAttributes("once-event-id", eventId)
                .setData(com.google.protobuf.ByteString.copyFromUtf8("20"))
                .build();
        return new BasicAcknowledgeablePubsubMessage() {
            @Override
            public ProjectSubscriptionName getProjectSubscriptionName() {
                return ProjectSubscriptionName.of("once-test", "in-tx");
            }

            @Override
            public PubsubMessage getPubsubMessage() {
                return m;
            }

            @Override
            public CompletableFuture<Void> ack() {
                return CompletableFuture.completedFuture(null);
            }

            @Override
            public CompletableFuture<Void> nack() {
                return CompletableFuture.completedFuture(null);
            }
        };
    }

    /** A pulled message that records how once settled it ({@code "<event id> ack|nack"}). */
    record Settling(BasicAcknowledgeablePubsubMessage message, List<String> settled)
            implements BasicAcknowledgeablePubsubMessage {
        @Override
        public ProjectSubscriptionName getProjectSubscriptionName() {
            return message.getProjectSubscriptionName();
        }

        @Override
        public PubsubMessage getPubsubMessage() {
            return message.getPubsubMessage();
        }

        @Override
        public CompletableFuture<Void> ack() {
            settled.add(eventId() + " ack");
            return message.ack();
        }

        @Override
        public CompletableFuture<Void> nack() {
            settled.add(eventId() + " nack");
            return message.nack();
        }

        private String eventId() {
            return message.getPubsubMessage().getAttributesOrThrow("once-event-id");
        }
    }
}
