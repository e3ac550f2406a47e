package dev.once.kafka.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.PermanentFailureException;
import dev.once.RetryableException;
import dev.once.kafka.MissingEventIdPolicy;
import dev.once.kafka.internal.BatchVerdicts.Decision;
import dev.once.kafka.internal.BatchVerdicts.Entry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** The poll loop's record/outcome decisions, without a broker: records and outcomes in, commit/seek/dead-letter out. */
class BatchVerdictsTest {

    private static final TopicPartition A = new TopicPartition("t", 0);
    private static final TopicPartition B = new TopicPartition("t", 1);
    private static final TopicPartition C = new TopicPartition("t", 2);

    private final SimpleMeterRegistry meters = new SimpleMeterRegistry();
    private final KafkaRunnerMetrics metrics = new KafkaRunnerMetrics(meters, "c", "g");
    private final List<String> deadLettered = new ArrayList<>();
    private final List<String> ranAlone = new ArrayList<>();

    private BatchVerdicts verdicts(int maxAttempts, boolean deadLetterTopic) {
        return new BatchVerdicts(maxAttempts, MissingEventIdPolicy.FAIL, deadLetterTopic, metrics, "test");
    }

    private static Entry entry(TopicPartition tp, long offset, String id, Status status) {
        return entry(tp, offset, id, status, false);
    }

    private static Entry entry(TopicPartition tp, long offset, String id, Status status, boolean copy) {
        ConsumerRecord<byte[], byte[]> r = new ConsumerRecord<>(tp.topic(), tp.partition(), offset, null, new byte[0]);
        Entry e = new Entry(
                new TopicPartition(r.topic(), r.partition()),
                r,
                id == null ? null : Delivery.of(id, new byte[0]),
                id == null ? "no id" : null,
                copy);
        if (id != null) {
            Throwable cause = status == Status.FAILED_PERMANENT
                    ? new PermanentFailureException("poison")
                    : status == Status.APPLIED || status == Status.DUPLICATE ? null : new RetryableException("down");
            e.outcome = new Outcome(id, status, cause);
        }
        return e;
    }

    private Decision decide(
            BatchVerdicts v, boolean sendSucceeds, Map<String, Status> aloneOutcomes, Entry... entries) {
        Map<TopicPartition, List<Entry>> byPartition = new LinkedHashMap<>();
        for (Entry e : entries) {
            byPartition.computeIfAbsent(e.partition, k -> new ArrayList<>()).add(e);
        }
        return v.decide(
                byPartition,
                (e, reason) -> {
                    deadLettered.add(e.delivery == null ? "@" + e.offset() : e.delivery.eventId());
                    return sendSucceeds;
                },
                e -> {
                    ranAlone.add(e.delivery.eventId() + "@" + e.partition.partition());
                    return new Outcome(e.delivery.eventId(), aloneOutcomes.get(e.delivery.eventId()), null);
                });
    }

    @Test
    void acknowledgedRecordsCommitTheNextOffsetAndARetryableOneSeeksBackToItself() {
        Decision d = decide(
                verdicts(5, false),
                true,
                Map.of(),
                entry(A, 10, "a", Status.APPLIED),
                entry(A, 11, "b", Status.DUPLICATE),
                entry(A, 12, "c", Status.FAILED_RETRYABLE),
                entry(A, 13, "d", Status.APPLIED));
        assertThat(d.commit()).containsExactly(Map.entry(A, new OffsetAndMetadata(12)));
        assertThat(d.seekTo()).containsExactly(Map.entry(A, 12L));
        assertThat(d.failuresAtSeek()).containsExactly(Map.entry(A, 1));
        assertThat(d.fatal()).isNull();
    }

