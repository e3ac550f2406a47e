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
        Entry e = new Entry(r, id == null ? null : Delivery.of(id, new byte[0]), id == null ? "no id" : null, copy);
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
    void aCopyOnAHealthyPartitionDoesNotMirrorTheHeldBackOutcomeOfItsFirstCopyNorSpendItsAttempts() {
        BatchVerdicts v = verdicts(2, true);
        // A: a-1 failed, so the copy of x behind it was held back; B holds the same event x, healthy.
        // The engine gave B's copy the outcome of the batch's first x, which is A's held-back one.
        Decision d = decide(
                v,
                true,
                Map.of("x", Status.APPLIED),
                entry(A, 0, "a-1", Status.FAILED_RETRYABLE),
                entry(A, 1, "x", Status.FAILED_RETRYABLE),
                entry(B, 0, "x", Status.FAILED_RETRYABLE, true),
                entry(B, 1, "b-2", Status.APPLIED));
        assertThat(ranAlone).as("B's copy got a try of its own").containsExactly("x@1");
        assertThat(d.commit()).as("B moves on").containsEntry(B, new OffsetAndMetadata(2));
        assertThat(d.seekTo()).as("only A goes back").containsOnlyKeys(A);
        assertThat(v.attempt(B, 0)).as("no attempt of B spent").isEqualTo(1);
        assertThat(deadLettered).isEmpty();
    }
}
