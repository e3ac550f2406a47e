package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.cloud.pubsub.v1.Subscriber;
import com.google.cloud.spring.pubsub.core.PubSubTemplate;
import com.google.cloud.spring.pubsub.integration.AckMode;
import com.google.cloud.spring.pubsub.integration.inbound.PubSubInboundChannelAdapter;
import com.google.cloud.spring.pubsub.support.AcknowledgeablePubsubMessage;
import com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage;
import com.google.cloud.spring.pubsub.support.GcpPubSubHeaders;
import dev.once.Outcome;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
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
import org.springframework.integration.channel.QueueChannel;
import org.springframework.integration.config.EnableIntegration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.Message;

/**
 * Spring Cloud GCP Pub/Sub deliveries of an event whose claim another process holds, its transaction open past the
 * subscription's ack deadline (10 s): Google's emulator, subscriptions whose dead-letter policy allows 5 delivery
 * attempts (Pub/Sub's least), real PostgreSQL, the holder a plain {@code IdempotentConsumer} of the same consumer on
 * the same database ({@link OtherProcessClaim}). Each try of the listener's claim gives up after 200 ms
 * (IN_PROGRESS); nacked each time, the message spent its 5 attempts in a second and went to the dead-letter topic
 * unapplied while the holder still worked, and was lost when the holder rolled back. Kept in hand, the streaming
 * subscriber extends its lease meanwhile. One listener is fed by {@code PubSubTemplate.subscribe}, one by a
 * {@code PubSubInboundChannelAdapter} in MANUAL mode.
 */
class PubSubHeldClaimTest {

    static final String SUFFIX = Long.toString(System.nanoTime(), 36);
    static final String TOPIC = "spring-held-" + SUFFIX;
    static final String ADAPTER_TOPIC = "spring-held-adapter-" + SUFFIX;
    static final String DEAD_LETTERS = "spring-held-dlq-" + SUFFIX;
    static final int MAX_DELIVERY_ATTEMPTS = 5;
    /** Longer than the subscriptions' ack deadline: a lease not extended would have lapsed. */
    static final Duration PAST_THE_ACK_DEADLINE = Duration.ofSeconds(13);

    static PubSubTestBeans emulator;
    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static Subscriber subscriber;
    static HeldClaims held;

