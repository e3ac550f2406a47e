package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.kafka.KafkaLedger.Event;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.junit.jupiter.api.Test;

/**
 * A batch slower than {@code max.poll.interval.ms}: the first consumer keeps its membership (its
 * partitions are paused while the batch runs, and it keeps polling); a second consumer joins while
 * the batch is past the interval; the first abandons the batch on revoke, the second replays its
 * records, and the inbox lets each effect through once.
 */
class RebalanceAfterSlowBatchTest {

    private static final int MAX_POLL_INTERVAL_MS = 2_000;
    private static final long SLOW_HANDLER_MS = 3 * MAX_POLL_INTERVAL_MS;

    @Test
    void secondConsumerJoiningDuringASlowBatchReplaysItAndEachEffectIsAppliedOnce() throws Exception {
        TestKafka kafka = TestKafka.shared();
        String topic = kafka.createTopic("slow", 2);
        String group = "slow-" + topic;
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            events.add(new Event("s-" + i, 1, i % 2));
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);

        try (TestDatabase db = KafkaLedger.database()) {
            CountDownLatch slowStarted = new CountDownLatch(1);
            AtomicLong slowSince = new AtomicLong();
            AtomicBoolean slowDone = new AtomicBoolean();
            SimpleMeterRegistry metersA = new SimpleMeterRegistry();
            SimpleMeterRegistry metersB = new SimpleMeterRegistry();
            Map<String, Object> props = KafkaLedger.consumerProperties(kafka, group);
            props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, Integer.toString(MAX_POLL_INTERVAL_MS));
            try (KafkaConsumerRunner a = KafkaConsumerRunner.builder()
                    .kafkaProperties(props)
                    .topics(topic)
                    .dataSource(db.dataSource())
                    .consumer("ledger")
                    .meterRegistry(metersA)
                    .revokeTimeout(Duration.ofMillis(MAX_POLL_INTERVAL_MS / 2))
                    .handler((d, tx) -> {
                        if (slowDone.compareAndSet(false, true)) {
                            slowSince.set(System.nanoTime());
                            slowStarted.countDown();
                            // The handler itself is what is slow: a downstream that stalls.
                            Thread.sleep(SLOW_HANDLER_MS);
                        }
                        KafkaLedger.CREDIT.handle(d, tx);
                    })
                    .build()
                    .start()) {
                assertThat(slowStarted.await(60, TimeUnit.SECONDS)).isTrue();
                await().atMost(Duration.ofSeconds(30))
                        .until(() -> System.nanoTime() - slowSince.get()
                                > TimeUnit.MILLISECONDS.toNanos(MAX_POLL_INTERVAL_MS + 500));
                ConsumerGroupDescription during = describe(kafka, group);
                assertThat(during.members())
                        .as("past max.poll.interval.ms, the slow consumer is still a member")
                        .hasSize(1);

                try (KafkaConsumerRunner b = KafkaConsumerRunner.builder()
                        .kafkaProperties(props)
                        .topics(topic)
                        .dataSource(db.dataSource())
                        .consumer("ledger")
                        .meterRegistry(metersB)
                        .handler(KafkaLedger.CREDIT)
                        .build()
                        .start()) {
                    await().atMost(Duration.ofSeconds(60))
                            .until(() -> Meters.applied(metersA) + Meters.applied(metersB) == events.size()
                                    && Meters.duplicates(metersB) > 0);
                    assertThat(a.isRunning()).isTrue();
                    assertThat(b.isRunning()).isTrue();
                }
            }
            assertThat(Meters.duplicates(metersB))
                    .as("the second consumer replayed records the first applied")
                    .isPositive();
            assertThat(KafkaLedger.appliedTwice(db))
                    .as("each effect applied exactly once")
                    .isZero();
            assertThat(KafkaLedger.distinctApplied(db)).isEqualTo(events.size());
            assertThat(KafkaLedger.balance(db)).isEqualTo(events.size());
        }
    }

    private static ConsumerGroupDescription describe(TestKafka kafka, String group) throws Exception {
        try (var admin = kafka.admin()) {
            return admin.describeConsumerGroups(List.of(group))
                    .describedGroups()
                    .get(group)
                    .get();
        }
    }
}
