package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import dev.once.testsupport.TestDatabase;
import io.awspring.cloud.sqs.annotation.SqsListener;
import io.awspring.cloud.sqs.config.SqsBootstrapConfiguration;
import io.awspring.cloud.sqs.config.SqsMessageListenerContainerFactory;
import io.awspring.cloud.sqs.listener.acknowledgement.Acknowledgement;
import io.awspring.cloud.sqs.listener.acknowledgement.handler.AcknowledgementMode;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.messaging.Message;
import org.springframework.transaction.support.TransactionTemplate;
import software.amazon.awssdk.services.sqs.SqsAsyncClient;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/**
 * {@code @IdempotentListener} on Spring Cloud AWS {@code @SqsListener} methods run by their real listener container,
 * fed from an ElasticMQ queue (1 s visibility timeout): in MANUAL mode a body that acknowledges and then fails is not
 * deleted (it was, by the container's acknowledgement processor, before the rollback: the event was lost) and is
 * applied when it comes back; a copy of an applied event, whose body is skipped, is deleted by once; the event id is
 * the {@code once-event-id} message attribute, not the SQS message id. An ON_SUCCESS listener applies and the container
 * deletes; called in a caller's transaction it is refused before its body, naming the fix; a batch listener taking a
 * {@code BatchAcknowledgement} and {@code acknowledgementMode = ALWAYS} fail the context start.
 */
class SqsIdempotentListenerTest {

    static final String MANUAL = "once-spring-sqs-manual-" + UUID.randomUUID();
    static final String ON_SUCCESS = "once-spring-sqs-on-success-" + UUID.randomUUID();
    static final String FACTORY_MANUAL = "once-spring-sqs-factory-manual-" + UUID.randomUUID();
    static final Map<String, Integer> calls = new ConcurrentHashMap<>();
    static final List<String> sources = new CopyOnWriteArrayList<>();

    static ElasticMqQueues mq;
    static SqsAsyncClient sqs;
    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static String manualUrl;
    static String onSuccessUrl;
    static String factoryManualUrl;

    @BeforeAll
    static void start() {
        mq = ElasticMqQueues.start();
        sqs = mq.sqs;
        manualUrl = queue(MANUAL);
        onSuccessUrl = queue(ON_SUCCESS);
        factoryManualUrl = queue(FACTORY_MANUAL);
        System.setProperty("once.test.sqs.manual", MANUAL);
        System.setProperty("once.test.sqs.on-success", ON_SUCCESS);
        System.setProperty("once.test.sqs.factory-manual", FACTORY_MANUAL);
        db = ElasticMqQueues.ledgerDatabase();
        context = ElasticMqQueues.application(db, Config.class, Listeners.class);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
        if (db != null) {
            db.close();
        }
        if (mq != null) {
            mq.close();
        }
    }

    private static String queue(String name) {
        return mq.queue(name, Map.of(QueueAttributeName.VISIBILITY_TIMEOUT, "1"));
    }

    @Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    @Import({SqsBootstrapConfiguration.class, JdbcListenerBeans.class})
    static class Config {
        @Bean
        SqsMessageListenerContainerFactory<Object> defaultSqsListenerContainerFactory() {
            return mq.containers().build();
        }

        /** MANUAL set on the factory only: its listeners need no acknowledgementMode and no Acknowledgement. */
        @Bean
        SqsMessageListenerContainerFactory<Object> manualSqsListenerContainerFactory() {
            return SqsMessageListenerContainerFactory.builder()
                    .sqsAsyncClient(sqs)
                    .configure(o -> o.pollTimeout(Duration.ofSeconds(1))
                            .maxDelayBetweenPolls(Duration.ofSeconds(1))
                            .acknowledgementMode(AcknowledgementMode.MANUAL)
                            .acknowledgementInterval(Duration.ZERO)
                            .acknowledgementThreshold(0))
                    .build();
        }
    }

    public static class Listeners {
        final JdbcTemplate jdbc;

        public Listeners(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @SqsListener(value = "${once.test.sqs.manual}", acknowledgementMode = "MANUAL")
        @IdempotentListener(consumer = "sqs-manual")
        public void manual(Message<String> message, Acknowledgement ack) {
            String id = (String) message.getHeaders().get("once-event-id");
            int call = calls.merge(id, 1, Integer::sum);
            jdbc.update("INSERT INTO ledger (event_id) VALUES (?)", id);
            ack.acknowledge();
            if (message.getPayload().equals("fails once") && call == 1) {
                throw new IllegalStateException("the body of " + id + " fails after acknowledging, once");
            }
        }

        @SqsListener("${once.test.sqs.on-success}")
        @IdempotentListener(consumer = "sqs-on-success")
        public void onSuccess(Message<String> message) {
            calls.merge((String) message.getHeaders().get("once-event-id"), 1, Integer::sum);
            jdbc.update(
                    "INSERT INTO ledger (event_id) VALUES (?)",
                    message.getHeaders().get("once-event-id"));
        }

        /** MANUAL from its container factory; deletes through the static Acknowledgement.acknowledge(message). */
        @SqsListener(value = "${once.test.sqs.factory-manual}", factory = "manualSqsListenerContainerFactory")
        @IdempotentListener(consumer = "sqs-factory-manual")
        public void factoryManual(Message<String> message) {
            String id = (String) message.getHeaders().get("once-event-id");
            calls.merge(id, 1, Integer::sum);
            jdbc.update("INSERT INTO ledger (event_id) VALUES (?)", id);
            Acknowledgement.acknowledge(message);
        }
    }

