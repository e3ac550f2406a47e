package dev.once.kafka;

import static dev.once.kafka.KafkaLedger.CREDIT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.RetryableException;
import dev.once.kafka.KafkaLedger.Event;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The runner's default retries with a dead-letter topic outlast an ordinary database blip: a
 * few seconds in which every record fails retryably dead-letters nothing, and no later record
 * overtakes the head of its partition.
 */
class KafkaDeadLetterDefaultsTest {

    private static final Duration BLIP = Duration.ofSeconds(4);

    private final TestKafka kafka = TestKafka.shared();
    private TestDatabase db;
    private KafkaConsumerRunner runner;

    @BeforeEach
    void setUp() {
        db = KafkaLedger.database();
    }

    @AfterEach
    void tearDown() {
        if (runner != null) {
            runner.close();
        }
        db.close();
    }

    @Test
    void aFourSecondDatabaseBlipWithDefaultRetriesDeadLettersNothingAndKeepsOffsetOrder() {
        String topic = kafka.createTopic("blip", 1);
        String dlt = kafka.createTopic("blip-dlt", 1);
        KafkaLedger.publish(
                kafka.bootstrapServers(),
                topic,
                IntStream.rangeClosed(1, 5)
                        .mapToObj(i -> new Event("b-" + i, i, 0))
                        .toList());
        AtomicLong downUntil = new AtomicLong();
        runner = KafkaConsumerRunner.builder()
                .kafkaProperties(KafkaLedger.consumerProperties(kafka, "blip-" + topic))
                .topics(topic)
                .dataSource(db.dataSource())
                .consumer("ledger")
                .deadLetterTopic(dlt)
                .handler((d, tx) -> {
                    downUntil.compareAndSet(0, System.nanoTime() + BLIP.toNanos());
                    if (System.nanoTime() < downUntil.get()) {
                        throw new RetryableException("database blip while applying " + d.eventId());
                    }
                    CREDIT.handle(d, tx);
                })
                .build()
                .start();
        await().atMost(Duration.ofSeconds(120)).until(() -> KafkaLedger.distinctApplied(db) == 5);
        assertThat(deadLetters(dlt))
                .as("dead letters after a %s blip with the default retries", BLIP)
                .isEmpty();
        assertThat(KafkaLedger.outOfOrder(db))
                .as("records applied out of offset order")
                .isZero();
        assertThat(KafkaLedger.appliedTwice(db)).isZero();
    }

    private List<ConsumerRecord<byte[], byte[]>> deadLetters(String topic) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(
                KafkaLedger.consumerProperties(kafka, "reader-" + topic),
                new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            c.subscribe(List.of(topic));
            long until = System.nanoTime() + Duration.ofSeconds(3).toNanos();
            while (System.nanoTime() < until) {
                c.poll(Duration.ofMillis(200)).forEach(out::add);
            }
        }
        return out;
    }
}
