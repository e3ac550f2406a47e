package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.cloud.pubsub.v1.Subscriber;
import com.google.cloud.spring.pubsub.core.PubSubTemplate;
import com.google.cloud.spring.pubsub.support.AcknowledgeablePubsubMessage;
import com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage;
import com.rabbitmq.client.Channel;
import dev.once.testsupport.SkipWithoutPubSub;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.awspring.cloud.sqs.annotation.SqsListener;
import io.awspring.cloud.sqs.config.SqsBootstrapConfiguration;
import io.awspring.cloud.sqs.config.SqsMessageListenerContainerFactory;
import io.awspring.cloud.sqs.listener.interceptor.MessageInterceptor;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.EdgeCasesMode;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.ShrinkingMode;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import org.springframework.amqp.core.AcknowledgeMode;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.core.Queue;
import org.springframework.amqp.core.QueueBuilder;
import org.springframework.amqp.rabbit.annotation.EnableRabbit;
import org.springframework.amqp.rabbit.annotation.RabbitListener;
import org.springframework.amqp.rabbit.config.SimpleRabbitListenerContainerFactory;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
import org.springframework.amqp.rabbit.core.RabbitAdmin;
import org.springframework.amqp.rabbit.core.RabbitTemplate;
import org.springframework.amqp.rabbit.listener.RabbitListenerEndpointRegistry;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The Spring listener containers' waits for a holder, generated: each try sends 4 to 6 events at once, one to each of
 * a {@code @RabbitListener} (AUTO acks), a {@code @RabbitListener} taking the {@code Channel} (MANUAL acks), an
 * {@code @SqsListener} and a {@code PubSubTemplate.subscribe} listener and up to two more, one copy or two (a
 * redelivery), its claim held first by another process ({@link OtherProcessClaim}) or not; a holder commits or rolls
 * back, at once or slowly after the listener met it, and a RabbitMQ container may be stopped and restarted while its
 * call waits. Real RabbitMQ (quorum queues with {@code x-delivery-limit} 3 and a dead-letter queue), ElasticMQ
 * (redrive after 2 receives, visibility 5 s), the Pub/Sub emulator (dead-letter policy of 5 attempts, ack deadline
 * 10 s) and PostgreSQL; every claim gives up after 200 ms (IN_PROGRESS). Asserted: each event applied exactly once (by
 * its holder, or by one body run of the listener), nothing dead-lettered, and an SQS message whose body ran received
 * once (its visibility kept through the wait, not lapsed and redelivered). The Pub/Sub subscriber and the SQS
 * container are not stopped here: a message nacked by a stopping Pub/Sub subscriber did not come back from the
 * emulator ({@link PubSubHeldClaimTest}), and an SQS message left by a stopped wait comes back only after the 30 s
 * visibility the wait set ({@link SqsHeldClaimTest}).
 */
class SpringHolderWaitPropertyTest {

    static final String SUFFIX = UUID.randomUUID().toString().substring(0, 8);
    public static final String RABBIT = "once-spring-wait-" + SUFFIX;
    public static final String RABBIT_MANUAL = "once-spring-wait-manual-" + SUFFIX;
    static final String RABBIT_DEAD = "once-spring-wait-dead-" + SUFFIX;
    static final String PUBSUB = "spring-wait-" + SUFFIX;
    static final String PUBSUB_DEAD = "spring-wait-dead-" + SUFFIX;
    static final String SQS = "once-spring-sqs-wait-" + SUFFIX;
    static final String CONSUMER = "spring-wait";

    enum Broker {
        RABBIT,
        RABBIT_CHANNEL,
        SQS,
        PUBSUB
    }

    enum Holder {
        NONE,
        COMMITS,
        ROLLS_BACK
    }

    /** One event of a try: where it goes, how often, who holds its claim first and how that holder ends. */
    record Event(Broker broker, int copies, Holder holder, int holdMillis, boolean stopWhileWaiting) {
        @Override
        public String toString() {
            return broker + " x" + copies + " " + holder + (holder == Holder.NONE ? "" : " +" + holdMillis + "ms")
                    + (stopWhileWaiting
                                    && holder != Holder.NONE
                                    && broker.name().startsWith("RABBIT")
                            ? " stop"
                            : "");
        }
    }

