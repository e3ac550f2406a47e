package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.kafka.KafkaLedger.Event;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 19 item 8, issue 25 item 3: a record whose claim is held by another, unfinished
 * transaction (a zombie: the slow batch of an owner that lost the partition) stops its partition.
 * Nothing after it is applied, and no offset passes it, in Kafka or in the database; a second
 * runner that takes the group over while the first closes (a rolling deploy) still starts at it;
 * once the zombie rolls back, every record is applied once, in offset order.
 *
 * <p>On the code before the fix the records after the held one were applied at once (bisection
 * ran them in a transaction of their own), and with {@code offsetsInDatabase} their offset went to
 * the database: the second runner started past the held record, which the zombie then rolled back,
 * and it was never applied.
 */
class HeldClaimStopsPartitionTest {

    private static final int RECORDS = 6;
    private static final int HELD = 2;

    @ParameterizedTest(name = "offsetsInDatabase={0}")
    @ValueSource(booleans = {true, false})
    void aClaimHeldElsewhereStopsItsPartitionAcrossARollingDeploy(boolean offsetsInDatabase) throws Exception {
        TestKafka kafka = TestKafka.shared();
        String topic = kafka.createTopic("held", 1);
        String group = "held-" + topic;
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < RECORDS; i++) {
            events.add(new Event("h-" + i, 1, 0));
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);

        try (TestDatabase db = KafkaLedger.database()) {
            Map<String, Object> props = KafkaLedger.consumerProperties(kafka, group);
            SimpleMeterRegistry metersA = new SimpleMeterRegistry();
            KafkaConsumerRunner a = runner(props, topic, db, metersA, offsetsInDatabase);
            try (Connection zombie = db.dataSource().getConnection()) {
                // The zombie: another delivery of h-2 that claimed it and has not committed.
                zombie.setAutoCommit(false);
                try (PreparedStatement ps = zombie.prepareStatement(
                        "INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES ('ledger', ?, ?)")) {
                    ps.setString(1, events.get(HELD).id());
                    ps.setTimestamp(2, Timestamp.from(Instant.now()));
                    ps.executeUpdate();
                }
                a.start();
                await().atMost(Duration.ofSeconds(60))
                        .until(() -> Meters.count(metersA, "once.kafka.records.failed") >= 3);
                assertThat(appliedIds(db))
                        .as("nothing after the held record h-2 is applied while its claim is held elsewhere")
                        .containsExactly("h-0", "h-1");
                if (offsetsInDatabase) {
                    assertThat(db.queryLong("SELECT coalesce(max(next_offset), 0) FROM once_kafka_offsets"))
                            .as("the offset kept in the database does not pass the held record")
                            .isLessThanOrEqualTo(HELD);
                }

                // Rolling deploy: a second runner joins while the first closes; then the zombie fails.
                SimpleMeterRegistry metersB = new SimpleMeterRegistry();
                try (KafkaConsumerRunner b = runner(props, topic, db, metersB, offsetsInDatabase)) {
                    b.start();
                    a.close();
                    zombie.rollback();
                    await().atMost(Duration.ofSeconds(60)).until(() -> KafkaLedger.distinctApplied(db) == RECORDS);
                }
            } finally {
                a.close();
            }
            assertThat(appliedIds(db))
                    .as("every record applied once, in offset order")
                    .containsExactly("h-0", "h-1", "h-2", "h-3", "h-4", "h-5");
            assertThat(KafkaLedger.outOfOrder(db)).isZero();
        }
    }

    private static KafkaConsumerRunner runner(
            Map<String, Object> props,
            String topic,
            TestDatabase db,
            SimpleMeterRegistry meters,
            boolean offsetsInDatabase) {
        return KafkaConsumerRunner.builder()
                .kafkaProperties(props)
                .topics(topic)
                .dataSource(db.dataSource())
                .consumer("ledger")
                .idempotentConsumer(s -> s.lockTimeout(Duration.ofMillis(100)))
                .handler(KafkaLedger.CREDIT)
                .retryBackoff(Duration.ofMillis(50), Duration.ofMillis(200))
                .offsetsInDatabase(offsetsInDatabase)
                .meterRegistry(meters)
                .build();
    }

    private static List<String> appliedIds(TestDatabase db) throws Exception {
        List<String> ids = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                var rs = c.createStatement().executeQuery("SELECT event_id FROM applied ORDER BY seq")) {
            while (rs.next()) {
                ids.add(rs.getString(1));
            }
        }
        return ids;
    }
}