    @BeforeAll
    static void start() {
        // streams end within 5 s: a stopped adapter's stream does not live on in the emulator (see there)
        emulator = new PubSubTestBeans(PubSubIdempotentListenerTest.STREAMS_END_WITHIN_5_S);
        emulator.create(DEAD_LETTERS, DEAD_LETTERS);
        emulator.createDeadLettering(TOPIC, TOPIC, DEAD_LETTERS, MAX_DELIVERY_ATTEMPTS);
        emulator.createDeadLettering(ADAPTER_TOPIC, ADAPTER_TOPIC, DEAD_LETTERS, MAX_DELIVERY_ATTEMPTS);
        db = TestPostgres.shared().freshDatabase(6);
        db.execute("CREATE TABLE ledger (event_id text NOT NULL, amount bigint NOT NULL)");
        context = new AnnotationConfigApplicationContext(Config.class);
        held = context.getBean(HeldClaims.class);
        subscriber = context.getBean(PubSubTemplate.class).subscribe(TOPIC, context.getBean(Payments.class)::on);
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
            emulator.delete(TOPIC, TOPIC);
            emulator.delete(ADAPTER_TOPIC, ADAPTER_TOPIC);
            emulator.delete(DEAD_LETTERS, DEAD_LETTERS);
            emulator.close();
        }
        if (db != null) {
            db.close();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    @EnableIntegration
    @Import({JdbcListenerBeans.class, HeldClaims.class})
    static class Config {
        @Bean
        DataSource dataSource() {
            return db.dataSource();
        }

        @Bean
        PubSubTemplate pubSubTemplate() {
            return PubSubTestBeans.template(
                    emulator.channel, PubSubIdempotentListenerTest.subscriberFactory(emulator.channel));
        }

        @Bean
        DirectChannel heldInput() {
            return new DirectChannel();
        }

        /** What the adapter's flow threw, for the test to see. */
        @Bean
        QueueChannel heldErrors() {
            return new QueueChannel();
        }

        @Bean
        PubSubInboundChannelAdapter heldAdapter(PubSubTemplate template, DirectChannel heldInput, QueueChannel errors) {
            PubSubInboundChannelAdapter a = new PubSubInboundChannelAdapter(template, ADAPTER_TOPIC);
            a.setOutputChannel(heldInput);
            a.setErrorChannel(errors);
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

        Payments(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        int calls(String eventId) {
            return calls.computeIfAbsent(eventId, k -> new AtomicInteger()).get();
        }

        @IdempotentListener(consumer = "pubsub-held")
        public void on(BasicAcknowledgeablePubsubMessage message) {
            String id = message.getPubsubMessage().getAttributesOrThrow("once-event-id");
            calls.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", id);
        }

        @ServiceActivator(inputChannel = "heldInput")
        @IdempotentListener(consumer = "pubsub-held")
        public void onAdapter(Message<String> message) {
            String id = (String) message.getHeaders().get("once-event-id");
            calls.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", id);
            GcpPubSubHeaders.getOriginalMessage(message).ifPresent(BasicAcknowledgeablePubsubMessage::ack);
        }
    }

    static void publish(String topic, String eventId) throws Exception {
        context.getBean(PubSubTemplate.class)
                .publish(topic, "20", Map.of("once-event-id", eventId))
                .get(30, TimeUnit.SECONDS);
    }

    static long ledger(String eventId) {
        return context.getBean(JdbcTemplate.class)
                .queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, eventId);
    }

    static int calls(String eventId) {
        return context.getBean(Payments.class).calls(eventId);
    }

    /** The dead-letter topic's messages of {@code eventId} (pulled and acked). */
    static final List<String> deadLettered = new CopyOnWriteArrayList<>();

    static List<String> deadLettered(String eventId) {
        for (AcknowledgeablePubsubMessage m :
                context.getBean(PubSubTemplate.class).pull(DEAD_LETTERS, 10, true)) {
            deadLettered.add(m.getPubsubMessage().getAttributesOrDefault("once-event-id", "?"));
            m.ack();
        }
        return deadLettered.stream().filter(eventId::equals).toList();
    }

    /**
     * Returns once the listener met {@code eventId}'s holder as often as the policy allows attempts, and the holder
     * has held it past the ack deadline.
     */
    static void heldPastTheDeadline(String eventId) {
        long since = System.nanoTime();
        await().atMost(Duration.ofSeconds(60))
                .until(() -> held.inProgress(eventId) >= MAX_DELIVERY_ATTEMPTS
                        && System.nanoTime() - since > PAST_THE_ACK_DEADLINE.toNanos());
    }

    /** Applied exactly once, by the listener's one body run, and not dead-lettered. */
    static void appliedOnceNotDeadLettered(String eventId) {
        await().atMost(Duration.ofSeconds(60))
                .until(() -> ledger(eventId) > 0 || !deadLettered(eventId).isEmpty());
        String what = "the listener's outcomes: " + held.statuses(eventId);
        assertThat(deadLettered(eventId))
                .as("forwarded unapplied to the dead-letter topic by the subscription's policy; " + what)
                .isEmpty();
        assertThat(ledger(eventId)).as("applied exactly once; " + what).isEqualTo(1);
        assertThat(calls(eventId)).as("the body ran once; " + what).isEqualTo(1);
    }

    /** {@code PubSubTemplate.subscribe}: the holder works past the ack deadline, then rolls back. */
    @Test
    void aSubscribedMessageWhoseHolderRollsBackIsKeptInHandAndAppliedNotDeadLettered() throws Exception {
        OtherProcessClaim holder = new OtherProcessClaim(db.dataSource(), "pubsub-held", "held-1");
        publish(TOPIC, "held-1");
        heldPastTheDeadline("held-1");
        assertThat(holder.end(false).status()).isEqualTo(Outcome.Status.FAILED_RETRYABLE);
        appliedOnceNotDeadLettered("held-1");
    }

    /** The adapter's message: the holder works past the ack deadline, then commits: a duplicate, acked. */
    @Test
    void anAdapterMessageWhoseHolderCommitsIsADuplicateNotDeadLettered() throws Exception {
        OtherProcessClaim holder = new OtherProcessClaim(db.dataSource(), "pubsub-held", "held-2");
        publish(ADAPTER_TOPIC, "held-2");
        heldPastTheDeadline("held-2");
        assertThat(holder.end(true).status()).isEqualTo(Outcome.Status.APPLIED);
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(held.statuses("held-2"))
                        .as("the message kept through the holder's work is a duplicate once it committed")
                        .endsWith(Outcome.Status.DUPLICATE));
        assertThat(calls("held-2"))
                .as("the body skipped: the holder applied the event")
                .isZero();
        assertThat(deadLettered("held-2")).as("not dead-lettered").isEmpty();
    }

    /**
     * The adapter is stopped while its call waits for a holder: the wait ends (HolderWaitAbandonedException, the
     * message nacked), rather than going on for the holder, whose subscriber's stop waits for the messages in hand.
     * Whether the emulator then hands the nacked message out again is not asserted: nacked by a subscriber that was
     * stopping, it came back neither to the restarted adapter nor to a synchronous pull within 180 s (the emulator
     * keeps a cancelled stream's messages, see {@code PubSubIdempotentListenerTest.STREAMS_END_WITHIN_5_S}).
     */
    @Test
    void stoppingTheAdapterEndsTheWait() throws Exception {
        PubSubInboundChannelAdapter adapter = context.getBean(PubSubInboundChannelAdapter.class);
        QueueChannel errors = context.getBean("heldErrors", QueueChannel.class);
        OtherProcessClaim holder = new OtherProcessClaim(db.dataSource(), "pubsub-held", "held-3");
        List<Throwable> thrown = new ArrayList<>();
        try {
            publish(ADAPTER_TOPIC, "held-3");
            await().atMost(Duration.ofSeconds(30)).until(() -> held.inProgress("held-3") >= 2);
            adapter.stop();
            Message<?> error = errors.receive(TimeUnit.SECONDS.toMillis(20));
            assertThat(error)
                    .as("the waiting call ended when its adapter stopped")
                    .isNotNull();
            Throwable t = (Throwable) error.getPayload();
            while (t != null) {
                thrown.add(t);
                t = t.getCause();
            }
            assertThat(thrown)
                    .as("the call gave up its wait because the adapter stopped")
                    .anySatisfy(e -> assertThat(e).isInstanceOf(HolderWaitAbandonedException.class));
        } finally {
            holder.end(false);
            adapter.start();
        }
        assertThat(ledger("held-3")).as("nothing applied by the abandoned call").isZero();
    }
}
