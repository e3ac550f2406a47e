package dev.once.kafka;

import static dev.once.kafka.KafkaLedger.BATCH_CREDIT;
import static dev.once.kafka.KafkaLedger.CREDIT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.once.BatchHandler;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.kafka.KafkaLedger.Event;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The runner with {@code batchHandler(...)}: whole polls to one set-wise call, the per-record guarantees kept. */
class KafkaBatchHandlerTest {

    private final TestKafka kafka = TestKafka.shared();
    private final SimpleMeterRegistry meters = new SimpleMeterRegistry();
    private TestDatabase db;
    private final List<KafkaConsumerRunner> runners = new ArrayList<>();

    @BeforeEach
    void setUp() {
        db = KafkaLedger.database();
    }

    @AfterEach
    void tearDown() {
        runners.forEach(KafkaConsumerRunner::close);
        db.close();
    }

    private KafkaConsumerRunnerBuilder runner(String topic, String group, BatchHandler handler) {
        return KafkaConsumerRunner.builder()
                .kafkaProperties(KafkaLedger.consumerProperties(kafka, group))
                .topics(topic)
                .dataSource(db.dataSource())
                .consumer("ledger")
                .batchHandler(handler)
                .retryBackoff(Duration.ofMillis(20), Duration.ofMillis(200))
                .meterRegistry(meters);
    }

    private KafkaConsumerRunner started(KafkaConsumerRunnerBuilder b) {
        KafkaConsumerRunner r = b.build();
        runners.add(r);
        return r.start();
    }

    @Test
    void exactlyOneOfHandlerAndBatchHandlerIsAccepted() {
        assertThatThrownBy(() -> runner("t", "g", BATCH_CREDIT).handler(CREDIT).build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("handler(...) and batchHandler(...) were both set")
                .hasMessageContaining("remove one of them");
        assertThatThrownBy(() -> KafkaConsumerRunner.builder()
                        .kafkaProperties(KafkaLedger.consumerProperties(kafka, "g"))
                        .topics("t")
                        .dataSource(db.dataSource())
                        .consumer("ledger")
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("needs handler or batchHandler");
        IdempotentConsumer prebuilt = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("ledger")
                .handler(CREDIT)
                .build();
        assertThatThrownBy(() -> KafkaConsumerRunner.builder()
                        .kafkaProperties(KafkaLedger.consumerProperties(kafka, "g"))
                        .topics("t")
                        .idempotentConsumer(prebuilt)
                        .batchHandler(BATCH_CREDIT)
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("remove batchHandler(...)");
    }

    @Test
    void wholePollsGoToOneCallAndEachEventIsAppliedOnceInOffsetOrder() {
        String topic = kafka.createTopic("batch", 3);
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 600; i++) {
            events.add(new Event("b-" + i, 1, i % 3));
        }
        events.add(new Event("b-5", 1, 2)); // the same event again, in another partition
        events.add(new Event("b-6", 1, 0)); // and in the same one
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);
        AtomicInteger largest = new AtomicInteger();
        AtomicInteger calls = new AtomicInteger();
        started(runner(topic, "batch-" + topic, (claimed, tx) -> {
            calls.incrementAndGet();
            largest.accumulateAndGet(claimed.size(), Math::max);
            BATCH_CREDIT.handle(claimed, tx);
        }));

        await().atMost(Duration.ofSeconds(60))
                .until(() -> KafkaLedger.appliedRows(db) >= 600 && Meters.acknowledged(meters) >= 602);
        assertThat(largest.get()).as("records in the largest call").isGreaterThan(100);
        assertThat(calls.get()).as("calls for 600 records").isLessThan(60);
        assertThat(KafkaLedger.appliedTwice(db)).isZero();
        assertThat(KafkaLedger.outOfOrder(db)).isZero();
        assertThat(KafkaLedger.balance(db)).isEqualTo(600);
    }

    /** A whole batch through one call writes each partition's next offset in its transaction, as per record. */
    @Test
    void offsetsKeptInTheDatabaseMoveWithAWholeBatch() {
        String topic = kafka.createTopic("batch-db-offsets", 3);
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            events.add(new Event("d-" + i, 1, i % 3));
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);
        started(runner(topic, "batch-db-offsets-" + topic, BATCH_CREDIT).offsetsInDatabase(true));

        await().atMost(Duration.ofSeconds(60))
                .until(() -> db.queryLong("SELECT coalesce(sum(next_offset), 0) FROM once_kafka_offsets") == 300);
        assertThat(db.queryLong("SELECT count(*) FROM once_kafka_offsets WHERE next_offset = 100"))
                .as("each of the 3 partitions' next offset past its 100 records, stored with the effects")
                .isEqualTo(3);
        assertThat(KafkaLedger.balance(db)).isEqualTo(300);
    }

