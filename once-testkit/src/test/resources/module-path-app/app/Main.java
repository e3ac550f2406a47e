package app;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A user's test code on the module path, reaching everything through {@code requires dev.once.testkit}:
 * a fresh database with the once schema (the kit's migration, found as a service), the embedded
 * Kafka broker (its own JVM, from the class path), one record through it, one event applied once.
 */
public final class Main {
    public static void main(String[] args) throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            AtomicInteger effects = new AtomicInteger();
            IdempotentConsumer billing = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("module-path")
                    .handler((delivery, tx) -> effects.incrementAndGet())
                    .build();
            System.out.println("first=" + billing.process(Delivery.builder("evt-1").build()).tag());
            System.out.println("second=" + billing.process(Delivery.builder("evt-1").build()).tag());
            System.out.println("effects=" + effects.get());
        }
        try (TestKafka kafka = TestKafka.start()) {
            String topic = kafka.createTopic("module-path", 1);
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(
                    Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers()),
                    new StringSerializer(),
                    new StringSerializer())) {
                producer.send(new ProducerRecord<>(topic, "evt-1", "hello")).get();
            }
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(
                    Map.of(
                            ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers(),
                            ConsumerConfig.GROUP_ID_CONFIG, "module-path",
                            ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"),
                    new StringDeserializer(),
                    new StringDeserializer())) {
                consumer.subscribe(List.of(topic));
                long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
                int received = 0;
                while (received == 0 && System.nanoTime() < deadline) {
                    received = consumer.poll(Duration.ofMillis(500)).count();
                }
                System.out.println("kafka embedded=" + kafka.isEmbedded() + " received=" + received + " session="
                        + kafka.sessionTimeoutMs());
            }
        }
        for (Class<?> c : List.of(TestKafka.class, TestPostgres.class, IdempotentConsumer.class)) {
            Module m = c.getModule();
            System.out.println("module " + m.getName() + " automatic=" + m.getDescriptor().isAutomatic());
        }
        System.out.println("internal exported=" + TestKafka.class.getModule().isExported("dev.once.testkit.internal"));
    }
}
