package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import dev.once.PermanentFailureException;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageBuilder;
import org.springframework.amqp.core.Queue;
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
 * {@code AckMode.MANUAL} on a real {@code @RabbitListener} (RabbitMQ on 127.0.0.1:5672): the body's
 * {@code channel.basicAck} takes effect after the database commit, so a rollback or a failed commit
 * after it does not lose the message; a duplicate, whose body never runs, is acknowledged by once.
 */
class RabbitManualAckTest {

    public static final String QUEUE = "once-spring-manual-" + UUID.randomUUID();
    public static final String DUPLICATES = "once-spring-manual-dup-" + UUID.randomUUID();
    public static final String POISON = "once-spring-manual-poison-" + UUID.randomUUID();
    public static final String DEAD = "once-spring-manual-dead-" + UUID.randomUUID();

    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static JdbcTemplate jdbc;
    static final Map<String, AtomicInteger> CALLS = new ConcurrentHashMap<>();

    @BeforeAll
    static void start() {
        RabbitBeans.assumeRunning();
        db = TestPostgres.shared().freshDatabase(4);
        db.execute(
                "CREATE TABLE ledger (event_id text NOT NULL, amount bigint NOT NULL)",
                // checked at commit: the commit itself fails, after the listener body returned
                "CREATE TABLE strict (id text, CONSTRAINT strict_id UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)",
                "INSERT INTO strict VALUES ('taken')");
        context = new AnnotationConfigApplicationContext(Config.class);
        jdbc = context.getBean(JdbcTemplate.class);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            RabbitAdmin admin = context.getBean(RabbitAdmin.class);
            admin.deleteQueue(QUEUE);
            admin.deleteQueue(DUPLICATES);
            admin.deleteQueue(POISON);
            admin.deleteQueue(DEAD);
            context.close();
        }
        if (db != null) {
            db.close();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @Import({JdbcListenerBeans.class, RabbitBeans.class})
    @EnableRabbit
    @EnableIdempotentListeners
    static class Config {
        @Bean
        DataSource dataSource() {
            return db.dataSource();
        }

        @Bean
        Queue queue() {
            return new Queue(QUEUE, false, false, false);
        }

        @Bean
        Queue duplicates() {
            return new Queue(DUPLICATES, false, false, false);
        }

        /** Rejected messages go to DEAD through the default exchange. */
        @Bean
        Queue poison() {
            return new Queue(
                    POISON,
                    false,
                    false,
                    false,
                    Map.of("x-dead-letter-exchange", "", "x-dead-letter-routing-key", DEAD));
        }

        @Bean
        Queue dead() {
            return new Queue(DEAD, false, false, false);
        }

        @Bean
        SimpleRabbitListenerContainerFactory rabbitListenerContainerFactory(CachingConnectionFactory cf) {
            SimpleRabbitListenerContainerFactory f = new SimpleRabbitListenerContainerFactory();
            f.setConnectionFactory(cf);
            return f;
        }

        @Bean
        Payments payments(JdbcTemplate jdbc) {
            return new Payments(jdbc);
        }
    }

    /** The application's listener, acknowledging by hand as MANUAL users do. */
    public static class Payments {
        final JdbcTemplate jdbc;

        Payments(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @RabbitListener(id = "manual", queues = "#{T(dev.once.spring.RabbitManualAckTest).QUEUE}", ackMode = "MANUAL")
        @IdempotentListener(consumer = "rabbit-manual")
        public void on(Message message, Channel channel) throws IOException {
            String id = (String) message.getMessageProperties().getHeader("once-event-id");
            int call = CALLS.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
            String body = new String(message.getBody(), StandardCharsets.UTF_8);
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", id);
            if (body.equals("fails-before-ack") && call == 1) {
                throw new IllegalStateException("first attempt of " + id + " fails before the body acknowledges");
            }
            channel.basicAck(message.getMessageProperties().getDeliveryTag(), false);
            if (body.equals("rollback") && call == 1) {
                throw new IllegalStateException("first attempt of " + id + " fails after its basicAck");
            }
            if (body.equals("commit-fails") && call == 1) {
                jdbc.update("INSERT INTO strict VALUES ('taken')"); // the COMMIT fails on the deferred constraint
            }
        }

        @RabbitListener(
                id = "manual-duplicates",
                queues = "#{T(dev.once.spring.RabbitManualAckTest).DUPLICATES}",
                ackMode = "MANUAL")
        @IdempotentListener(consumer = "rabbit-manual-dup")
        public void onDuplicate(Message message, Channel channel) throws IOException {
            String id = (String) message.getMessageProperties().getHeader("once-event-id");
            CALLS.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", id);
            channel.basicAck(message.getMessageProperties().getDeliveryTag(), false);
        }

        @RabbitListener(
                id = "manual-poison",
                queues = "#{T(dev.once.spring.RabbitManualAckTest).POISON}",
                ackMode = "MANUAL")
        @IdempotentListener(consumer = "rabbit-manual-poison")
        public void onPoison(Message message, Channel channel) throws IOException {
            String id = (String) message.getMessageProperties().getHeader("once-event-id");
            CALLS.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", id);
            throw new PermanentFailureException("event " + id + " can never be applied");
        }
    }

    static void publish(String queue, String eventId, String body) {
        context.getBean(RabbitTemplate.class)
                .send(
                        "",
                        queue,
                        MessageBuilder.withBody(body.getBytes(StandardCharsets.UTF_8))
                                .setHeader("once-event-id", eventId)
                                .build());
    }

    static long ledger(String eventId) {
        return jdbc.queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, eventId);
    }

    static int calls(String eventId) {
        return CALLS.computeIfAbsent(eventId, k -> new AtomicInteger()).get();
    }

    /** Ready messages; a container stopped first gives its unacknowledged ones back, so they count too. */
    static long ready(String queue) {
        var info = context.getBean(RabbitAdmin.class).getQueueInfo(queue);
        return info == null ? -1 : info.getMessageCount();
    }

    @Test
    void aRollbackAfterTheBodysBasicAckDoesNotLoseTheMessage() {
        publish(QUEUE, "m-1", "rollback");
        await().atMost(Duration.ofSeconds(30)).until(() -> ledger("m-1") == 1);
        assertThat(calls("m-1"))
                .as("redelivered after the rollback, although the body had called basicAck")
                .isEqualTo(2);
    }

    @Test
    void aFailedCommitAfterTheBodysBasicAckDoesNotLoseTheMessage() {
        publish(QUEUE, "m-2", "commit-fails");
        await().atMost(Duration.ofSeconds(30)).until(() -> ledger("m-2") == 1);
        assertThat(calls("m-2")).as("redelivered after the failed commit").isEqualTo(2);
    }

    @Test
    void aDuplicateWhoseBodyIsSkippedIsAcknowledgedByOnce() {
        publish(DUPLICATES, "d-1", "20");
        publish(DUPLICATES, "d-1", "20");
        publish(DUPLICATES, "d-2", "20");
        await().atMost(Duration.ofSeconds(30)).until(() -> ledger("d-2") == 1 && ready(DUPLICATES) == 0);
        context.getBean(RabbitListenerEndpointRegistry.class)
                .getListenerContainer("manual-duplicates")
                .stop();
        // closing the connection gives every unacknowledged message back to the queue
        context.getBean(CachingConnectionFactory.class).resetConnection();
        await().during(Duration.ofSeconds(1))
                .atMost(Duration.ofSeconds(10))
                .untilAsserted(() -> assertThat(ready(DUPLICATES))
                        .as("nothing left unacknowledged")
                        .isZero());
        assertThat(ledger("d-1")).isEqualTo(1);
        assertThat(calls("d-1")).isEqualTo(1);
    }

    @Test
    void aRetryableFailureBeforeTheBodysBasicAckIsRequeuedNotLeftWaiting() {
        publish(QUEUE, "m-3", "fails-before-ack");
        // the channel stays open: without a nack the message would wait for it to close
        await().atMost(Duration.ofSeconds(30)).until(() -> ledger("m-3") == 1);
        assertThat(calls("m-3"))
                .as("redelivered at once after the failed attempt")
                .isEqualTo(2);
    }

    @Test
    void aPermanentFailureIsRejectedToTheDeadLetterQueue() {
        publish(POISON, "p-1", "poison");
        await().atMost(Duration.ofSeconds(30)).until(() -> ready(DEAD) == 1);
        assertThat(calls("p-1")).as("rejected without requeue: tried once").isEqualTo(1);
        assertThat(ledger("p-1")).isZero();
    }

    static class NoMessage {
        @IdempotentListener(consumer = "no-tag", eventId = "'e-1'")
        public void on(String body, Channel channel) {}
    }

    @Test
    void aChannelWithoutAMessageToReadTheDeliveryTagFromIsRefusedAtStartup() throws Exception {
        var method = NoMessage.class.getMethod("on", String.class, Channel.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> ListenerMethod.of(method, null))
                .isInstanceOf(dev.once.InvalidConfigurationException.class)
                .hasMessageContaining("NoMessage.on")
                .hasMessageContaining("delivery tag");
    }
}
