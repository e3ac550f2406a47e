package dev.once.kafka;

import static dev.once.kafka.KafkaLedger.CREDIT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.kafka.KafkaLedger.Event;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.IntStream;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class KafkaConsumerRunnerTest {

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

    private KafkaConsumerRunnerBuilder runner(String topic, String group) {
        return KafkaConsumerRunner.builder()
                .kafkaProperties(KafkaLedger.consumerProperties(kafka, group))
                .topics(topic)
                .dataSource(db.dataSource())
                .consumer("ledger")
                .handler(CREDIT)
                .retryBackoff(Duration.ofMillis(20), Duration.ofMillis(200))
                .meterRegistry(meters);
    }

    private KafkaConsumerRunner started(KafkaConsumerRunnerBuilder b) {
        KafkaConsumerRunner r = b.build();
        runners.add(r);
        return r.start();
    }

    @Test
    void autoCommitTrueIsRejectedNotIgnored() {
        Map<String, Object> props = KafkaLedger.consumerProperties(kafka, "g");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "true");
        assertThatThrownBy(() -> KafkaConsumerRunner.builder()
                        .kafkaProperties(props)
                        .topics("t")
                        .dataSource(db.dataSource())
                        .consumer("ledger")
                        .handler(CREDIT)
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("enable.auto.commit must be false")
                .hasMessageContaining("'true'");
    }

    @Test
    void missingSettingsAreNamed() {
        assertThatThrownBy(() -> KafkaConsumerRunner.builder()
                        .topics("t")
                        .handler(CREDIT)
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("bootstrap.servers")
                .hasMessageContaining("group.id")
                .hasMessageContaining("dataSource")
                .hasMessageContaining("consumer");
        assertThatThrownBy(() -> runner("t", "g")
                        .missingEventId(MissingEventIdPolicy.DEAD_LETTER)
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("deadLetterTopic");
    }

    @Test
    void sameEventIdPublishedTwiceInTwoPartitionsAndTwiceInOneIsAppliedOnce() {
        String topic = kafka.createTopic("double", 2);
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            events.add(new Event("pay-" + i, 10 + i, i % 2));
        }
        events.add(new Event("pay-3", 13, 0)); // the same event again, in the other partition
        events.add(new Event("pay-4", 14, 0)); // and again in its own partition
        events.add(new Event("pay-4", 14, 1));
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);
        long expected = IntStream.range(0, 20).mapToLong(i -> 10 + i).sum();

        started(runner(topic, "double-" + topic));

        await().atMost(Duration.ofSeconds(60)).until(() -> Meters.acknowledged(meters) == events.size());
        assertThat(KafkaLedger.balance(db))
                .as("each payment credited exactly once")
                .isEqualTo(expected);
        assertThat(KafkaLedger.appliedTwice(db)).as("no event applied twice").isZero();
        assertThat(KafkaLedger.distinctApplied(db)).isEqualTo(20);
        assertThat(Meters.duplicates(meters))
                .as("the three extra copies were absorbed as duplicates")
                .isEqualTo(3);
    }

    @Test
    void severalPollThreadsShareTheGroupAndApplyEachEventOnce() {
        String topic = kafka.createTopic("threads", 6);
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 3000; i++) {
            events.add(new Event("t-" + i, 2, i % 6));
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);
        KafkaConsumerRunner r = started(runner(topic, "threads-" + topic).threads(3));
        await().atMost(Duration.ofSeconds(60)).until(() -> Meters.acknowledged(meters) >= events.size());
        assertThat(r.isRunning()).isTrue();
        r.close();
        assertThat(r.isRunning()).isFalse();
        assertThat(KafkaLedger.appliedTwice(db)).isZero();
        assertThat(KafkaLedger.balance(db)).isEqualTo(6000);
        assertThat(KafkaLedger.outOfOrder(db)).isZero();
        assertThat(meters.find("once.kafka.lag").gauges())
                .as("lag gauge per partition")
                .hasSize(6);
        assertThat(meters.get("once.kafka.commit.latency").timer().count()).isPositive();
    }

    @Test
    void effectsOfAPartitionAreAppliedInOffsetOrderEvenWhenARecordFailsAndIsRetried() {
        String topic = kafka.createTopic("order", 3);
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 600; i++) {
            events.add(new Event("o-" + i, 1, i % 3));
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);
        // Every 50th event fails on its first two tries: the batch is rolled back and run one per
        // transaction, where it fails again and the runner seeks back to it; without the order
        // guard the records after it would be applied before its retry.
        Map<String, Integer> failures = new ConcurrentHashMap<>();
        started(runner(topic, "order-" + topic)
                .handler((d, tx) -> {
                    int n = Integer.parseInt(d.eventId().substring(2));
                    if (n % 50 == 7 && failures.merge(d.eventId(), 1, Integer::sum) <= 2) {
                        throw new IllegalStateException("downstream hiccup for " + d.eventId());
                    }
                    CREDIT.handle(d, tx);
                })
                .kafkaProperties(Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100")));

        await().atMost(Duration.ofSeconds(60))
                .until(() -> KafkaLedger.appliedRows(db) >= 600 && Meters.acknowledged(meters) >= 600);
        assertThat(failures).hasSize(12);
        assertThat(Meters.count(meters, "once.kafka.records.failed"))
                .as("failed tries counted")
                .isGreaterThanOrEqualTo(12);
        assertThat(KafkaLedger.outOfOrder(db))
                .as("effects of each partition in offset order")
                .isZero();
        assertThat(KafkaLedger.appliedTwice(db)).isZero();
        assertThat(KafkaLedger.balance(db)).isEqualTo(600);
    }

    @Test
    void permanentFailureAndMissingIdGoToTheDeadLetterTopicWithHeadersAndReason() throws Exception {
        String topic = kafka.createTopic("dlt-src", 1);
        String dlt = kafka.createTopic("dlt", 1);
        try (KafkaProducer<byte[], byte[]> p = KafkaLedger.producer(kafka.bootstrapServers())) {
            ProducerRecord<byte[], byte[]> poison = new ProducerRecord<>(topic, 0, null, "not-a-number".getBytes());
            poison.headers().add("once-event-id", "bad-1".getBytes()).add("trace", "t-1".getBytes());
            ProducerRecord<byte[], byte[]> noId = new ProducerRecord<>(topic, 0, null, "5".getBytes());
            noId.headers().add("trace", "t-2".getBytes());
            ProducerRecord<byte[], byte[]> good = new ProducerRecord<>(topic, 0, null, "7".getBytes());
            good.headers().add("once-event-id", "good-1".getBytes());
            p.send(poison);
            p.send(noId);
            p.send(good);
            p.flush();
        }
        started(runner(topic, "dlt-" + topic)
                .idempotentConsumer(b -> b.permanentFailure(t -> t instanceof NumberFormatException))
                .missingEventId(MissingEventIdPolicy.DEAD_LETTER)
                .deadLetterTopic(dlt));

        await().atMost(Duration.ofSeconds(60)).until(() -> Meters.applied(meters) == 1);
        List<ConsumerRecord<byte[], byte[]>> dead = readAll(dlt, 2);
        assertThat(header(dead.get(0), "trace")).isEqualTo("t-1");
        assertThat(header(dead.get(0), "once-event-id")).isEqualTo("bad-1");
        assertThat(header(dead.get(0), "once-dlt-reason"))
                .contains("failed permanently")
                .contains("NumberFormatException");
        assertThat(header(dead.get(0), "once-dlt-offset")).isEqualTo("0");
        assertThat(header(dead.get(1), "trace")).isEqualTo("t-2");
        assertThat(header(dead.get(1), "once-dlt-reason")).contains("missing event id");
        assertThat(Meters.count(meters, "once.kafka.records.missing_id")).isEqualTo(1);
        assertThat(KafkaLedger.balance(db)).isEqualTo(7);
        await().atMost(Duration.ofSeconds(30)).until(() -> committed(topic, "dlt-" + topic) == 3);
    }

    @Test
    void missingIdUnderFailStopsTheRunnerAndCommitsOnlyWhatCameBefore() {
        String topic = kafka.createTopic("fail", 1);
        try (KafkaProducer<byte[], byte[]> p = KafkaLedger.producer(kafka.bootstrapServers())) {
            ProducerRecord<byte[], byte[]> good = new ProducerRecord<>(topic, 0, null, "7".getBytes());
            good.headers().add("once-event-id", "good-1".getBytes());
            p.send(good);
            p.send(new ProducerRecord<>(topic, 0, null, "5".getBytes()));
            ProducerRecord<byte[], byte[]> after = new ProducerRecord<>(topic, 0, null, "9".getBytes());
            after.headers().add("once-event-id", "good-2".getBytes());
            p.send(after);
            p.flush();
        }
        KafkaConsumerRunner r = started(runner(topic, "fail-" + topic));
        await().atMost(Duration.ofSeconds(60)).until(() -> r.failure().isPresent());
        assertThat(r.failure().get()).hasMessageContaining(topic + "-0@1").hasMessageContaining("no usable event id");
        assertThat(r.isRunning()).isFalse();
        assertThat(KafkaLedger.balance(db))
                .as("the record after the bad one waits")
                .isEqualTo(7);
        assertThat(committed(topic, "fail-" + topic)).isEqualTo(1);
    }

    @Test
    void missingIdUnderSkipIsCountedAndSkippedNeverDedupedOnTheOffset() {
        String topic = kafka.createTopic("skip", 1);
        try (KafkaProducer<byte[], byte[]> p = KafkaLedger.producer(kafka.bootstrapServers())) {
            p.send(new ProducerRecord<>(topic, 0, null, "5".getBytes()));
            ProducerRecord<byte[], byte[]> good = new ProducerRecord<>(topic, 0, null, "7".getBytes());
            good.headers().add("once-event-id", "good-1".getBytes());
            p.send(good);
            p.flush();
        }
        started(runner(topic, "skip-" + topic).missingEventId(MissingEventIdPolicy.SKIP_AND_LOG));
        await().atMost(Duration.ofSeconds(60)).until(() -> Meters.applied(meters) == 1);
        assertThat(Meters.count(meters, "once.kafka.records.missing_id")).isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox"))
                .as("only real event ids are claimed")
                .isEqualTo(1);
        assertThat(KafkaLedger.balance(db)).isEqualTo(7);
    }

    /** The runner reads the id from the headers' texts it makes for the delivery: as the header extractor reads it. */
    @Test
    void theIdIsTheLastHeaderOfItsNameAndAnEmptyOneIsMissing() {
        String topic = kafka.createTopic("id-header", 1);
        try (KafkaProducer<byte[], byte[]> p = KafkaLedger.producer(kafka.bootstrapServers())) {
            ProducerRecord<byte[], byte[]> empty = new ProducerRecord<>(topic, 0, null, "5".getBytes());
            empty.headers().add("once-event-id", new byte[0]);
            p.send(empty);
            ProducerRecord<byte[], byte[]> twice = new ProducerRecord<>(topic, 0, null, "7".getBytes());
            twice.headers()
                    .add("once-event-id", "first-1".getBytes())
                    .add("trace", "t-1".getBytes())
                    .add("once-event-id", "last-1".getBytes());
            p.send(twice);
            p.flush();
        }
        started(runner(topic, "id-header-" + topic).missingEventId(MissingEventIdPolicy.SKIP_AND_LOG));
        await().atMost(Duration.ofSeconds(60)).until(() -> Meters.applied(meters) == 1);
        assertThat(Meters.count(meters, "once.kafka.records.missing_id"))
                .as("an empty id header is no id")
                .isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox WHERE event_id = 'last-1'"))
                .as("the last header of the id's name is the id")
                .isEqualTo(1);
        assertThat(KafkaLedger.balance(db)).isEqualTo(7);
    }

    @Test
    void retryableFailureIsRetriedWithBackoffThenDeadLetteredWhenAttemptsRunOut() {
        String topic = kafka.createTopic("retry", 1);
        String dlt = kafka.createTopic("retry-dlt", 1);
        KafkaLedger.publish(kafka.bootstrapServers(), topic, List.of(new Event("r-1", 3, 0), new Event("r-2", 4, 0)));
        Map<String, Integer> tries = new ConcurrentHashMap<>();
        Map<Integer, Long> triedAt = new ConcurrentHashMap<>();
        // a backoff longer than a fetch's wait on the broker, so a retry that is not held comes too early
        started(runner(topic, "retry-" + topic)
                .retryBackoff(Duration.ofMillis(600), Duration.ofSeconds(2))
                .maxAttempts(3)
                .deadLetterTopic(dlt)
                .handler((d, tx) -> {
                    tries.merge(d.eventId() + "#" + d.attempt(), 1, Integer::sum);
                    if (d.eventId().equals("r-1")) {
                        triedAt.putIfAbsent(d.attempt(), System.nanoTime());
                    }
                    if (d.eventId().equals("r-1")) {
                        throw new IllegalStateException("always down");
                    }
                    CREDIT.handle(d, tx);
                }));
        await().atMost(Duration.ofSeconds(60)).until(() -> Meters.applied(meters) == 1);
        assertThat(tries).containsKeys("r-1#1", "r-1#2", "r-1#3").doesNotContainKey("r-1#4");
        List<ConsumerRecord<byte[], byte[]>> dead = readAll(dlt, 1);
        assertThat(header(dead.get(0), "once-dlt-reason"))
                .contains("failed 3 times")
                .contains("always down");
        assertThat(KafkaLedger.balance(db)).isEqualTo(4);
        assertSpacedByBackoff(triedAt, 3, Duration.ofMillis(600));
    }

    @Test
    void retryBackoffHoldsAnIdlePartitionSoAttemptsAreSpacedByTheConfiguredBackoff() {
        String topic = kafka.createTopic("idle-backoff", 1);
        KafkaLedger.publish(kafka.bootstrapServers(), topic, List.of(new Event("b-1", 5, 0)));
        Map<Integer, Long> triedAt = new ConcurrentHashMap<>();
        // one record, nothing else on the partition: no poll during the batch returns records
        KafkaConsumerRunner r = started(runner(topic, "idle-" + topic)
                .retryBackoff(Duration.ofMillis(100), Duration.ofSeconds(1))
                .maxAttempts(10)
                .handler((d, tx) -> {
                    triedAt.putIfAbsent(d.attempt(), System.nanoTime());
                    if (d.attempt() <= 4) {
                        throw new IllegalStateException("down on attempt " + d.attempt());
                    }
                    CREDIT.handle(d, tx);
                }));
        await().atMost(Duration.ofSeconds(60)).until(() -> Meters.applied(meters) == 1);
        assertSpacedByBackoff(triedAt, 5, Duration.ofMillis(100));
        assertThat(r.isRunning()).isTrue();
        assertThat(KafkaLedger.balance(db)).isEqualTo(5);
    }

    @Test
    void aHundredMillisecondDatabaseOutageDoesNotStopARunnerWithoutADeadLetterTopic() {
        String topic = kafka.createTopic("outage", 1);
        KafkaLedger.publish(
                kafka.bootstrapServers(),
                topic,
                List.of(new Event("o-1", 1, 0), new Event("o-2", 2, 0), new Event("o-3", 3, 0)));
        // the database refuses connections for 100 ms from the first one asked for
        long[] outageEnd = {-1}; // armed once the runner is built (the builder detects the dialect)
        DataSource real = db.dataSource();
        DataSource flaky = (DataSource) Proxy.newProxyInstance(
                getClass().getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                    if (method.getName().equals("getConnection")) {
                        synchronized (outageEnd) {
                            if (outageEnd[0] == 0) { // armed, and the first connection since
                                outageEnd[0] = System.nanoTime()
                                        + Duration.ofMillis(100).toNanos();
                            }
                            if (outageEnd[0] != -1 && System.nanoTime() - outageEnd[0] < 0) {
                                throw new SQLException("connection refused (database restarting)", "08001");
                            }
                        }
                    }
                    try {
                        return method.invoke(real, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        // one try before dead-lettering: without a dead-letter topic the failed try must be retried, not fatal
        KafkaConsumerRunner r = runner(topic, "outage-" + topic)
                .dataSource(flaky)
                .maxAttempts(1)
                .build();
        runners.add(r);
        synchronized (outageEnd) {
            outageEnd[0] = 0;
        }
        r.start();
        await().atMost(Duration.ofSeconds(60))
                .until(() -> Meters.applied(meters) == 3 || r.failure().isPresent());
        assertThat(r.failure()).as("a short outage is retried, not fatal").isEmpty();
        assertThat(r.isRunning()).isTrue();
        assertThat(KafkaLedger.balance(db)).isEqualTo(6);
        assertThat(Meters.count(meters, "once.kafka.records.failed"))
                .as("the outage was seen")
                .isPositive();
    }

    /** Attempt n+1 came at least the backoff after attempt n: {@code initial} doubled per failure. */
    private static void assertSpacedByBackoff(Map<Integer, Long> triedAt, int attempts, Duration initial) {
        assertThat(triedAt)
                .containsKeys(IntStream.rangeClosed(1, attempts).boxed().toArray(Integer[]::new));
        for (int n = 1; n < attempts; n++) {
            long gap = triedAt.get(n + 1) - triedAt.get(n);
            Duration backoff = initial.multipliedBy(1L << (n - 1));
            assertThat(Duration.ofNanos(gap))
                    .as("attempt %d came %s after attempt %d, backoff %s", n + 1, Duration.ofNanos(gap), n, backoff)
                    .isGreaterThanOrEqualTo(backoff);
        }
    }

    @Test
    void prebuiltConsumerConflictsWithHandlerSettingsAndSaysWhatToRemove() {
        IdempotentConsumer prebuilt = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("ledger")
                .handler(CREDIT)
                .build();
        assertThatThrownBy(() -> runner("t", "g").idempotentConsumer(prebuilt).build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("idempotentConsumer(IdempotentConsumer) was given together with dataSource(...),"
                        + " consumer(...), handler(...)")
                .hasMessageContaining("remove dataSource(...), consumer(...), handler(...)");
        assertThatThrownBy(() -> KafkaConsumerRunner.builder()
                        .kafkaProperties(KafkaLedger.consumerProperties(kafka, "g"))
                        .topics("t")
                        .idempotentConsumer(prebuilt)
                        .idempotentConsumer(b -> b.consumer("other"))
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("idempotentConsumer(settings -> ...)");
        assertThatThrownBy(() -> KafkaConsumerRunner.builder()
                        .kafkaProperties(KafkaLedger.consumerProperties(kafka, "g"))
                        .topics("t")
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("or give a prebuilt idempotentConsumer(IdempotentConsumer)");
    }

    @Test
    void prebuiltConsumerRetriesAFailedRecordWithoutCommittingPastItAndAppliesEveryEffectOnce() {
        String topic = kafka.createTopic("prebuilt", 1);
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            events.add(new Event("p-" + i, 1 + i, 0));
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);
        // p-13 fails on its first two tries. No guard holds back p-14.. in its batch, so they are
        // applied before p-13; the runner must still seek back to p-13 (committing nothing past it)
        // and absorb p-14.. as duplicates when they come again.
        Map<String, Integer> failures = new ConcurrentHashMap<>();
        IdempotentConsumer prebuilt = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("ledger")
                .handler((d, tx) -> {
                    if (d.eventId().equals("p-13") && failures.merge(d.eventId(), 1, Integer::sum) <= 2) {
                        throw new IllegalStateException("downstream hiccup for " + d.eventId());
                    }
                    CREDIT.handle(d, tx);
                })
                .build();
        String group = "prebuilt-" + topic;
        started(KafkaConsumerRunner.builder()
                .kafkaProperties(KafkaLedger.consumerProperties(kafka, group))
                .kafkaProperties(Map.of(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10"))
                .topics(topic)
                .idempotentConsumer(prebuilt)
                .retryBackoff(Duration.ofMillis(20), Duration.ofMillis(200))
                .meterRegistry(meters));

        await().atMost(Duration.ofSeconds(60))
                .until(() -> KafkaLedger.appliedRows(db) >= 40 && committed(topic, group) == 40);
        assertThat(failures.get("p-13"))
                .as("p-13 retried until it went through")
                .isEqualTo(3);
        assertThat(KafkaLedger.appliedTwice(db)).as("no effect applied twice").isZero();
        assertThat(KafkaLedger.distinctApplied(db)).as("no effect lost").isEqualTo(40);
        assertThat(KafkaLedger.balance(db))
                .isEqualTo(IntStream.range(0, 40).mapToLong(i -> 1 + i).sum());
        assertThat(Meters.duplicates(meters))
                .as("records applied ahead of p-13 came again and were absorbed")
                .isPositive();
    }

    private long committed(String topic, String group) {
        try (var admin = kafka.admin()) {
            var offsets = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata()
                    .get();
            return offsets.entrySet().stream()
                    .filter(e -> e.getKey().topic().equals(topic))
                    .mapToLong(e -> e.getValue().offset())
                    .sum();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
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