    @Test
    void failuresOfTheHeadRecordAccumulateAcrossBatchesAndRunOutIntoTheDeadLetters() {
        BatchVerdicts v = verdicts(3, true);
        for (int attempt = 1; attempt <= 2; attempt++) {
            assertThat(v.attempt(A, 7)).isEqualTo(attempt);
            Decision d = decide(v, true, Map.of(), entry(A, 7, "x", Status.FAILED_RETRYABLE));
            assertThat(d.failuresAtSeek()).containsEntry(A, attempt);
        }
        Decision last =
                decide(v, true, Map.of(), entry(A, 7, "x", Status.FAILED_RETRYABLE), entry(A, 8, "y", Status.APPLIED));
        assertThat(deadLettered).containsExactly("x");
        assertThat(last.commit()).containsEntry(A, new OffsetAndMetadata(9));
        assertThat(last.seekTo()).isEmpty();
        assertThat(v.attempt(A, 7)).as("forgotten once dead-lettered").isEqualTo(1);
    }

    @Test
    void withoutADeadLetterTopicARecordOutOfAttemptsIsRetriedNeverFatal() {
        BatchVerdicts v = verdicts(1, false);
        for (int i = 0; i < 3; i++) {
            Decision d = decide(v, true, Map.of(), entry(A, 0, "x", Status.FAILED_RETRYABLE));
            assertThat(d.fatal()).isNull();
            assertThat(d.seekTo()).containsEntry(A, 0L);
            assertThat(d.failuresAtSeek())
                    .as("the backoff grows with the failures")
                    .containsEntry(A, i + 1);
        }
    }

    @Test
    void aFailedDeadLetterSendIsRetriedNotCommittedPast() {
        Decision d = decide(
                verdicts(5, true),
                false,
                Map.of(),
                entry(A, 0, "p", Status.FAILED_PERMANENT),
                entry(A, 1, "q", Status.APPLIED));
        assertThat(deadLettered).containsExactly("p");
        assertThat(d.commit()).isEmpty();
        assertThat(d.seekTo()).containsEntry(A, 0L);
    }

    @Test
    void permanentFailureWithoutDeadLetterTopicStopsAndCommitsOnlyWhatCameBefore() {
        Decision d = decide(
                verdicts(5, false),
                true,
                Map.of(),
                entry(A, 0, "ok", Status.APPLIED),
                entry(A, 1, "p", Status.FAILED_PERMANENT),
                entry(A, 2, "later", Status.APPLIED));
        assertThat(d.commit()).containsExactly(Map.entry(A, new OffsetAndMetadata(1)));
        assertThat(d.fatal()).hasMessageContaining("t-0@1").hasMessageContaining("no deadLetterTopic");
    }

    @Test
    void inProgressNeverSpendsAttempts() {
        BatchVerdicts v = verdicts(2, true);
        for (int i = 0; i < 5; i++) {
            decide(v, true, Map.of(), entry(A, 3, "busy", Status.IN_PROGRESS));
        }
        assertThat(deadLettered).isEmpty();
        assertThat(v.attempt(A, 3)).isEqualTo(2);
    }

    @Test
    void missingIdUnderFailStopsThePartition() {
        Decision d =
                decide(verdicts(5, true), true, Map.of(), entry(A, 0, "ok", Status.APPLIED), entry(A, 1, null, null));
        assertThat(d.fatal()).hasMessageContaining("no usable event id");
        assertThat(d.commit()).containsEntry(A, new OffsetAndMetadata(1));
    }

    @Test
    void aCopyIsHeldBackWhileItsEventWaitsBehindAFailureOnAnotherPartition() {
        BatchVerdicts v = verdicts(2, true);
        // A: a-1 failed, so x behind it was held back; B holds the same event x at its head. Applying x
        // from B now would put its effect ahead of a-1's on A: B's copy waits too, spending no attempt.
        Decision d = decide(
                v,
                true,
                Map.of("x", Status.APPLIED),
                entry(A, 0, "a-1", Status.FAILED_RETRYABLE),
                held(A, 1, "x", false),
                held(B, 0, "x", true),
                entry(B, 1, "b-2", Status.APPLIED));
        assertThat(ranAlone)
                .as("B's copy is not tried while A has not settled what precedes x")
                .isEmpty();
        assertThat(d.commit()).isEmpty();
        assertThat(d.seekTo()).containsEntry(A, 0L).containsEntry(B, 0L);
        assertThat(v.attempt(B, 0)).as("no attempt of B spent").isEqualTo(2);
        assertThat(deadLettered).isEmpty();
    }

