package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import dev.once.Outcome;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
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
 * A {@code @RabbitListener} redelivery of an event whose claim another process holds, its transaction open (a slow
 * holder whose channel a partition closed): real RabbitMQ (a quorum queue with {@code x-delivery-limit} 2 and no
 * dead-letter exchange, so a message past the limit is dropped) and real PostgreSQL, the holder a plain
 * {@code IdempotentConsumer} of the same consumer on the same database. Each try of the listener's claim gives up
 * after the lock timeout (IN_PROGRESS); requeued each time, the message would run out of deliveries while the
 * holder works, and be lost when the holder then rolls back. The holder: {@link OtherProcessClaim}.
 */
class RabbitHeldClaimTest {

    public static final String QUEUE = "once-spring-held-" + UUID.randomUUID();
    /** Consumed by a method taking the {@code Channel}, its container in MANUAL acknowledge mode. */
    public static final String MANUAL_QUEUE = "once-spring-held-manual-" + UUID.randomUUID();

    static final String CONSUMER = "rabbit-held";

    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static JdbcTemplate jdbc;
    // the listener's outcomes, each with its delivery attempt (x-delivery-count + 1)
    static HeldClaims held;

    @BeforeAll
    static void start() {
        RabbitBeans.assumeRunning();
        db = TestPostgres.shared().freshDatabase(6);
        db.execute("CREATE TABLE ledger (event_id text NOT NULL, amount bigint NOT NULL)");
        context = new AnnotationConfigApplicationContext(Config.class);
        jdbc = context.getBean(JdbcTemplate.class);
        held = context.getBean(HeldClaims.class);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.getBean(RabbitAdmin.class).deleteQueue(QUEUE);
            context.getBean(RabbitAdmin.class).deleteQueue(MANUAL_QUEUE);
            context.close();
        }
        if (db != null) {
            db.close();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @EnableRabbit
    @EnableIdempotentListeners
    @Import({JdbcListenerBeans.class, HeldClaims.class, RabbitBeans.class})
    static class Config {
        @Bean
        DataSource dataSource() {
            return db.dataSource();
        }

        @Bean
        Queue queue() {
            return QueueBuilder.durable(QUEUE).quorum().deliveryLimit(2).build();
        }

        @Bean
        Queue manualQueue() {
            return QueueBuilder.durable(MANUAL_QUEUE).quorum().deliveryLimit(2).build();
        }

        /** MANUAL acks: the body acks through the Channel, once defers the ack to the commit. */
        @Bean
        SimpleRabbitListenerContainerFactory manualFactory(CachingConnectionFactory cf) {
            SimpleRabbitListenerContainerFactory f = new SimpleRabbitListenerContainerFactory();
            f.setConnectionFactory(cf);
            f.setAcknowledgeMode(AcknowledgeMode.MANUAL);
            f.setContainerCustomizer(c -> c.setShutdownTimeout(TimeUnit.MINUTES.toMillis(10)));
            return f;
        }

        /**
         * Requeues a failed message (the default). The stop waits for a listener call ten minutes before it interrupts
         * the thread: only the wait's own look at its container ends it sooner.
         */
        @Bean
        SimpleRabbitListenerContainerFactory rabbitListenerContainerFactory(CachingConnectionFactory cf) {
            SimpleRabbitListenerContainerFactory f = new SimpleRabbitListenerContainerFactory();
            f.setConnectionFactory(cf);
            f.setDefaultRequeueRejected(true);
            f.setContainerCustomizer(c -> c.setShutdownTimeout(TimeUnit.MINUTES.toMillis(10)));
            return f;
        }

        @Bean
        Payments payments(JdbcTemplate jdbc) {
            return new Payments(jdbc);
        }
    }

    /** The application's listener. */
    public static class Payments {
        final JdbcTemplate jdbc;
        final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();

        Payments(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        public int calls(String eventId) {
            return calls.computeIfAbsent(eventId, k -> new AtomicInteger()).get();
        }

        @RabbitListener(id = "held", queues = "#{T(dev.once.spring.RabbitHeldClaimTest).QUEUE}")
        @IdempotentListener(consumer = CONSUMER)
        public void on(Message message) {
            String id = (String) message.getMessageProperties().getHeader("once-event-id");
            calls.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", id);
        }

        @RabbitListener(
                id = "held-manual",
                queues = "#{T(dev.once.spring.RabbitHeldClaimTest).MANUAL_QUEUE}",
                containerFactory = "manualFactory")
        @IdempotentListener(consumer = CONSUMER)
        public void onManual(Message message, Channel channel) throws IOException {
            on(message);
            channel.basicAck(message.getMessageProperties().getDeliveryTag(), false);
        }
    }

    static void publish(String eventId) {
        publish(QUEUE, eventId);
    }

    static void publish(String queue, String eventId) {
        context.getBean(RabbitTemplate.class)
                .send(
                        "",
                        queue,
                        MessageBuilder.withBody("20".getBytes(StandardCharsets.UTF_8))
                                .setHeader("once-event-id", eventId)
                                .build());
    }

    static long ledger(String eventId) {
        return jdbc.queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, eventId);
    }

    static int calls(String eventId) {
        return context.getBean(Payments.class).calls(eventId);
    }

    /**
     * The listener meets the holder once more than the queue's delivery limit (2) allows redeliveries; the holder then
     * rolls back. Requeued at each IN_PROGRESS, the message was dropped at the limit and the event never applied.
     */
    @Test
    void aMessageWhoseClaimAnotherProcessHoldsOutlastsTheDeliveryLimitAndIsAppliedWhenTheHolderRollsBack()
            throws InterruptedException {
        OtherProcessClaim holder = new OtherProcessClaim(db.dataSource(), CONSUMER, "held-1");
        publish("held-1");
        await().atMost(Duration.ofSeconds(30)).until(() -> held.inProgress("held-1") >= 3);
        assertThat(holder.end(false).status()).isEqualTo(Outcome.Status.FAILED_RETRYABLE);
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(ledger("held-1"))
                        .as(
                                "event applied exactly once after the holder rolled back, not dropped at the queue's"
                                        + " x-delivery-limit (the listener's outcomes: %s)",
                                held.statuses("held-1"))
                        .isEqualTo(1));
        assertThat(calls("held-1")).as("the body ran once").isEqualTo(1);
    }

