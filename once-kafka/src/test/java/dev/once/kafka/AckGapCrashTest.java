package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.kafka.KafkaLedger.Event;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.ChildJvm;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * SIGKILL in the ack gap: a consumer in a child JVM commits its first batch in the database and is
 * killed before it commits the offsets. A new consumer of the same group replays those records; the
 * inbox absorbs them.
 */
class AckGapCrashTest {

    @Test
    void recordsCommittedInTheDatabaseButNotInKafkaAreReplayedAsDuplicatesAndTheLedgerIsUnchanged() throws Exception {
        Crash c = crashInTheAckGap(false);
        assertThat(c.replayed)
                .as("every record of the killed batch replayed as a duplicate")
                .isEqualTo(c.appliedAtCrash);
    }

    @Test
    void withOffsetsInTheClaimTransactionNothingTheDatabaseCommittedIsReplayed() throws Exception {
        Crash c = crashInTheAckGap(true);
        assertThat(c.replayed)
                .as("offsets committed with the claims: no replay of what the database committed")
                .isZero();
    }

    /** What a SIGKILL in the ack gap left: rows the killed child committed, and records replayed as duplicates. */
    private record Crash(long appliedAtCrash, long replayed) {}

    private Crash crashInTheAckGap(boolean offsetsInDatabase) throws Exception {
        TestKafka kafka = TestKafka.shared();
        String topic = kafka.createTopic("ackgap", 2);
        String group = "ackgap-" + topic;
        List<Event> events = new ArrayList<>();
        long total = 0;
        for (int i = 0; i < 60; i++) {
            events.add(new Event("evt-" + i, i + 1, i % 2));
            total += i + 1;
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);

        try (TestDatabase db = KafkaLedger.database()) {
            long appliedAtCrash;
            long balanceAtCrash;
            // the child's sessions carry a name of their own, so the test can wait for them to end
            String application = "once-ackgap-" + topic;
            try (ChildJvm child = ChildJvm.start(
                    AckGapConsumerMain.class,
                    Map.of(),
                    kafka.bootstrapServers(),
                    topic,
                    group,
                    KafkaLedger.jdbcUrl(db) + "&ApplicationName=" + application,
                    Integer.toString(kafka.sessionTimeoutMs()),
                    offsetsInDatabase ? "offsets-in-database" : "-")) {
                child.awaitLineStartingWith(AckGapConsumerMain.MARKER, Duration.ofSeconds(90));
                child.kill();
                // The next batch may have been running in the gap, its COMMIT already sent: the server
                // finishes it after the kill. Read once every session of the child has ended.
                await().atMost(Duration.ofSeconds(60))
                        .until(() -> db.queryLong("SELECT count(*) FROM pg_stat_activity WHERE application_name = '"
                                        + application + "'")
                                == 0);
                appliedAtCrash = KafkaLedger.appliedRows(db);
                balanceAtCrash = KafkaLedger.balance(db);
            }
            assertThat(appliedAtCrash)
                    .as("the killed consumer committed a batch in the database")
                    .isPositive();
            assertThat(committedOffsets(kafka, group))
                    .as("and no offset in Kafka: it died in the ack gap")
                    .isZero();

            SimpleMeterRegistry meters = new SimpleMeterRegistry();
            try (KafkaConsumerRunner replay = KafkaConsumerRunner.builder()
                    .kafkaProperties(KafkaLedger.consumerProperties(kafka, group))
                    .topics(topic)
                    .dataSource(db.dataSource())
                    .consumer("ledger")
                    .handler(KafkaLedger.CREDIT)
                    .offsetsInDatabase(offsetsInDatabase)
                    .meterRegistry(meters)
                    .build()
                    .start()) {
                await().atMost(Duration.ofSeconds(60))
                        .until(() -> Meters.applied(meters) + appliedAtCrash >= events.size());
                await().atMost(Duration.ofSeconds(60)).until(() -> committedOffsets(kafka, group) == events.size());
            }
            assertThat(Meters.applied(meters)).isEqualTo(events.size() - appliedAtCrash);
            assertThat(KafkaLedger.appliedTwice(db))
                    .as("no effect applied twice")
                    .isZero();
            assertThat(KafkaLedger.balance(db))
                    .as("ledger credited each event once")
                    .isEqualTo(total);
            assertThat(balanceAtCrash).isPositive().isLessThan(total);
            assertThat(committedOffsets(kafka, group))
                    .as("the replaying consumer committed on close")
                    .isEqualTo(events.size());
            System.out.println("ACKGAP offsetsInDatabase=" + offsetsInDatabase + " appliedAtCrash=" + appliedAtCrash
                    + " replayed=" + Meters.duplicates(meters));
            return new Crash(appliedAtCrash, (long) Meters.duplicates(meters));
        }
    }

    static long committedOffsets(TestKafka kafka, String group) throws Exception {
        try (var admin = kafka.admin()) {
            return admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().values().stream()
                    .filter(o -> o != null)
                    .mapToLong(o -> o.offset())
                    .sum();
        }
    }
}