    @Test
    void aCopyWhoseFirstCopyFailedItselfGetsATryOfItsOwn() {
        BatchVerdicts v = verdicts(5, true);
        // x failed on A where everything before it is settled: its copy on B is the same event's next try.
        Decision d = decide(
                v,
                true,
                Map.of("x", Status.APPLIED),
                entry(A, 0, "x", Status.FAILED_RETRYABLE),
                entry(B, 0, "x", Status.FAILED_RETRYABLE, true));
        assertThat(ranAlone).containsExactly("x@1");
        assertThat(d.commit()).containsEntry(B, new OffsetAndMetadata(1));
    }

    @Test
    void aWaitBehindAFailureReachesThroughAnotherHeldBackCopy() {
        BatchVerdicts v = verdicts(5, true);
        // A: f failed, y behind it. B: y first, then x. C: x. y waits on A, so B stops at y, so x waits on B:
        // neither copy may go ahead, and the waits of B and C are remembered for the next batches.
        Decision d = decide(
                v,
                true,
                Map.of("x", Status.APPLIED, "y", Status.APPLIED),
                entry(A, 0, "f", Status.FAILED_RETRYABLE),
                held(A, 1, "y", false),
                held(B, 0, "y", true),
                held(B, 1, "x", false),
                held(C, 0, "x", true));
        assertThat(ranAlone).isEmpty();
        assertThat(d.seekTo()).containsEntry(A, 0L).containsEntry(B, 0L).containsEntry(C, 0L);
        assertThat(v.waiting()).containsKey("x").containsKey("y");
        assertThat(v.waiting().get("x"))
                .extracting(OrderGuard.Position::partition)
                .containsExactlyInAnyOrder(B, C);
    }

    @Test
    void copiesHeldBackOnlyByEachOtherBreakTheCircleWithATryAlone() {
        BatchVerdicts v = verdicts(5, true);
        // A: x, y; B: y, x. Each event waits for the other on one partition and nothing failed: one copy
        // goes ahead alone (applying it at the first position that lets it through), so the partitions move.
        Decision d = decide(
                v,
                true,
                Map.of("x", Status.APPLIED, "y", Status.APPLIED),
                held(A, 0, "x", false),
                held(A, 1, "y", false),
                held(B, 0, "y", true),
                held(B, 1, "x", true));
        assertThat(ranAlone).containsExactly("y@1", "x@1");
        assertThat(d.commit()).containsEntry(B, new OffsetAndMetadata(2));
        assertThat(d.seekTo()).as("A's copies come again, as duplicates").containsEntry(A, 0L);
        assertThat(v.waiting())
                .as("no partition waits on another for what only held it back")
                .isEmpty();
    }

    @Test
    void aCopyWaitsForAPartitionThatHasNotReachedItsEvent() {
        BatchVerdicts v = verdicts(5, true);
        // An earlier batch: f failed on A with x behind it.
        decide(v, true, Map.of(), entry(A, 0, "f", Status.FAILED_RETRYABLE), held(A, 1, "x", false));
        // This batch has no record of A: x first on C (held back by the guard), its copy on B.
        Decision d = decide(v, true, Map.of("x", Status.APPLIED), held(C, 0, "x", false), held(B, 0, "x", true));
        assertThat(ranAlone).isEmpty();
        assertThat(d.seekTo()).containsEntry(B, 0L).containsEntry(C, 0L);
        assertThat(v.waiting().get("x"))
                .as("only A's wait is remembered: B and C wait for it, not for each other")
                .extracting(OrderGuard.Position::partition)
                .containsExactly(A);
    }

    private static Entry held(TopicPartition tp, long offset, String id, boolean copy) {
        Entry e = entry(tp, offset, id, Status.FAILED_RETRYABLE, copy);
        e.outcome = new Outcome(id, Status.FAILED_RETRYABLE, new HeldBackException("held back"));
        return e;
    }
}
