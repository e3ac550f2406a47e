package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.RetryableException;
import dev.once.kafka.KafkaLedger.Event;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 25 ("found by reading"): the same event id on two partitions. The claim is per consumer
 * and event id, so the event is applied once; it must not be applied on one partition while its
 * copy on the other waits behind a record that failed there. Here {@code f} fails on partition 1
 * with {@code x} after it; {@code x} then arrives on partition 0 too. It is held back until
 * {@code f} goes through, then applied once, after {@code f}.
 *
 * <p>On the code before the fix, {@code x} was applied from partition 0 at once, while {@code f}
 * was still failing: [x] in the ledger with {@code f} not yet applied. It passed alone and failed in
 * full runs: when one poll brought partition 1's {@code f, x} ahead of partition 0's {@code x}, the
 * copy on partition 0 was tried alone as if partition 1 did not hold it back
 * ({@code BatchVerdictsTest.aCopyIsHeldBackWhileItsEventWaitsBehindAFailureOnAnotherPartition});
 * {@link #inOneBatch} sets that batch up every time.
 *
 * <p>Each runs with the per-event handler and with a batch handler: a batch that holds only the copy
 * on partition 0 is whole (every record of it in one call), and must still wait for partition 1. A
 * batch handler's call that holds both f and x meets f first: its list keeps every partition's order
 * (before, it listed x first, from partition 0, and x was applied ahead of f in their transaction).
 */
class SameEventOnTwoPartitionsTest {

    @ParameterizedTest(name = "batch handler: {0}")
    @ValueSource(booleans = {false, true})
    void anEventHeldBackOnOnePartitionIsNotAppliedFromAnother(boolean batchHandler) throws Exception {
        TestKafka kafka = TestKafka.shared();
        String topic = kafka.createTopic("twice" + (batchHandler ? "-batch" : ""), 2);
        KafkaLedger.publish(kafka.bootstrapServers(), topic, List.of(new Event("f", 1, 1), new Event("x", 1, 1)));

        try (TestDatabase db = KafkaLedger.database()) {
            SimpleMeterRegistry meters = new SimpleMeterRegistry();
            AtomicBoolean failF = new AtomicBoolean(true);
            AtomicInteger fFailures = new AtomicInteger();
            try (KafkaConsumerRunner runner = runner(
                    kafka,
                    topic,
                    db,
                    meters,
                    failF,
                    fFailures,
                    Duration.ofMillis(100),
                    Duration.ofMillis(300),
                    batchHandler)) {
                // f failed, and x on partition 1 was fetched behind it (a first fetch may hold f alone, and a
                // copy not yet fetched holds nothing back): both of the topic's records polled. (Not "more
                // records polled than f's failures": the handler may run twice per batch for f, so that was a
                // race, and it timed out in CI.)
                await().atMost(Duration.ofSeconds(60))
                        .until(() -> fFailures.get() >= 1 && Meters.count(meters, "once.kafka.records.polled") >= 2);
                KafkaLedger.publish(kafka.bootstrapServers(), topic, List.of(new Event("x", 1, 0)));
                long polledAfter = Meters.count(meters, "once.kafka.records.polled");
                int failuresAfter = fFailures.get();
                // x on partition 0 was fetched and f failed again since, in three batches or more.
                await().atMost(Duration.ofSeconds(60))
                        .until(() -> Meters.count(meters, "once.kafka.records.polled") > polledAfter
                                && fFailures.get() >= failuresAfter + 6);
                assertThat(appliedIds(db))
                        .as("x is not applied from partition 0 while it waits behind f on partition 1")
                        .isEmpty();

                failF.set(false);
                await().atMost(Duration.ofSeconds(60)).until(() -> KafkaLedger.distinctApplied(db) == 2);
                await().atMost(Duration.ofSeconds(60)).until(() -> Meters.acknowledged(meters) >= 3);
            }
            assertAppliedFThenX(db);
        }
    }

    /** All three records are there before the runner starts: every poll holds both partitions' copies of x. */
    @ParameterizedTest(name = "batch handler: {0}")
    @ValueSource(booleans = {false, true})
    void inOneBatch(boolean batchHandler) throws Exception {
        TestKafka kafka = TestKafka.shared();
        String topic = kafka.createTopic("twice-one-batch" + (batchHandler ? "-batch" : ""), 2);
        KafkaLedger.publish(
                kafka.bootstrapServers(),
                topic,
                List.of(new Event("f", 1, 1), new Event("x", 1, 1), new Event("x", 1, 0)));

        try (TestDatabase db = KafkaLedger.database()) {
            SimpleMeterRegistry meters = new SimpleMeterRegistry();
            AtomicBoolean failF = new AtomicBoolean(true);
            AtomicInteger fFailures = new AtomicInteger();
            try (KafkaConsumerRunner runner = runner(
                    kafka,
                    topic,
                    db,
                    meters,
                    failF,
                    fFailures,
                    Duration.ofMillis(50),
                    Duration.ofMillis(100),
                    batchHandler)) {
                // every record fetched (more than once), f failed each time
                await().atMost(Duration.ofSeconds(60))
                        .until(() -> fFailures.get() >= 5 && Meters.count(meters, "once.kafka.records.polled") >= 6);
                assertThat(appliedIds(db))
                        .as("x is not applied from partition 0 while it waits behind f on partition 1")
                        .isEmpty();
                failF.set(false);
                await().atMost(Duration.ofSeconds(60)).until(() -> KafkaLedger.distinctApplied(db) == 2);
            }
            assertAppliedFThenX(db);
        }
    }

    /**
     * A poll where {@code x} is on both partitions, each copy behind a record whose event was applied
     * before ({@code d0}, {@code d1}: a replay or a double publish, the common case after a restart): those
     * records are settled, so nothing is held back and {@code x, a0, a1} go in the poll's one transaction.
     *
     * <p>Before the fix, the poll was listed partition by partition, and the guard took the duplicate on
     * the partition listed second for a record not yet tried (listed after {@code x}, and not applied) and
     * refused {@code x}; everything behind {@code x} on its first partition was then held back, each record
     * failing alone, and the runner backed off and polled again. In ScaleTest's last stage (a replacement
     * consumer replaying, with copies on two of its partitions) that was a tail of 40-70 s at some 30
     * events a second. Now the runner lists {@code x} after both duplicates, and a batch handler's guard
     * asks the inbox about a record listed later that its call does not hold.
     */
    @ParameterizedTest(name = "batch handler: {0}")
    @ValueSource(booleans = {false, true})
    void aDuplicateAheadOfACopyHoldsNothingBack(boolean batchHandler) throws Exception {
        TestKafka kafka = TestKafka.shared();
        String before = kafka.createTopic("twice-applied-before", 1);
        String topic = kafka.createTopic("twice-behind-duplicates" + (batchHandler ? "-batch" : ""), 2);
        KafkaLedger.publish(kafka.bootstrapServers(), before, List.of(new Event("d0", 1, 0), new Event("d1", 1, 0)));
        KafkaLedger.publish(
                kafka.bootstrapServers(),
                topic,
                List.of(
                        new Event("d0", 1, 0),
                        new Event("x", 1, 0),
                        new Event("a0", 1, 0),
                        new Event("d1", 1, 1),
                        new Event("x", 1, 1),
                        new Event("a1", 1, 1)));

        try (TestDatabase db = KafkaLedger.database()) {
            AtomicBoolean never = new AtomicBoolean(false);
            AtomicInteger unused = new AtomicInteger();
            SimpleMeterRegistry first = new SimpleMeterRegistry();
            try (KafkaConsumerRunner runner = runner(
                    kafka,
                    before,
                    db,
                    first,
                    never,
                    unused,
                    Duration.ofMillis(100),
                    Duration.ofMillis(300),
                    batchHandler)) {
                await().atMost(Duration.ofSeconds(60)).until(() -> KafkaLedger.distinctApplied(db) == 2);
            }

            SimpleMeterRegistry meters = new SimpleMeterRegistry();
            try (KafkaConsumerRunner runner = runner(
                    kafka,
                    topic,
                    db,
                    meters,
                    never,
                    unused,
                    Duration.ofMillis(100),
                    Duration.ofMillis(300),
                    batchHandler)) {
                await().atMost(Duration.ofSeconds(60)).until(() -> Meters.acknowledged(meters) >= 6);
                assertThat(Meters.count(meters, "once.kafka.records.failed"))
                        .as("record tries that failed (held back behind a duplicate)")
                        .isZero();
            }
            assertThat(appliedIds(db)).containsExactlyInAnyOrder("d0", "d1", "x", "a0", "a1");
        }
    }

    /**
     * A runner crediting the ledger whose handler (per event, or a batch handler) fails {@code f} while
     * {@code failF} is set, counting its failures.
     */
    private static KafkaConsumerRunner runner(
            TestKafka kafka,
            String topic,
            TestDatabase db,
            SimpleMeterRegistry meters,
            AtomicBoolean failF,
            AtomicInteger fFailures,
            Duration firstBackoff,
            Duration maxBackoff,
            boolean batchHandler) {
        KafkaConsumerRunnerBuilder b = KafkaConsumerRunner.builder()
                .kafkaProperties(KafkaLedger.consumerProperties(kafka, "twice-" + topic))
                .topics(topic)
                .dataSource(db.dataSource())
                .consumer("ledger")
                .retryBackoff(firstBackoff, maxBackoff)
                .meterRegistry(meters);
        if (batchHandler) {
            b.batchHandler((claimed, tx) -> {
                for (Delivery d : claimed) {
                    failIfF(d, failF, fFailures);
                }
                KafkaLedger.BATCH_CREDIT.handle(claimed, tx);
            });
        } else {
            b.handler((d, tx) -> {
                failIfF(d, failF, fFailures);
                KafkaLedger.CREDIT.handle(d, tx);
            });
        }
        return b.build().start();
    }

    private static void failIfF(Delivery d, AtomicBoolean failF, AtomicInteger fFailures) {
        if (d.eventId().equals("f") && failF.get()) {
            fFailures.incrementAndGet();
            throw new RetryableException("downstream of f is down");
        }
    }

    /** Each once, f before x: after it, or ahead of it in the call of a batch handler that holds both. */
    private static void assertAppliedFThenX(TestDatabase db) throws Exception {
        assertThat(appliedIds(db)).as("f, then x, each once").containsExactly("f", "x");
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