    static final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
    // by event: the highest ApproximateReceiveCount of its SQS messages the container handed to the listener
    static final Map<String, Integer> sqsReceives = new ConcurrentHashMap<>();
    static final AtomicInteger tries = new AtomicInteger();
    static final Object CONTAINER_STOPS = new Object();
    // a thread per holder's end: they sleep, and the common pool of a 2-core machine has one thread
    static final java.util.concurrent.ExecutorService HOLDERS = java.util.concurrent.Executors.newCachedThreadPool();

    static TestDatabase db;
    static ElasticMqQueues mq;
    static String sqsUrl;
    static String sqsDead;
    static PubSubTestBeans emulator;
    static AnnotationConfigApplicationContext context;
    static HeldClaims held;
    static Subscriber subscriber;

    static synchronized void start() {
        if (context != null) {
            return;
        }
        mq = ElasticMqQueues.start();
        sqsDead = mq.queue(SQS + "-dlq", Map.of());
        sqsUrl = mq.redriven(SQS, sqsDead);
        System.setProperty("once.test.sqs.wait", SQS);
        emulator = new PubSubTestBeans(PubSubIdempotentListenerTest.STREAMS_END_WITHIN_5_S);
        emulator.create(PUBSUB_DEAD, PUBSUB_DEAD);
        emulator.createDeadLettering(PUBSUB, PUBSUB, PUBSUB_DEAD, 5);
        // A connection for each of up to 6 holders (OtherProcessClaim, on this pool) and 12 messages in flight. With 4
        // (ElasticMqQueues.ledgerDatabase) beside 5 holders an SQS call's first try waited 10.4 s for a connection,
        // past a 10 s visibility timeout before the wait could extend it: the message was received again (the
        // first receipt handle then refused: ReceiptHandleIsInvalid), and a third receive dead-letters it.
        db = TestPostgres.shared().freshDatabase(24);
        db.execute("CREATE TABLE ledger (seq bigserial PRIMARY KEY, event_id text NOT NULL)");
        context = JdbcListenerBeans.context(db.dataSource(), Config.class);
        held = context.getBean(HeldClaims.class);
        subscriber =
                context.getBean(PubSubTemplate.class).subscribe(PUBSUB, context.getBean(Listeners.class)::onPubSub);
        // Each listener applies an event first: a container's first call is slow (class loading, its first poll)
        for (Broker b : Broker.values()) {
            String id = "warm-" + b + "-" + SUFFIX;
            send(b, id);
            await().atMost(Duration.ofSeconds(60)).until(() -> ledger(id) == 1);
        }
        // a slow first call's message may have been received again, and gone to the dead-letter queue: not counted
        await().atMost(Duration.ofSeconds(60)).until(() -> mq.held(sqsUrl) == 0);
        sqsReceives.clear();
        deadBefore = deadLettered();
    }

