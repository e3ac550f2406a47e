package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.PermanentFailureException;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.ContainerProperties.AckMode;
import org.springframework.kafka.listener.DeadLetterPublishingRecoverer;
import org.springframework.kafka.listener.DefaultAfterRollbackProcessor;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.kafka.support.Acknowledgment;
import org.springframework.util.backoff.FixedBackOff;

/**
 * {@code @IdempotentListener} on real {@code @KafkaListener} containers (in-process Kafka, real
 * PostgreSQL): duplicates skipped and acknowledged, the body's writes atomic with the claim, Spring
 * Kafka's error handling (retries, dead-letter topic, batch listeners, manual acks) unchanged.
 */
class KafkaIdempotentListenerTest {

    static final int PARTITIONS = 1;
    public static String PAYMENTS;
    public static String BATCH;
    public static String MANUAL;
    public static String NAIVE_BATCH;
    public static String CONTAINER_TX;
    public static String CONTAINER_TX_ONCE;

    static TestKafka kafka;
    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static JdbcTemplate jdbc;

    @BeforeAll
    static void start() {
        kafka = TestKafka.shared();
        PAYMENTS = kafka.createTopic("spring-payments", PARTITIONS);
        kafka.createTopic(PAYMENTS + "-dlt", PARTITIONS, Map.of());
        BATCH = kafka.createTopic("spring-batch", PARTITIONS);
        kafka.createTopic(BATCH + "-dlt", PARTITIONS, Map.of());
        MANUAL = kafka.createTopic("spring-manual", PARTITIONS);
        NAIVE_BATCH = kafka.createTopic("spring-naive-batch", PARTITIONS);
        kafka.createTopic(NAIVE_BATCH + "-dlt", PARTITIONS, Map.of());
        CONTAINER_TX = kafka.createTopic("spring-container-tx", PARTITIONS);
        CONTAINER_TX_ONCE = kafka.createTopic("spring-container-tx-once", PARTITIONS);
        db = TestPostgres.shared().freshDatabase(8);
        db.execute(
                "CREATE TABLE ledger (event_id text NOT NULL, topic text NOT NULL, amount bigint NOT NULL)",
                // checked at commit: the commit itself fails, after the listener returned
                "CREATE TABLE strict (id text, CONSTRAINT strict_id UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)",
                "INSERT INTO strict VALUES ('taken')");
        context = new AnnotationConfigApplicationContext(Config.class);
        jdbc = context.getBean(JdbcTemplate.class);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
        if (db != null) {
            db.close();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @Import(JdbcListenerBeans.class)
    @EnableKafka
    @EnableIdempotentListeners
    @org.springframework.transaction.annotation.EnableTransactionManagement
    static class Config {
        @Bean
        DataSource dataSource() {
            return db.dataSource();
        }

        @Bean
        OnceOutbox outbox(OnceSpring once) {
            return once.outbox();
        }

        @Bean
        KafkaTemplate<String, String> kafkaTemplate() {
            return new KafkaTemplate<>(TestBeans.stringProducers(kafka));
        }

        static DefaultKafkaConsumerFactory<String, String> consumers() {
            return TestBeans.stringConsumers(
                    kafka,
                    Map.of(
                            ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG,
                            kafka.sessionTimeoutMs(),
                            ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
                            kafka.sessionTimeoutMs() / 4));
        }

        static DefaultErrorHandler errorHandler(KafkaTemplate<String, String> template) {
            DefaultErrorHandler handler =
                    new DefaultErrorHandler(new DeadLetterPublishingRecoverer(template), new FixedBackOff(0, 2));
            handler.addNotRetryableExceptions(PermanentFailureException.class);
            return handler;
        }

        @Bean
        ConcurrentKafkaListenerContainerFactory<String, String> kafkaListenerContainerFactory(
                KafkaTemplate<String, String> template) {
            var f = new ConcurrentKafkaListenerContainerFactory<String, String>();
            f.setConsumerFactory(consumers());
            f.getContainerProperties().setAckMode(AckMode.RECORD);
            f.setCommonErrorHandler(errorHandler(template));
            return f;
        }

        @Bean
        ConcurrentKafkaListenerContainerFactory<String, String> batchFactory(KafkaTemplate<String, String> template) {
            var f = new ConcurrentKafkaListenerContainerFactory<String, String>();
            f.setConsumerFactory(consumers());
            f.setBatchListener(true);
            f.getContainerProperties().setAckMode(AckMode.BATCH);
            f.setCommonErrorHandler(errorHandler(template));
            return f;
        }

        @Bean
        ConcurrentKafkaListenerContainerFactory<String, String> manualFactory(KafkaTemplate<String, String> template) {
            var f = new ConcurrentKafkaListenerContainerFactory<String, String>();
            f.setConsumerFactory(consumers());
            f.getContainerProperties().setAckMode(AckMode.MANUAL);
            f.setCommonErrorHandler(errorHandler(template));
            return f;
        }

        /** What spring-kafka issue 2775 describes: a database transaction manager on the container. */
        @Bean
        @SuppressWarnings("removal")
        ConcurrentKafkaListenerContainerFactory<String, String> containerTxFactory(JdbcTransactionManager tm) {
            var f = new ConcurrentKafkaListenerContainerFactory<String, String>();
            f.setConsumerFactory(consumers());
            f.getContainerProperties().setAckMode(AckMode.RECORD);
            f.getContainerProperties().setTransactionManager(tm);
            f.setAfterRollbackProcessor(new DefaultAfterRollbackProcessor<>(new FixedBackOff(50, Long.MAX_VALUE)));
            return f;
        }

        @Bean
        ConcurrentKafkaListenerContainerFactory<String, String> retryingFactory() {
            var f = new ConcurrentKafkaListenerContainerFactory<String, String>();
            f.setConsumerFactory(consumers());
            f.getContainerProperties().setAckMode(AckMode.RECORD);
            f.setCommonErrorHandler(new DefaultErrorHandler(new FixedBackOff(50, Long.MAX_VALUE)));
            return f;
        }

        @Bean
        Listeners listeners(JdbcTemplate jdbc, OnceOutbox outbox) {
            return new Listeners(jdbc, outbox);
        }
    }

    /** The application's listeners. */
    public static class Listeners {
        final JdbcTemplate jdbc;
        final OnceOutbox outbox;
        final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();

        Listeners(JdbcTemplate jdbc, OnceOutbox outbox) {
            this.jdbc = jdbc;
            this.outbox = outbox;
        }

        int calls(String eventId) {
            return calls.computeIfAbsent(eventId, k -> new AtomicInteger()).get();
        }

        private void apply(ConsumerRecord<String, String> r) throws Exception {
            String id = new String(r.headers().lastHeader("once-event-id").value(), StandardCharsets.UTF_8);
            int call = calls.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO ledger VALUES (?, ?, ?)", id, r.topic(), 20);
            if (r.value().equals("poison")) {
                throw new PermanentFailureException("payload 'poison' of " + id + " is not a payment");
            }
            if (r.value().equals("flaky") && call == 1) {
                throw new IllegalStateException("database hiccup on the first attempt of " + id);
            }
            outbox.add(
                    "https://psp.example/charges",
                    r.key(),
                    r.value().getBytes(StandardCharsets.UTF_8),
                    Map.of(),
                    "charge:" + id);
        }

        @KafkaListener(id = "spring-payments", topics = "#{T(dev.once.spring.KafkaIdempotentListenerTest).PAYMENTS}")
        @IdempotentListener(consumer = "billing")
        public void onPayment(ConsumerRecord<String, String> record) throws Exception {
            apply(record);
        }

        @KafkaListener(
                id = "spring-batch",
                topics = "#{T(dev.once.spring.KafkaIdempotentListenerTest).BATCH}",
                containerFactory = "batchFactory",
                autoStartup = "false")
        @IdempotentListener(consumer = "batch-billing")
        public void onBatch(List<ConsumerRecord<String, String>> records) throws Exception {
            for (ConsumerRecord<String, String> r : records) {
                apply(r);
            }
        }

        @KafkaListener(
                id = "spring-manual",
                topics = "#{T(dev.once.spring.KafkaIdempotentListenerTest).MANUAL}",
                containerFactory = "manualFactory")
        @IdempotentListener(consumer = "manual-billing")
        public void onManual(ConsumerRecord<String, String> record, Acknowledgment ack) throws Exception {
            ack.acknowledge(); // deferred: takes effect after the commit, never when it rolls back
            apply(record);
        }

        /** The naive batch listener of spring-kafka issue 4436: one transaction, BatchListenerFailedException. */
        @KafkaListener(
                id = "spring-naive-batch",
                topics = "#{T(dev.once.spring.KafkaIdempotentListenerTest).NAIVE_BATCH}",
                containerFactory = "batchFactory",
                autoStartup = "false")
        @org.springframework.transaction.annotation.Transactional
        public void onNaiveBatch(List<ConsumerRecord<String, String>> records) {
            for (int i = 0; i < records.size(); i++) {
                ConsumerRecord<String, String> r = records.get(i);
                if (r.value().equals("poison")) {
                    throw new org.springframework.kafka.listener.BatchListenerFailedException("poison", i);
                }
                jdbc.update("INSERT INTO ledger VALUES (?, ?, ?)", r.key(), r.topic(), 20);
            }
        }

        @KafkaListener(
                id = "spring-container-tx",
                topics = "#{T(dev.once.spring.KafkaIdempotentListenerTest).CONTAINER_TX}",
                containerFactory = "containerTxFactory")
        public void onContainerTx(ConsumerRecord<String, String> record) {
            calls.computeIfAbsent("container-tx", k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO strict VALUES (?)", record.value());
        }

        @KafkaListener(
                id = "spring-container-tx-once",
                topics = "#{T(dev.once.spring.KafkaIdempotentListenerTest).CONTAINER_TX_ONCE}",
                containerFactory = "retryingFactory")
        @IdempotentListener(consumer = "strict")
        public void onContainerTxOnce(ConsumerRecord<String, String> record) {
            calls.computeIfAbsent("container-tx-once", k -> new AtomicInteger()).incrementAndGet();
            jdbc.update("INSERT INTO strict VALUES (?)", record.value());
        }
    }

    static Listeners listeners() {
        return context.getBean(Listeners.class);
    }

    /** Sends and returns the record's offset. */
    static long send(String topic, String eventId, String key, String value) {
        var record = new ProducerRecord<String, String>(topic, key, value);
        if (eventId != null) {
            record.headers().add("once-event-id", eventId.getBytes(StandardCharsets.UTF_8));
        }
        try {
            return ((KafkaTemplate<String, String>) context.getBean(KafkaTemplate.class))
                    .send(record)
                    .get(30, TimeUnit.SECONDS)
                    .getRecordMetadata()
                    .offset();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** Starts a container after its records are on the topic, so its first poll is one batch of all of them. */
    static void startContainer(String id) {
        context.getBean(org.springframework.kafka.config.KafkaListenerEndpointRegistry.class)
                .getListenerContainer(id)
                .start();
    }

    static long ledger(String topic, String eventId) {
        return jdbc.queryForObject(
                "SELECT count(*) FROM ledger WHERE topic = ? AND event_id = ?", Long.class, topic, eventId);
    }

    static long committed(String group, String topic) {
        try (Admin admin = kafka.admin()) {
            OffsetAndMetadata o = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS)
                    .get(new TopicPartition(topic, 0));
            return o == null ? 0 : o.offset();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static List<ConsumerRecord<String, String>> readAll(String topic, int expected) {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(
                Map.of(
                        ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                        kafka.bootstrapServers(),
                        ConsumerConfig.GROUP_ID_CONFIG,
                        "reader-" + UUID.randomUUID(),
                        ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
                        "earliest"),
                new StringDeserializer(),
                new StringDeserializer())) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<String, String>> all = new ArrayList<>();
            await().atMost(Duration.ofSeconds(30)).until(() -> {
                c.poll(Duration.ofMillis(200)).forEach(all::add);
                return all.size() >= expected;
            });
            return all;
        }
    }

    @Test
    void doublePublishIsAppliedOnceAndBothCopiesAreAcknowledged() {
        send(PAYMENTS, "pay-1", "acc-1", "20");
        send(PAYMENTS, "pay-1", "acc-1", "20"); // the producer's retry: same event id
        long last = send(PAYMENTS, "pay-2", "acc-1", "20"); // another $20 payment: counts too
        await().atMost(Duration.ofSeconds(30)).until(() -> committed("spring-payments", PAYMENTS) > last);
        assertThat(ledger(PAYMENTS, "pay-1")).as("effect applied exactly once").isEqualTo(1);
        assertThat(ledger(PAYMENTS, "pay-2")).isEqualTo(1);
        assertThat(listeners().calls("pay-1"))
                .as("the duplicate's body is skipped")
                .isEqualTo(1);
        assertThat(jdbc.queryForObject(
                        "SELECT count(*) FROM once_outbox WHERE idempotency_key = 'charge:pay-1'", Long.class))
                .isEqualTo(1);
    }

    @Test
    void aFailedAttemptRollsBackAndTheErrorHandlersRetryAppliesOnce() {
        send(PAYMENTS, "flaky-1", "acc-2", "flaky");
        await().atMost(Duration.ofSeconds(30))
                .until(() -> ledger(PAYMENTS, "flaky-1") == 1 && listeners().calls("flaky-1") == 2);
        assertThat(jdbc.queryForObject(
                        "SELECT count(*) FROM once_outbox WHERE idempotency_key = 'charge:flaky-1'", Long.class))
                .as("the first attempt's outbox row was rolled back with it")
                .isEqualTo(1);
    }

    @Test
    void poisonGoesToTheDeadLetterTopicWithSpringsHeadersAndNothingApplied() {
        send(PAYMENTS, "poison-1", "acc-3", "poison");
        List<ConsumerRecord<String, String>> dead = readAll(PAYMENTS + "-dlt", 1);
        ConsumerRecord<String, String> d = dead.get(0);
        assertThat(new String(d.headers().lastHeader("once-event-id").value(), StandardCharsets.UTF_8))
                .isEqualTo("poison-1");
        assertThat(new String(
                        d.headers().lastHeader("kafka_dlt-exception-cause-fqcn").value(), StandardCharsets.UTF_8))
                .as("the body's own exception reaches the error handler")
                .isEqualTo(PermanentFailureException.class.getName());
        assertThat(d.headers().lastHeader("kafka_dlt-original-topic")).isNotNull();
        assertThat(listeners().calls("poison-1")).as("permanent: not retried").isEqualTo(1);
        assertThat(ledger(PAYMENTS, "poison-1")).as("its write rolled back").isZero();
        assertThat(jdbc.queryForObject("SELECT count(*) FROM once_inbox WHERE event_id = 'poison-1'", Long.class))
                .as("not claimed: a replay from the dead-letter topic would apply it")
                .isZero();
    }

    @Test
    void batchWithAPoisonRecordCommitsOnlyOffsetsOfAppliedRecords() {
        List<String> ids = List.of("b-1", "b-2", "b-3", "b-4", "b-5", "b-6");
        send(BATCH, "b-1", "k", "20");
        send(BATCH, "b-2", "k", "20");
        send(BATCH, "b-1", "k", "20"); // a duplicate inside the batch
        send(BATCH, "b-3", "k", "poison");
        send(BATCH, "b-4", "k", "20");
        send(BATCH, "b-5", "k", "20");
        send(BATCH, "b-6", "k", "20");
        startContainer("spring-batch");
        await().atMost(Duration.ofSeconds(60)).until(() -> committed("spring-batch", BATCH) >= 7);
        for (String id : ids) {
            assertThat(ledger(BATCH, id)).as("event %s", id).isEqualTo(id.equals("b-3") ? 0 : 1);
        }
        List<ConsumerRecord<String, String>> dead = readAll(BATCH + "-dlt", 1);
        assertThat(dead).extracting(ConsumerRecord::value).containsExactly("poison");
    }

    @Test
    void naiveBatchLosesTheRecordsBeforeTheFailedIndexSpringKafka4436() {
        send(NAIVE_BATCH, null, "n-1", "20");
        send(NAIVE_BATCH, null, "n-2", "20");
        send(NAIVE_BATCH, null, "n-3", "poison");
        startContainer("spring-naive-batch");
        await().atMost(Duration.ofSeconds(60)).until(() -> committed("spring-naive-batch", NAIVE_BATCH) >= 3);
        // The error handler committed the offsets of n-1 and n-2 as "before the failed index"; the one
        // transaction that wrote them rolled back. They are gone.
        long applied = jdbc.queryForObject("SELECT count(*) FROM ledger WHERE topic = ?", Long.class, NAIVE_BATCH);
        assertThat(applied).as("records acknowledged but never applied").isZero();
    }

    @Test
    void aDatabaseTransactionManagerOnTheContainerCommitsOffsetsOfAFailedCommitSpringKafka2775() {
        send(CONTAINER_TX, null, "k", "taken"); // the deferred unique constraint fails at COMMIT
        await().atMost(Duration.ofSeconds(30)).until(() -> committed("spring-container-tx", CONTAINER_TX) >= 1);
        assertThat(jdbc.queryForObject("SELECT count(*) FROM strict", Long.class))
                .as("offset committed inside the transaction, then the database commit failed: the event is lost"
                        + " to a restart")
                .isEqualTo(1);

        // once, with no transaction manager on the container: the commit fails inside the listener call,
        // so the offset stays put while it retries.
        send(CONTAINER_TX_ONCE, "strict-1", "k", "taken");
        await().atMost(Duration.ofSeconds(30)).until(() -> listeners().calls("container-tx-once") >= 3);
        assertThat(committed("spring-container-tx-once", CONTAINER_TX_ONCE))
                .as("not acknowledged")
                .isZero();
        assertThat(jdbc.queryForObject("SELECT count(*) FROM once_inbox WHERE event_id = 'strict-1'", Long.class))
                .isZero();
    }

    /** An Acknowledgment that records whether the claim was committed (seen from another connection) when called. */
    static final class RecordingAck implements Acknowledgment {
        final String eventId;
        final List<String> events = new java.util.concurrent.CopyOnWriteArrayList<>();

        RecordingAck(String eventId) {
            this.eventId = eventId;
        }

        @Override
        public void acknowledge() {
            boolean committed = db.queryLong("SELECT count(*) FROM once_inbox WHERE event_id = '" + eventId + "'") == 1;
            events.add(committed ? "acknowledged after the commit" : "acknowledged before the commit");
        }
    }

    static ConsumerRecord<String, String> record(String eventId, String value) {
        ConsumerRecord<String, String> r = new ConsumerRecord<>(MANUAL, 0, 1_000_000L, "k", value);
        r.headers().add("once-event-id", eventId.getBytes(StandardCharsets.UTF_8));
        return r;
    }

    @Test
    void acknowledgeInTheBodyTakesEffectAfterTheCommitAndNeverOnRollback() throws Exception {
        RecordingAck failed = new RecordingAck("direct-1");
        org.assertj.core.api.Assertions.assertThatThrownBy(
                        () -> listeners().onManual(record("direct-1", "flaky"), failed))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("database hiccup");
        assertThat(failed.events)
                .as("a rolled-back delivery is not acknowledged")
                .isEmpty();

        RecordingAck applied = new RecordingAck("direct-1");
        listeners().onManual(record("direct-1", "flaky"), applied);
        assertThat(applied.events).containsExactly("acknowledged after the commit");

        RecordingAck duplicate = new RecordingAck("direct-1");
        listeners().onManual(record("direct-1", "flaky"), duplicate);
        assertThat(duplicate.events)
                .as("the duplicate's body did not run; once acknowledged it")
                .containsExactly("acknowledged after the commit");
        assertThat(ledger(MANUAL, "direct-1")).isEqualTo(1);
    }

    @Test
    void manualAcknowledgementTakesEffectAfterCommitAndDuplicatesAreAcknowledged() {
        send(MANUAL, "m-1", "k", "flaky"); // acknowledges, then fails: the ack must not survive the rollback
        send(MANUAL, "m-1", "k", "20"); // duplicate: body skipped, acknowledged by once
        send(MANUAL, "m-2", "k", "20");
        await().atMost(Duration.ofSeconds(30)).until(() -> committed("spring-manual", MANUAL) >= 3);
        assertThat(ledger(MANUAL, "m-1")).isEqualTo(1);
        assertThat(ledger(MANUAL, "m-2")).isEqualTo(1);
        assertThat(listeners().calls("m-1"))
                .as("failed once, retried once, duplicate skipped")
                .isEqualTo(2);
    }
}