    static void send(String url, String eventId, String body) {
        mq.send(url, null, eventId, body);
    }

    static long ledger(String eventId) {
        return context.getBean(JdbcTemplate.class)
                .queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, eventId);
    }

    /** Messages in the queue, visible or in flight. */
    static long held(String url) {
        return mq.held(url);
    }

    @Test
    void aManualBodyThatAcknowledgesThenFailsIsRedeliveredAndACopyIsDeleted() {
        send(manualUrl, "m-1", "ok");
        send(manualUrl, "m-2", "fails once");
        Awaitility.await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> {
            assertThat(ledger("m-1")).as("m-1 applied once").isEqualTo(1);
            assertThat(ledger("m-2")).as("m-2 applied once, when it came back").isEqualTo(1);
            assertThat(held(manualUrl)).as("both deleted").isZero();
        });
        assertThat(calls.get("m-2"))
                .as("m-2's first call failed after acknowledging")
                .isEqualTo(2);
        send(manualUrl, "m-1", "ok"); // the producer's retry: a new SQS message id, the same event
        Awaitility.await()
                .atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(held(manualUrl))
                        .as("the copy deleted by once: its body, which acknowledges, is skipped")
                        .isZero());
        assertThat(ledger("m-1")).as("m-1 still applied once").isEqualTo(1);
        assertThat(calls.get("m-1")).as("the copy's body skipped").isEqualTo(1);
    }

    @Test
    void anOnSuccessListenerAppliesOnceAndIsRefusedInACallersTransaction() {
        send(onSuccessUrl, "s-1", "ok");
        send(onSuccessUrl, "s-1", "ok");
        Awaitility.await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> {
            assertThat(held(onSuccessUrl)).as("both deleted by the container").isZero();
            assertThat(ledger("s-1")).as("s-1 applied once").isEqualTo(1);
        });
        assertThat(db.queryLong("SELECT count(*) FROM once_stream_position"))
                .as("a standard queue's messages keep no position")
                .isZero();
        Listeners listeners = context.getBean(Listeners.class);
        Message<String> message = org.springframework.messaging.support.MessageBuilder.withPayload("ok")
                .setHeader("once-event-id", "s-2")
                .build();
        assertThatThrownBy(() -> new TransactionTemplate(context.getBean(JdbcTransactionManager.class))
                        .executeWithoutResult(s -> listeners.onSuccess(message)))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("Listeners.onSuccess")
                .hasMessageContaining("acknowledgementMode = \"MANUAL\"");
        assertThat(ledger("s-2")).as("refused before its body").isZero();
    }

    /**
     * MANUAL set on the container factory only, a listener without an Acknowledgement parameter: once counted it as
     * ON_SUCCESS, so the copy (whose body, which deletes, is skipped) was never deleted and came back every visibility
     * timeout, until a dead-letter queue took it.
     */
    @Test
    void aListenerManualByItsFactoryHasItsCopyDeleted() {
        send(factoryManualUrl, "f-1", "ok");
        Awaitility.await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> {
            assertThat(ledger("f-1")).as("f-1 applied once").isEqualTo(1);
            assertThat(held(factoryManualUrl)).as("f-1 deleted by its body").isZero();
        });
        send(factoryManualUrl, "f-1", "ok"); // the producer's retry: a new SQS message id, the same event
        Awaitility.await()
                .atMost(Duration.ofSeconds(30))
                .untilAsserted(() -> assertThat(held(factoryManualUrl))
                        .as("the copy deleted by once: its body, which deletes, is skipped")
                        .isZero());
        assertThat(ledger("f-1")).as("f-1 still applied once").isEqualTo(1);
        assertThat(calls.get("f-1")).as("the copy's body skipped").isEqualTo(1);
    }

    /** Container factories in the modes the annotation does not show. */
    @Configuration(proxyBeanMethods = false)
    @Import(SqsBootstrapConfiguration.class)
    static class Factories {
        @Bean
        SqsMessageListenerContainerFactory<Object> defaultSqsListenerContainerFactory() {
            return SqsMessageListenerContainerFactory.builder()
                    .sqsAsyncClient(sqs)
                    .configure(o -> o.acknowledgementMode(AcknowledgementMode.ALWAYS))
                    .build();
        }

        @Bean
        SqsMessageListenerContainerFactory<Object> manualSqsListenerContainerFactory() {
            return SqsMessageListenerContainerFactory.builder()
                    .sqsAsyncClient(sqs)
                    .configure(o -> o.acknowledgementMode(AcknowledgementMode.MANUAL))
                    .build();
        }
    }

    /** ALWAYS from the default factory: a failed call's message is deleted, its event lost. */
    static class FactoryAlwaysListener {
        @SqsListener("once-spring-sqs-never-started")
        @IdempotentListener(consumer = "sqs-factory-always")
        public void on(Message<String> message) {}
    }

    /** A batch in MANUAL from its factory: the body's deletes are made at once. */
    static class FactoryManualBatchListener {
        @SqsListener(value = "once-spring-sqs-never-started", factory = "manualSqsListenerContainerFactory")
        @IdempotentListener(consumer = "sqs-factory-manual-batch")
        public void on(List<Message<String>> messages) {}
    }

    /** MANUAL from its factory, taking neither a Message nor an Acknowledgement: nothing can delete its messages. */
    static class FactoryManualPayloadListener {
        @SqsListener(value = "once-spring-sqs-never-started", factory = "manualSqsListenerContainerFactory")
        @IdempotentListener(consumer = "sqs-factory-manual-payload", eventId = "#p0")
        public void on(String payload) {}
    }

    /**
     * Modes set on the container factory that once cannot keep fail the context start, before the containers start,
     * as the same modes on the annotation do (the context started: an ALWAYS container lost the event of every call
     * that failed).
     */
    @Test
    void modesOnTheContainerFactoryThatOnceCannotKeepFailTheStart() {
        Map<Class<?>, String> expected = Map.of(
                FactoryAlwaysListener.class, "ALWAYS",
                FactoryManualBatchListener.class, "batch",
                FactoryManualPayloadListener.class, "neither a Message nor an Acknowledgement");
        expected.forEach((bean, says) -> assertThatThrownBy(() -> {
                    try (var c = new AnnotationConfigApplicationContext()) {
                        c.register(IdempotentListenerConfiguration.class, Factories.class, bean);
                        c.refresh();
                    }
                })
                .as(bean.getSimpleName())
                .hasRootCauseInstanceOf(InvalidConfigurationException.class)
                .rootCause()
                .hasMessageContaining(bean.getSimpleName() + ".on")
                .hasMessageContaining(says));
    }

    /** The application's listener object, an {@code @IdempotentListener} bean, given to a container bean in ALWAYS. */
    static class ObjectListener implements io.awspring.cloud.sqs.listener.MessageListener<String> {
        @Override
        @IdempotentListener(consumer = "sqs-object-always")
        public void onMessage(Message<String> message) {}
    }

    @Configuration(proxyBeanMethods = false)
    static class AlwaysContainerBean {
        @Bean
        ObjectListener objectListener() {
            return new ObjectListener();
        }

        @Bean
        io.awspring.cloud.sqs.listener.SqsMessageListenerContainer<String> alwaysContainer(ObjectListener listener) {
            return io.awspring.cloud.sqs.listener.SqsMessageListenerContainer.<String>builder()
                    .sqsAsyncClient(sqs)
                    .queueNames("once-spring-sqs-never-started")
                    .configure(o -> o.acknowledgementMode(AcknowledgementMode.ALWAYS))
                    .messageListener(listener)
                    .build();
        }
    }

    /**
     * A container bean given a listener object whose onMessage is an {@code @IdempotentListener}, in ALWAYS: refused at
     * the start like an {@code @SqsListener}'s container (before, only endpoints' methods were seen).
     */
    @Test
    void aContainerBeanInAlwaysGivenAnIdempotentListenerObjectFailsTheStart() {
        assertThatThrownBy(() -> {
                    try (var c = new AnnotationConfigApplicationContext()) {
                        c.register(IdempotentListenerConfiguration.class, AlwaysContainerBean.class);
                        c.refresh();
                    }
                })
                .hasRootCauseInstanceOf(InvalidConfigurationException.class)
                .rootCause()
                .hasMessageContaining("ObjectListener.onMessage")
                .hasMessageContaining("ALWAYS");
    }

    static class BatchListener {
        @SqsListener("batch")
        @IdempotentListener(consumer = "sqs-batch")
        public void on(
                List<Message<String>> messages,
                io.awspring.cloud.sqs.listener.acknowledgement.BatchAcknowledgement<String> ack) {}
    }

    static class AlwaysListener {
        @SqsListener(value = "always", acknowledgementMode = "ALWAYS")
        @IdempotentListener(consumer = "sqs-always")
        public void on(Message<String> message) {}
    }

    @Test
    void aBatchAcknowledgementAndAlwaysFailTheStart() {
        for (Class<?> bean : Set.of(BatchListener.class, AlwaysListener.class)) {
            assertThatThrownBy(() -> {
                        try (var c = new AnnotationConfigApplicationContext()) {
                            c.register(IdempotentListenerConfiguration.class, bean);
                            c.refresh();
                        }
                    })
                    .hasRootCauseInstanceOf(InvalidConfigurationException.class)
                    .rootCause()
                    .hasMessageContaining(bean.getSimpleName() + ".on")
                    .hasMessageContaining(bean == AlwaysListener.class ? "ALWAYS" : "BatchAcknowledgement");
        }
    }
}
