package dev.once.spring;

import dev.once.testkit.kafka.TestKafka;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.transaction.KafkaTransactionManager;

/**
 * The beans once-spring's tests build alike, in one place so that they stay alike (the JPA entities: {@link
 * TestJpaBeans}): Kafka consumers and producers of String keys and values on the test broker,
 * a {@code KafkaTransactionManager} of producers of its own, and records carrying an event id in the header once
 * reads by default.
 */
final class TestBeans {

    /** The header a Kafka {@link IdempotentListener} reads its event id from by default. */
    static final String EVENT_ID_HEADER = "once-event-id";

    private TestBeans() {}

    /**
     * Consumers of String keys and values on {@code kafka}, from the earliest offset when their group has none;
     * {@code settings} add to these or replace them. {@code V} is String unless {@code settings} name another value
     * deserializer (a test of deserialization errors reads amounts).
     */
    static <V> DefaultKafkaConsumerFactory<String, V> stringConsumers(TestKafka kafka, Map<String, Object> settings) {
        Map<String, Object> all = new HashMap<>(Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                kafka.bootstrapServers(),
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
                "earliest",
                ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
                StringDeserializer.class,
                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                StringDeserializer.class));
        all.putAll(settings);
        return new DefaultKafkaConsumerFactory<>(all);
    }

    /** The settings of a producer of String keys and values on {@code kafka}. */
    static Map<String, Object> stringProducerSettings(TestKafka kafka) {
        return Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers(),
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class,
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
    }

    /** Producers of String keys and values on {@code kafka}, not transactional. */
    static DefaultKafkaProducerFactory<String, String> stringProducers(TestKafka kafka) {
        return new DefaultKafkaProducerFactory<>(stringProducerSettings(kafka));
    }

    /**
     * Kafka transactions for a container's {@code KafkaAwareTransactionManager}, of producers of their own (the tests'
     * sends are not transactional) whose transactional ids start with {@code transactionIdPrefix}.
     */
    static KafkaTransactionManager<String, String> kafkaTransactions(TestKafka kafka, String transactionIdPrefix) {
        DefaultKafkaProducerFactory<String, String> producers = stringProducers(kafka);
        producers.setTransactionIdPrefix(transactionIdPrefix);
        return new KafkaTransactionManager<>(producers);
    }

    /** A record for {@code topic} whose event id is {@code eventId}. */
    static ProducerRecord<String, String> withEventId(String topic, String key, String value, String eventId) {
        ProducerRecord<String, String> r = new ProducerRecord<>(topic, key, value);
        r.headers().add(EVENT_ID_HEADER, eventId.getBytes(StandardCharsets.UTF_8));
        return r;
    }

    /** The event id {@code record} carries. */
    static String eventId(ConsumerRecord<?, ?> record) {
        return new String(record.headers().lastHeader(EVENT_ID_HEADER).value(), StandardCharsets.UTF_8);
    }
}
