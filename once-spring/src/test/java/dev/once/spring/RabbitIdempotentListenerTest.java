package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
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
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;

/** {@code @IdempotentListener} on a real {@code @RabbitListener} (RabbitMQ on 127.0.0.1:5672, AUTO ack). */
class RabbitIdempotentListenerTest {

    public static final String QUEUE = "once-spring-" + UUID.randomUUID();

    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static JdbcTemplate jdbc;

    @BeforeAll
    static void start() {
        RabbitBeans.assumeRunning();
        db = TestPostgres.shared().freshDatabase(4);
        db.execute("CREATE TABLE ledger (event_id text NOT NULL, amount bigint NOT NULL)");
        context = new AnnotationConfigApplicationContext(Config.class);
        jdbc = context.getBean(JdbcTemplate.class);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.getBean(RabbitAdmin.class).deleteQueue(QUEUE);
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
        SimpleRabbitListenerContainerFactory rabbitListenerContainerFactory(CachingConnectionFactory cf) {
            SimpleRabbitListenerContainerFactory f = new SimpleRabbitListenerContainerFactory();
            f.setConnectionFactory(cf);
            f.setDefaultRequeueRejected(true);
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

        @RabbitListener(queues = "#{T(dev.once.spring.RabbitIdempotentListenerTest).QUEUE}")
        @IdempotentListener(consumer = "rabbit-billing")
        public void on(Message message) {
            String id = (String) message.getMessageProperties().getHeader("once-event-id");
            int call = calls.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", id);
            if (new String(message.getBody(), StandardCharsets.UTF_8).equals("flaky") && call == 1) {
                throw new IllegalStateException("first attempt of " + id + " fails after its write");
            }
        }
    }

    static void publish(String eventId, String body) {
        context.getBean(RabbitTemplate.class)
                .send(
                        "",
                        QUEUE,
                        MessageBuilder.withBody(body.getBytes(StandardCharsets.UTF_8))
                                .setHeader("once-event-id", eventId)
                                .build());
    }

    static long ledger(String eventId) {
        return jdbc.queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, eventId);
    }

    static int calls(String eventId) {
        return context.getBean(Payments.class).calls(eventId);
    }

    static boolean drained() {
        var info = context.getBean(RabbitAdmin.class).getQueueInfo(QUEUE);
        return info != null && info.getMessageCount() == 0;
    }

    @Test
    void duplicatePublishIsAppliedOnceAndAcknowledged() {
        publish("r-1", "20");
        publish("r-1", "20");
        publish("r-2", "20");
        await().atMost(Duration.ofSeconds(30)).until(() -> ledger("r-2") == 1 && calls("r-1") == 1 && drained());
        assertThat(ledger("r-1")).as("effect applied exactly once").isEqualTo(1);
    }

    @Test
    void failedAttemptIsRolledBackRequeuedAndAppliedOnce() {
        publish("r-3", "flaky");
        await().atMost(Duration.ofSeconds(30)).until(() -> calls("r-3") == 2 && drained());
        assertThat(ledger("r-3")).as("the failed attempt's write rolled back").isEqualTo(1);
    }
}