    @Test
    void effectsOfAPartitionStayInOffsetOrderWhenARecordOfAWholePollFailsAndIsRetried() {
        String topic = kafka.createTopic("batch-order", 3);
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 600; i++) {
            events.add(new Event("o-" + i, 1, i % 3));
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);
        // Every 50th event fails throughout its first delivery: its batch is halved until it stands
        // alone and fails, and the runner tries it again after a backoff; without the guard the
        // halves after it would apply the later records of its partition before that retry.
        Map<String, Integer> failures = new ConcurrentHashMap<>();
        started(runner(topic, "batch-order-" + topic, (claimed, tx) -> {
                    for (Delivery d : claimed) {
                        int n = Integer.parseInt(d.eventId().substring(2));
                        if (n % 50 == 7 && d.attempt() == 1) {
                            failures.merge(d.eventId(), 1, Integer::sum);
                            throw new IllegalStateException("downstream hiccup for " + d.eventId());
                        }
                    }
                    BATCH_CREDIT.handle(claimed, tx);
                })
                .kafkaProperties(Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100")));

        await().atMost(Duration.ofSeconds(90))
                .until(() -> KafkaLedger.appliedRows(db) >= 600 && Meters.acknowledged(meters) >= 600);
        assertThat(failures).hasSize(12);
        assertThat(KafkaLedger.outOfOrder(db))
                .as("effects of each partition in offset order")
                .isZero();
        assertThat(KafkaLedger.appliedTwice(db)).isZero();
        assertThat(KafkaLedger.balance(db)).isEqualTo(600);
    }

    @Test
    void aPermanentlyFailingRecordOfAPollIsDeadLetteredAndTheRestApplied() throws Exception {
        String topic = kafka.createTopic("batch-dlt-src", 1);
        String dlt = kafka.createTopic("batch-dlt", 1);
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            events.add(new Event("d-" + i, i == 17 ? -1 : 1, 0));
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);
        String group = "batch-dlt-" + topic;
        started(runner(topic, group, (claimed, tx) -> {
                    for (Delivery d : claimed) {
                        if (d.payloadText().equals("-1")) {
                            throw new NumberFormatException("not an amount: " + d.eventId());
                        }
                    }
                    BATCH_CREDIT.handle(claimed, tx);
                })
                .idempotentConsumer(b -> b.permanentFailure(t -> t instanceof NumberFormatException))
                .deadLetterTopic(dlt));

        await().atMost(Duration.ofSeconds(60)).until(() -> Meters.applied(meters) == 49);
        List<ConsumerRecord<byte[], byte[]>> dead = readAll(dlt, 1);
        assertThat(dead).hasSize(1);
        assertThat(header(dead.get(0), "once-event-id")).isEqualTo("d-17");
        assertThat(header(dead.get(0), "once-dlt-reason")).contains("NumberFormatException");
        assertThat(KafkaLedger.balance(db)).isEqualTo(49);
        assertThat(KafkaLedger.outOfOrder(db)).isZero();
        assertThat(KafkaLedger.appliedTwice(db)).isZero();
    }

    private List<ConsumerRecord<byte[], byte[]>> readAll(String topic, int expected) {
        Map<String, Object> p = new HashMap<>(KafkaLedger.consumerProperties(kafka, "reader-" + topic));
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c =
                new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(List.of(topic));
            await().atMost(Duration.ofSeconds(30)).until(() -> {
                c.poll(Duration.ofMillis(200)).forEach(out::add);
                return out.size() >= expected;
            });
        }
        return out;
    }

    private static String header(ConsumerRecord<byte[], byte[]> r, String name) {
        Header h = r.headers().lastHeader(name);
        return h == null ? null : new String(h.value(), StandardCharsets.UTF_8);
    }
}