    /** The holder commits while the listener waits: the message is a duplicate, acknowledged, the body skipped. */
    @Test
    void aMessageWhoseHolderCommitsIsADuplicate() throws InterruptedException {
        OtherProcessClaim holder = new OtherProcessClaim(db.dataSource(), CONSUMER, "held-2");
        publish("held-2");
        await().atMost(Duration.ofSeconds(30)).until(() -> held.inProgress("held-2") >= 3);
        assertThat(holder.end(true).status()).isEqualTo(Outcome.Status.APPLIED);
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(held.statuses("held-2"))
                        .as("the message kept through the holder's work is a duplicate once it committed")
                        .endsWith(Outcome.Status.DUPLICATE));
        assertThat(calls("held-2"))
                .as("the listener's body skipped: the holder applied the event")
                .isZero();
        assertThat(ledger("held-2")).isZero();
    }

    /**
     * The listener container is stopped while a call waits for a holder: the stop ends the wait (the message goes
     * back to the queue), rather than waiting for the holder, or the container's shutdown timeout.
     */
    @Test
    void stoppingTheContainerEndsTheWait() throws InterruptedException {
        var container = context.getBean(RabbitListenerEndpointRegistry.class).getListenerContainer("held");
        OtherProcessClaim holder = new OtherProcessClaim(db.dataSource(), CONSUMER, "held-3");
        try {
            publish("held-3");
            await().atMost(Duration.ofSeconds(30)).until(() -> held.inProgress("held-3") >= 2);
            CompletableFuture<Void> stopped = CompletableFuture.runAsync(container::stop, OwnThreads.each());
            await().atMost(Duration.ofSeconds(30))
                    .untilAsserted(() -> assertThat(stopped)
                            .as("the container's stop returned while the holder still holds the claim")
                            .isDone());
        } finally {
            holder.end(false);
            container.start();
        }
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(ledger("held-3"))
                        .as("event applied exactly once after the restart")
                        .isEqualTo(1));
    }

    /**
     * A method taking the {@code Channel} (MANUAL acks): the listener meets the holder more often than the queue's
     * delivery limit (2) allows redeliveries, the holder then rolls back. Each try's rollback sent a deferred
     * {@code basicNack} with requeue, so the message was dropped at the limit and the event never applied.
     */
    @Test
    void aChannelMethodsMessageWhoseHolderRollsBackOutlastsTheDeliveryLimitAndIsAppliedOnce()
            throws InterruptedException {
        OtherProcessClaim holder = new OtherProcessClaim(db.dataSource(), CONSUMER, "manual-1");
        publish(MANUAL_QUEUE, "manual-1");
        await().atMost(Duration.ofSeconds(30)).until(() -> held.inProgress("manual-1") >= 3);
        assertThat(holder.end(false).status()).isEqualTo(Outcome.Status.FAILED_RETRYABLE);
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(ledger("manual-1"))
                        .as(
                                "event applied exactly once after the holder rolled back, not dropped at the queue's"
                                        + " x-delivery-limit (the listener's outcomes: %s)",
                                held.statuses("manual-1"))
                        .isEqualTo(1));
        assertThat(calls("manual-1")).as("the body ran once").isEqualTo(1);
        assertThat(held.attempts("manual-1"))
                .as("one delivery, kept in hand through the holder's work, not requeued at each try")
                .containsOnly(1);
    }

    /** A method taking the {@code Channel}: the holder commits while it waits; a duplicate, acked by once. */
    @Test
    void aChannelMethodsMessageWhoseHolderCommitsIsADuplicateAckedByOnce() throws InterruptedException {
        OtherProcessClaim holder = new OtherProcessClaim(db.dataSource(), CONSUMER, "manual-2");
        publish(MANUAL_QUEUE, "manual-2");
        await().atMost(Duration.ofSeconds(30)).until(() -> held.inProgress("manual-2") >= 3);
        assertThat(holder.end(true).status()).isEqualTo(Outcome.Status.APPLIED);
        await().atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(held.statuses("manual-2"))
                        .as("the message kept through the holder's work is a duplicate once it committed")
                        .endsWith(Outcome.Status.DUPLICATE));
        assertThat(calls("manual-2"))
                .as("the body skipped: the holder applied the event")
                .isZero();
    }
}
