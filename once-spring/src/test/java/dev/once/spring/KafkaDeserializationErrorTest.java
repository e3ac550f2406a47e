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
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.ContainerProperties.AckMode;
import org.springframework.kafka.listener.DeadLetterPublishingRecoverer;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.kafka.support.serializer.DeserializationException;
import org.springframework.kafka.support.serializer.ErrorHandlingDeserializer;
import org.springframework.util.backoff.FixedBackOff;

/**
 * {@code @IdempotentListener} composed with {@code ErrorHandlingDeserializer}, {@code DefaultErrorHandler}
 * and {@code DeadLetterPublishingRecoverer} (real Kafka and PostgreSQL): a record whose value cannot be
 * deserialized goes to the dead-letter topic with its original bytes and Spring's own exception headers,
 * is never claimed, and the good records after it are applied once each.
 */
class KafkaDeserializationErrorTest {

    public static String AMOUNTS;
    static TestKafka kafka;
    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static final AtomicInteger CALLS = new AtomicInteger();

    /** An amount in cents, as text; anything else fails to deserialize. */
    public static final class AmountDeserializer implements Deserializer<Long> {
        @Override
        public Long deserialize(String topic, byte[] data) {
            return Long.parseLong(new String(data, StandardCharsets.UTF_8));
        }
    }

    @BeforeAll
    static void start() {
        kafka = TestKafka.shared();
        AMOUNTS = kafka.createTopic("spring-amounts", 1);
        kafka.createTopic(AMOUNTS + "-dlt", 1, Map.of());
        db = TestPostgres.shared().freshDatabase(4);
        db.execute("CREATE TABLE ledger (event_id text NOT NULL, amount bigint NOT NULL)");
        context = new AnnotationConfigApplicationContext(Config.class);
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
    static class Config {
        @Bean
        DataSource dataSource() {
            return db.dataSource();
        }

        /** The dead-letter publisher sends the poison record's original bytes. */
        @Bean
        KafkaTemplate<Object, Object> deadLetters() {
            Map<String, Object> settings = new HashMap<>(TestBeans.stringProducerSettings(kafka));
            settings.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
            return new KafkaTemplate<>(new DefaultKafkaProducerFactory<>(settings));
        }

        @Bean
        ConcurrentKafkaListenerContainerFactory<String, Long> kafkaListenerContainerFactory(
                KafkaTemplate<Object, Object> deadLetters) {
            var f = new ConcurrentKafkaListenerContainerFactory<String, Long>();
            // the values are amounts (AmountDeserializer) behind the ErrorHandlingDeserializer, not Strings
            f.setConsumerFactory(TestBeans.stringConsumers(
                    kafka,
                    Map.of(
                            ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                            ErrorHandlingDeserializer.class,
                            ErrorHandlingDeserializer.VALUE_DESERIALIZER_CLASS,
                            AmountDeserializer.class)));
            f.getContainerProperties().setAckMode(AckMode.RECORD);
            DefaultErrorHandler handler =
                    new DefaultErrorHandler(new DeadLetterPublishingRecoverer(deadLetters), new FixedBackOff(0, 2));
            handler.addNotRetryableExceptions(PermanentFailureException.class);
            f.setCommonErrorHandler(handler);
            return f;
        }

        @Bean
        Amounts amounts(JdbcTemplate jdbc) {
            return new Amounts(jdbc);
        }
    }

    public static class Amounts {
        final JdbcTemplate jdbc;

        Amounts(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @KafkaListener(id = "spring-amounts", topics = "#{T(dev.once.spring.KafkaDeserializationErrorTest).AMOUNTS}")
        @IdempotentListener(consumer = "amounts")
        public void onAmount(ConsumerRecord<String, Long> record) {
            CALLS.incrementAndGet();
            jdbc.update("INSERT INTO ledger VALUES (?, ?)", TestBeans.eventId(record), record.value());
        }
    }

    static long send(KafkaProducer<String, String> producer, String eventId, String value) throws Exception {
        return producer.send(TestBeans.withEventId(AMOUNTS, "acc", value, eventId))
                .get(30, TimeUnit.SECONDS)
                .offset();
    }

    static long committed() throws Exception {
        try (Admin admin = kafka.admin()) {
            OffsetAndMetadata o = admin.listConsumerGroupOffsets("spring-amounts")
                    .partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS)
                    .get(new TopicPartition(AMOUNTS, 0));
            return o == null ? 0 : o.offset();
        }
    }

    static long count(String sql, Object... args) {
        return context.getBean(JdbcTemplate.class).queryForObject(sql, Long.class, args);
    }

    @Test
    void aValueThatFailsToDeserializeIsDeadLetteredWithSpringsHeadersNeverClaimedAndTheNextRecordsApplyOnce()
            throws Exception {
        long last;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(TestBeans.stringProducerSettings(kafka))) {
            send(producer, "amt-1", "20");
            send(producer, "amt-poison", "twenty");
            send(producer, "amt-2", "30");
            send(producer, "amt-2", "30"); // the producer's retry
            last = send(producer, "amt-3", "40");
        }
        long end = last + 1;
        await().atMost(Duration.ofSeconds(60)).until(() -> committed() >= end);

        List<ConsumerRecord<String, byte[]>> dead = new ArrayList<>();
        try (Consumer<String, byte[]> c = TestBeans.<byte[]>stringConsumers(
                        kafka,
                        Map.of(
                                ConsumerConfig.GROUP_ID_CONFIG,
                                "reader-" + UUID.randomUUID(),
                                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                                ByteArrayDeserializer.class))
                .createConsumer()) {
            c.subscribe(List.of(AMOUNTS + "-dlt"));
            await().atMost(Duration.ofSeconds(30)).until(() -> {
                c.poll(Duration.ofMillis(200)).forEach(dead::add);
                return !dead.isEmpty();
            });
        }
        ConsumerRecord<String, byte[]> d = dead.get(0);
        assertThat(new String(d.value(), StandardCharsets.UTF_8))
                .as("the original bytes")
                .isEqualTo("twenty");
        assertThat(header(d, "kafka_dlt-exception-fqcn"))
                .as("Spring's own exception headers are kept")
                .isEqualTo(DeserializationException.class.getName());
        assertThat(header(d, "kafka_dlt-exception-stacktrace"))
                .as("the deserializer's own failure")
                .contains(NumberFormatException.class.getName() + ": For input string: \"twenty\"");
        assertThat(header(d, "kafka_dlt-original-topic")).isEqualTo(AMOUNTS);
        assertThat(TestBeans.eventId(d)).isEqualTo("amt-poison");
        assertThat(d.headers().lastHeader("springDeserializerExceptionValue"))
                .as("the serialized exception header is removed, as Spring does")
                .isNull();

        assertThat(count("SELECT count(*) FROM once_inbox WHERE event_id = 'amt-poison'"))
                .as("never claimed: a replay from the dead-letter topic would apply it")
                .isZero();
        assertThat(count("SELECT count(*) FROM ledger WHERE event_id = 'amt-poison'"))
                .isZero();
        for (String id : List.of("amt-1", "amt-2", "amt-3")) {
            assertThat(count("SELECT count(*) FROM ledger WHERE event_id = ?", id))
                    .as("%s applied once", id)
                    .isEqualTo(1);
        }
        assertThat(CALLS.get())
                .as("the body ran for the three good events only")
                .isEqualTo(3);
    }

    private static String header(ConsumerRecord<?, ?> r, String name) {
        var h = r.headers().lastHeader(name);
        return h == null ? null : new String(h.value(), StandardCharsets.UTF_8);
    }
}