    @AfterContainer
    static void stop() throws Exception {
        if (subscriber != null) {
            subscriber.stopAsync().awaitTerminated(30, TimeUnit.SECONDS);
        }
        if (context != null) {
            RabbitAdmin admin = context.getBean(RabbitAdmin.class);
            admin.deleteQueue(RABBIT);
            admin.deleteQueue(RABBIT_MANUAL);
            admin.deleteQueue(RABBIT_DEAD);
            context.close();
        }
        if (emulator != null) {
            emulator.delete(PUBSUB, PUBSUB);
            emulator.delete(PUBSUB_DEAD, PUBSUB_DEAD);
            emulator.close();
        }
        if (db != null) {
            db.close();
        }
        if (mq != null) {
            mq.close();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @EnableRabbit
    @EnableIdempotentListeners
    @Import({SqsBootstrapConfiguration.class, JdbcListenerBeans.class, HeldClaims.class, RabbitBeans.class})
    static class Config {
        @Bean
        Queue rabbitDead() {
            return QueueBuilder.durable(RABBIT_DEAD).build();
        }

        @Bean
        Queue rabbit() {
            return QueueBuilder.durable(RABBIT)
                    .quorum()
                    .deliveryLimit(3)
                    .deadLetterExchange("")
                    .deadLetterRoutingKey(RABBIT_DEAD)
                    .build();
        }

        @Bean
        Queue rabbitManual() {
            return QueueBuilder.durable(RABBIT_MANUAL)
                    .quorum()
                    .deliveryLimit(3)
                    .deadLetterExchange("")
                    .deadLetterRoutingKey(RABBIT_DEAD)
                    .build();
        }

        @Bean
        SimpleRabbitListenerContainerFactory rabbitListenerContainerFactory(CachingConnectionFactory cf) {
            SimpleRabbitListenerContainerFactory f = new SimpleRabbitListenerContainerFactory();
            f.setConnectionFactory(cf);
            f.setConcurrentConsumers(4);
            f.setPrefetchCount(1);
            f.setDefaultRequeueRejected(true);
            f.setContainerCustomizer(c -> c.setShutdownTimeout(TimeUnit.MINUTES.toMillis(10)));
            return f;
        }

        @Bean
        SimpleRabbitListenerContainerFactory manualFactory(CachingConnectionFactory cf) {
            SimpleRabbitListenerContainerFactory f = new SimpleRabbitListenerContainerFactory();
            f.setConnectionFactory(cf);
            f.setConcurrentConsumers(4);
            f.setPrefetchCount(1);
            f.setAcknowledgeMode(AcknowledgeMode.MANUAL);
            f.setContainerCustomizer(c -> c.setShutdownTimeout(TimeUnit.MINUTES.toMillis(10)));
            return f;
        }

        @Bean
        SqsMessageListenerContainerFactory<Object> defaultSqsListenerContainerFactory() {
            return mq.containers()
                    .messageInterceptor(new MessageInterceptor<Object>() {
                        @Override
                        public org.springframework.messaging.Message<Object> intercept(
                                org.springframework.messaging.Message<Object> m) {
                            sqsReceives.merge(
                                    (String) m.getHeaders().get("once-event-id"),
                                    Integer.valueOf((String) m.getHeaders().get("Sqs_Msa_ApproximateReceiveCount")),
                                    Math::max);
                            return m;
                        }
                    })
                    .build();
        }

        @Bean
        PubSubTemplate pubSubTemplate() {
            return PubSubTestBeans.template(
                    emulator.channel, PubSubIdempotentListenerTest.subscriberFactory(emulator.channel));
        }

        @Bean
        Listeners listeners(JdbcTemplate jdbc) {
            return new Listeners(jdbc);
        }
    }

    /** The application's listeners, one per container kind, all of one consumer. */
    public static class Listeners {
        final JdbcTemplate jdbc;

        Listeners(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        void apply(String eventId) {
            calls.computeIfAbsent(eventId, k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO ledger (event_id) VALUES (?)", eventId);
        }

        @RabbitListener(id = "wait-auto", queues = "#{T(dev.once.spring.SpringHolderWaitPropertyTest).RABBIT}")
        @IdempotentListener(consumer = CONSUMER)
        public void onRabbit(Message message) {
            apply((String) message.getMessageProperties().getHeader("once-event-id"));
        }

        @RabbitListener(
                id = "wait-manual",
                queues = "#{T(dev.once.spring.SpringHolderWaitPropertyTest).RABBIT_MANUAL}",
                containerFactory = "manualFactory")
        @IdempotentListener(consumer = CONSUMER)
        public void onRabbitChannel(Message message, Channel channel) throws IOException {
            apply((String) message.getMessageProperties().getHeader("once-event-id"));
            channel.basicAck(message.getMessageProperties().getDeliveryTag(), false);
        }

        @SqsListener("${once.test.sqs.wait}")
        @IdempotentListener(consumer = CONSUMER)
        public void onSqs(org.springframework.messaging.Message<String> message) {
            apply((String) message.getHeaders().get("once-event-id"));
        }

        @IdempotentListener(consumer = CONSUMER)
        public void onPubSub(BasicAcknowledgeablePubsubMessage message) {
            apply(message.getPubsubMessage().getAttributesOrThrow("once-event-id"));
        }
    }

    /**
     * One event per container kind, and up to two more on any: each held first by another process more often than
     * not, and a holder slow (2 s after the listener met it: ten tries, past every delivery budget here; an SQS one 6 s, past
     * its message's 5 s visibility timeout: kept invisible by the wait alone) as often as
     * quick.
     */
    @Provide
    Arbitrary<List<Event>> tries() {
        Arbitrary<Event> extra = Arbitraries.of(Broker.class).flatMap(SpringHolderWaitPropertyTest::event);
        return Combinators.combine(
                        event(Broker.RABBIT),
                        event(Broker.RABBIT_CHANNEL),
                        event(Broker.SQS),
                        event(Broker.PUBSUB),
                        extra.list().ofMaxSize(2))
                .as((a, b, c, d, more) -> {
                    List<Event> all = new ArrayList<>(List.of(a, b, c, d));
                    all.addAll(more);
                    return all;
                });
    }

    static Arbitrary<Event> event(Broker broker) {
        return Combinators.combine(
                        Arbitraries.integers().between(1, 2),
                        Arbitraries.of(Holder.NONE, Holder.COMMITS, Holder.ROLLS_BACK, Holder.ROLLS_BACK),
                        // an SQS holder's slow end outlasts the 5 s visibility timeout: kept only by the wait
                        Arbitraries.of(0, 400, 2000, 2000).map(m -> broker == Broker.SQS && m == 2000 ? 6000 : m),
                        Arbitraries.of(true, false))
                .as((copies, holder, holdMillis, stop) -> new Event(broker, copies, holder, holdMillis, stop));
    }

    /**
     * Runs the try's events at once; each applied exactly once, none dead-lettered. About 5 s a try (the slow holders,
     * the container stops, the SQS polls); no shrinking, which would replay tries for minutes.
     */
    @AddLifecycleHook(SkipWithoutRabbit.class)
    @AddLifecycleHook(SkipWithoutPubSub.class)
    @Property(tries = 8, shrinking = ShrinkingMode.OFF, edgeCases = EdgeCasesMode.NONE)
    void everyEventIsAppliedOnceWhateverItsHolderAndContainerDo(@ForAll("tries") List<Event> events) throws Exception {
        start();
        int t = tries.incrementAndGet();
        System.out.println("try " + t + ": " + events);
        List<String> ids = new ArrayList<>();
        List<OtherProcessClaim> holders = new ArrayList<>();
        for (int i = 0; i < events.size(); i++) {
            String id = "w" + t + "-" + i + "-" + SUFFIX;
            ids.add(id);
            holders.add(
                    events.get(i).holder() == Holder.NONE
                            ? null
                            : new OtherProcessClaim(db.dataSource(), CONSUMER, id));
        }
        for (int i = 0; i < events.size(); i++) {
            for (int c = 0; c < events.get(i).copies(); c++) {
                send(events.get(i).broker(), ids.get(i));
            }
        }
        List<CompletableFuture<Void>> ended = new ArrayList<>();
        // a container is stopped at most once a try: each stop requeues its waiting messages (one delivery each)
        java.util.Set<String> stopped = ConcurrentHashMap.newKeySet();
        for (int i = 0; i < events.size(); i++) {
            Event e = events.get(i);
            OtherProcessClaim holder = holders.get(i);
            String id = ids.get(i);
            if (holder != null) {
                ended.add(CompletableFuture.runAsync(() -> endHolder(e, holder, id, stopped), HOLDERS));
            }
        }
        CompletableFuture.allOf(ended.toArray(CompletableFuture[]::new)).get(2, TimeUnit.MINUTES);
        String what = "events " + events + ", ids " + ids;
        for (int i = 0; i < events.size(); i++) {
            String id = ids.get(i);
            long byHolder = events.get(i).holder() == Holder.COMMITS ? 1 : 0;
            await().atMost(Duration.ofSeconds(60))
                    .until(() -> ledger(id) + byHolder >= 1 || deadLettered() > deadBefore);
        }
        // the copies drained: nothing left to apply an event twice
        await().atMost(Duration.ofSeconds(60))
                .until(() -> mq.held(sqsUrl) == 0 && ready(RABBIT) == 0 && ready(RABBIT_MANUAL) == 0);
        for (int i = 0; i < events.size(); i++) {
            String id = ids.get(i);
            long byHolder = events.get(i).holder() == Holder.COMMITS ? 1 : 0;
            assertThat(ledger(id) + byHolder)
                    .as("%s applied exactly once (%s; the listener's outcomes: %s)", id, what, held.heard(id))
                    .isEqualTo(1);
        }
        for (int i = 0; i < events.size(); i++) {
            if (events.get(i).broker() == Broker.SQS) {
                assertThat(sqsReceives.get(ids.get(i)))
                        .as(
                                "%s's SQS messages each received once: kept invisible through the wait (%s)",
                                ids.get(i), what)
                        .isEqualTo(1);
            }
        }
        assertThat(deadLettered() - deadBefore)
                .as(
                        "nothing dead-lettered (%s; RabbitMQ %s, SQS %s, Pub/Sub %s)",
                        what, ready(RABBIT_DEAD), mq.held(sqsDead), pubSubDead.get())
                .isZero();
    }

    /** The holder of {@code id} ends once the listener met it (or after 10 s), slowly or not, maybe after a stop. */
    static void endHolder(Event e, OtherProcessClaim holder, String id, java.util.Set<String> stopped) {
        try {
            long since = System.nanoTime();
            while (System.nanoTime() - since < TimeUnit.SECONDS.toNanos(10) && held.inProgress(id) == 0) {
                Thread.sleep(50);
            }
            String containerId = e.broker() == Broker.RABBIT ? "wait-auto" : "wait-manual";
            if (e.stopWhileWaiting()
                    && (e.broker() == Broker.RABBIT || e.broker() == Broker.RABBIT_CHANNEL)
                    && held.inProgress(id) > 0
                    && stopped.add(containerId)) {
                var container =
                        context.getBean(RabbitListenerEndpointRegistry.class).getListenerContainer(containerId);
                synchronized (CONTAINER_STOPS) {
                    container.stop();
                    container.start();
                }
            }
            Thread.sleep(e.holdMillis());
        } catch (InterruptedException x) {
            Thread.currentThread().interrupt();
        } finally {
            holder.end(e.holder() == Holder.COMMITS);
        }
    }

    static void send(Broker broker, String eventId) {
        switch (broker) {
            case RABBIT, RABBIT_CHANNEL ->
                context.getBean(RabbitTemplate.class)
                        .send(
                                "",
                                broker == Broker.RABBIT ? RABBIT : RABBIT_MANUAL,
                                MessageBuilder.withBody("20".getBytes(StandardCharsets.UTF_8))
                                        .setHeader("once-event-id", eventId)
                                        .build());
            case SQS -> mq.send(sqsUrl, null, eventId, "20");
            case PUBSUB ->
                context.getBean(PubSubTemplate.class)
                        .publish(PUBSUB, "20", Map.of("once-event-id", eventId))
                        .join();
        }
    }

    static long ledger(String eventId) {
        return context.getBean(JdbcTemplate.class)
                .queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, eventId);
    }

    static long ready(String queue) {
        var info = context.getBean(RabbitAdmin.class).getQueueInfo(queue);
        return info == null ? 0 : info.getMessageCount();
    }

    /** Messages in the three dead-letter destinations (the Pub/Sub ones pulled and counted once). */
    static final AtomicInteger pubSubDead = new AtomicInteger();
    // dead-lettered before the first try (the warm-up's)
    static long deadBefore;

    static long deadLettered() {
        for (AcknowledgeablePubsubMessage m :
                context.getBean(PubSubTemplate.class).pull(PUBSUB_DEAD, 10, true)) {
            pubSubDead.incrementAndGet();
            m.ack();
        }
        return ready(RABBIT_DEAD) + mq.held(sqsDead) + pubSubDead.get();
    }
}
