package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.kafka.KafkaLedger.Event;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/**
 * Offsets go to Kafka with {@code commitAsync} between batches. Hostile: a second runner joins the
 * group exactly while the first sends an async commit (the group is already rebalancing when it
 * goes out), and the revoke commits synchronously behind it. At no moment may an offset be
 * committed, or about to be, past what the database committed; in the end everything is committed.
 */
class AsyncCommitTest {

    private final TestKafka kafka = TestKafka.shared();

    @Test
    void aRebalanceDuringAnInFlightAsyncCommitNeverCommitsPastTheDatabase() throws Exception {
        String topic = kafka.createTopic("async-commit", 3);
        String group = "async-commit-" + topic;
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 3000; i++) {
            events.add(new Event("a-" + i, 1, i % 3));
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);
        try (TestDatabase db = KafkaLedger.database()) {
            List<String> violations = new CopyOnWriteArrayList<>();
            SimpleMeterRegistry metersA = new SimpleMeterRegistry();
            SimpleMeterRegistry metersB = new SimpleMeterRegistry();
            AtomicInteger commits = new AtomicInteger();
            AtomicReference<KafkaConsumerRunner> second = new AtomicReference<>();
            AtomicBoolean sampling = new AtomicBoolean(true);
            Map<String, Object> props = KafkaLedger.consumerProperties(kafka, group);
            props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");

            KafkaConsumerRunnerBuilder a = runner(db, props, metersA).afterDatabaseCommit(offsets -> {
                check("A about to commit", offsets, db, violations);
                if (commits.incrementAndGet() == 5) {
                    // Start B and return only once its join has put the group into a rebalance: the
                    // async commit sent next is refused by the broker.
                    second.set(runner(db, props, metersB)
                            .afterDatabaseCommit(o -> check("B about to commit", o, db, violations))
                            .build()
                            .start());
                    await().atMost(Duration.ofSeconds(30)).until(() -> rebalancing(group));
                }
            });
            Thread sampler = new Thread(() -> {
                try (var admin = kafka.admin()) {
                    while (sampling.get()) {
                        // Kafka's committed offsets first, then the database: the database only grows,
                        // so a committed offset above it was committed ahead of the database.
                        check("committed in Kafka", toOffsets(committed(admin, group)), db, violations);
                    }
                }
            });
            try (KafkaConsumerRunner runnerA = a.build().start()) {
                sampler.start();
                await().atMost(Duration.ofSeconds(90))
                        .until(() -> second.get() != null
                                && KafkaLedger.distinctApplied(db) == events.size()
                                && Meters.acknowledged(metersA) + Meters.acknowledged(metersB) >= events.size());
                second.get().close();
                assertThat(runnerA.isRunning()).isTrue();
            } finally {
                sampling.set(false);
                sampler.join();
                if (second.get() != null) {
                    second.get().close();
                }
            }
            assertThat(violations).as("offsets ahead of the database").isEmpty();
            assertThat(KafkaLedger.appliedTwice(db)).isZero();
            assertThat(KafkaLedger.distinctApplied(db)).isEqualTo(events.size());
            assertThat(committed(group).values().stream()
                            .mapToLong(Long::longValue)
                            .sum())
                    .as("the closes committed everything synchronously")
                    .isEqualTo(events.size());
        }
    }

    private KafkaConsumerRunnerBuilder runner(TestDatabase db, Map<String, Object> props, SimpleMeterRegistry meters) {
        return KafkaConsumerRunner.builder()
                .kafkaProperties(props)
                .topics(props.get(ConsumerConfig.GROUP_ID_CONFIG).toString().substring("async-commit-".length()))
                .dataSource(db.dataSource())
                .consumer("ledger")
                .batchHandler(KafkaLedger.BATCH_CREDIT)
                .maxBatchRecords(100)
                .meterRegistry(meters);
    }

    /** Each offset must be at most the next offset after the last record the database applied in its partition. */
    private static void check(
            String what, Map<TopicPartition, OffsetAndMetadata> offsets, TestDatabase db, List<String> violations) {
        if (offsets.isEmpty()) {
            return;
        }
        Map<Integer, Long> applied = new HashMap<>();
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT part, max(off) + 1 FROM applied GROUP BY part");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                applied.put(rs.getInt(1), rs.getLong(2));
            }
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
        offsets.forEach((tp, o) -> {
            long next = applied.getOrDefault(tp.partition(), 0L);
            if (o.offset() > next) {
                violations.add(what + ": " + tp + " at " + o.offset() + ", database applied up to " + next);
            }
        });
    }

    private static Map<TopicPartition, OffsetAndMetadata> toOffsets(Map<TopicPartition, Long> offsets) {
        Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
        offsets.forEach((tp, o) -> m.put(tp, new OffsetAndMetadata(o)));
        return m;
    }

    private boolean rebalancing(String group) {
        try (var admin = kafka.admin()) {
            GroupState state = admin.describeConsumerGroups(List.of(group))
                    .describedGroups()
                    .get(group)
                    .get()
                    .groupState();
            return state == GroupState.PREPARING_REBALANCE || state == GroupState.COMPLETING_REBALANCE;
        } catch (Exception e) {
            return false;
        }
    }

    private Map<TopicPartition, Long> committed(String group) {
        try (var admin = kafka.admin()) {
            return committed(admin, group);
        }
    }

    private static Map<TopicPartition, Long> committed(Admin admin, String group) {
        try {
            Map<TopicPartition, Long> m = new HashMap<>();
            admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata()
                    .get()
                    .forEach((tp, o) -> m.put(tp, o.offset()));
            return m;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
