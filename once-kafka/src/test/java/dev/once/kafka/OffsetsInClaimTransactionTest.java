package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Handler;
import dev.once.kafka.KafkaLedger.Event;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Issue 19 ("found by reading"): with {@code offsetsInDatabase}, the offsets commit in the same
 * transaction as the claims and the effects, also when the engine checks the claim before
 * committing (here: the handler ran a statement naming the inbox). The fault: every write of an
 * offset fails (a trigger), as a crash between two transactions would leave it. No effect may then
 * commit, since its offset cannot.
 *
 * <p>On the code before the fix, PostgreSQL committed the claim and effect with the check
 * ({@code SELECT ...; COMMIT} in one round trip) and wrote the offsets in a second transaction:
 * all 3 effects committed with no offset stored.
 */
class OffsetsInClaimTransactionTest {

    @Test
    void anEffectNeverCommitsWithoutItsOffset() throws Exception {
        TestKafka kafka = TestKafka.shared();
        String topic = kafka.createTopic("offtx", 1);
        List<Event> events = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            events.add(new Event("o-" + i, 1, 0));
        }
        KafkaLedger.publish(kafka.bootstrapServers(), topic, events);

        try (TestDatabase db = KafkaLedger.database()) {
            SimpleMeterRegistry meters = new SimpleMeterRegistry();
            Handler lookingAtTheInbox = (d, tx) -> {
                // Names the inbox: the engine then checks its claim before the commit.
                try (var st = tx.connection().createStatement()) {
                    st.executeQuery("SELECT count(*) FROM once_inbox").close();
                }
                KafkaLedger.CREDIT.handle(d, tx);
            };
            try (KafkaConsumerRunner runner = KafkaConsumerRunner.builder()
                    .kafkaProperties(KafkaLedger.consumerProperties(kafka, "offtx-" + topic))
                    .topics(topic)
                    .dataSource(db.dataSource())
                    .consumer("ledger")
                    .handler(lookingAtTheInbox)
                    .retryBackoff(Duration.ofMillis(50), Duration.ofMillis(200))
                    .offsetsInDatabase(true)
                    .meterRegistry(meters)
                    .build()) {
                db.execute(
                        "CREATE FUNCTION no_offsets() RETURNS trigger LANGUAGE plpgsql AS"
                                + " $$ BEGIN RAISE EXCEPTION 'offset write fails'; END $$",
                        "CREATE TRIGGER no_offsets BEFORE INSERT OR UPDATE ON once_kafka_offsets"
                                + " FOR EACH ROW EXECUTE FUNCTION no_offsets()");
                runner.start();
                await().atMost(Duration.ofSeconds(60))
                        .until(() -> Meters.count(meters, "once.kafka.records.failed") >= 3
                                || KafkaLedger.distinctApplied(db) == events.size());
                assertThat(KafkaLedger.appliedRows(db))
                        .as("no effect commits while its offset cannot")
                        .isZero();

                db.execute("DROP TRIGGER no_offsets ON once_kafka_offsets");
                await().atMost(Duration.ofSeconds(60))
                        .until(() -> db.queryLong("SELECT coalesce(max(next_offset), 0) FROM once_kafka_offsets")
                                == events.size());
            }
            assertThat(KafkaLedger.distinctApplied(db)).isEqualTo(events.size());
            assertThat(KafkaLedger.appliedTwice(db)).isZero();
        }
    }
}
