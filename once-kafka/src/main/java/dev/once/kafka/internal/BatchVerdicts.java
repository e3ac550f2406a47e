package dev.once.kafka.internal;

import dev.once.Delivery;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.PermanentFailureException;
import dev.once.adapter.Verdict;
import dev.once.kafka.MissingEventIdPolicy;
import dev.once.kafka.internal.OrderGuard.Position;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The decisions of the poll loop, apart from its threads: what a processed batch means for each
 * partition — the offset to commit, where to seek back and how many failures the record there
 * has, whether a record goes to the dead letters or stops the runner. Walks each partition in
 * offset order and stops at the first record that does not advance, so nothing is committed past
 * a record that was not settled.
 *
 * <p>It keeps the failures of the record at the head of each partition (that is what makes the
 * attempt count survive the seek back). The worker thread decides; the poll thread
 * {@linkplain #forget forgets} revoked partitions. Not API.
 */
final class BatchVerdicts {

    private static final Logger log = LoggerFactory.getLogger(BatchVerdicts.class);

    /** Sends a record to the dead-letter topic; false when the send failed (the record is tried again). */
    @FunctionalInterface
    interface DeadLetters {
        boolean send(Entry entry, String reason);
    }

    /** Runs one delivery in a transaction of its own, for a copy whose outcome was decided on another partition. */
    @FunctionalInterface
    interface Alone {
        Outcome process(Entry entry);
    }

    /** One record of a batch, and what became of it. */
    static final class Entry {
        final TopicPartition partition;
        final ConsumerRecord<byte[], byte[]> record;
        final Delivery delivery;
        final String missingReason;
        /**
         * The batch's first record of this event id is on another partition: the engine gave this
         * copy that record's outcome, which says nothing about this partition when it is a failure.
         */
        final boolean copyOfOtherPartition;

        Outcome outcome;

        Entry(
                ConsumerRecord<byte[], byte[]> record,
                Delivery delivery,
                String missingReason,
                boolean copyOfOtherPartition) {
            this.partition = new TopicPartition(record.topic(), record.partition());
            this.record = record;
            this.delivery = delivery;
            this.missingReason = missingReason;
            this.copyOfOtherPartition = copyOfOtherPartition;
        }

        long offset() {
            return record.offset();
        }

        String where() {
            return record.topic() + "-" + record.partition() + "@" + record.offset();
        }
    }

    /** What to do with a batch's partitions. */
    record Decision(
            Map<TopicPartition, OffsetAndMetadata> commit,
            Map<TopicPartition, Long> seekTo,
            Map<TopicPartition, Integer> failuresAtSeek,
            Throwable fatal) {}

    private enum Step {
        ADVANCE,
        RETRY,
        STOP
    }

    private final int maxAttempts;
    private final MissingEventIdPolicy missingEventIdPolicy;
    private final boolean deadLetterTopic;
    private final KafkaRunnerMetrics metrics;
    private final String name;
    /** Failures so far of the record at the head of a partition: {offset, failures}. */
    private final Map<TopicPartition, long[]> failures = new ConcurrentHashMap<>();
    /**
     * Per partition whose head failed (or waits for a claim held elsewhere), the event ids seen at
     * and after it, by offset: until the partition reaches them, their copies on other partitions
     * are held back too. Not kept behind a head that is itself only held back, so two partitions
     * never wait for each other.
     */
    private final Map<TopicPartition, Map<String, Long>> waiting = new ConcurrentHashMap<>();

    BatchVerdicts(
            int maxAttempts,
            MissingEventIdPolicy missingEventIdPolicy,
            boolean deadLetterTopic,
            KafkaRunnerMetrics metrics,
            String name) {
        this.maxAttempts = maxAttempts;
        this.missingEventIdPolicy = missingEventIdPolicy;
        this.deadLetterTopic = deadLetterTopic;
        this.metrics = metrics;
        this.name = name;
    }

    /** The attempt a delivery of this record is: 1, or one more than its failures at the head of its partition. */
    int attempt(TopicPartition tp, long offset) {
        long[] f = failures.get(tp);
        return f != null && f[0] == offset ? (int) f[1] + 1 : 1;
    }

    /** Drops what is known of partitions this loop no longer owns. */
    void forget(Collection<TopicPartition> partitions) {
        partitions.forEach(failures::remove);
        partitions.forEach(waiting::remove);
    }

    /** The event ids waiting behind a failed head of a partition, with where they wait. */
    Map<String, List<Position>> waiting() {
        Map<String, List<Position>> byId = new HashMap<>();
        waiting.forEach((tp, ids) -> ids.forEach(
                (id, offset) -> byId.computeIfAbsent(id, k -> new ArrayList<>()).add(new Position(tp, offset))));
        return byId;
    }

    /**
     * Decides each partition of a processed batch.
     *
     * @param byPartition entries of each partition in offset order, outcomes set (null for records without an id)
     * @param deadLetters where dead letters go; not called when there is no dead-letter topic
     * @param alone       runs a copy whose outcome came from another partition on its own
     */
    Decision decide(Map<TopicPartition, List<Entry>> byPartition, DeadLetters deadLetters, Alone alone) {
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        Map<TopicPartition, Long> seekTo = new HashMap<>();
        Map<TopicPartition, Integer> failuresAtSeek = new HashMap<>();
        Throwable fatal = null;
        for (Map.Entry<TopicPartition, List<Entry>> p : byPartition.entrySet()) {
            TopicPartition tp = p.getKey();
            long next = -1;
            Entry head = null;
            for (Entry e : p.getValue()) {
                if (e.copyOfOtherPartition && e.outcome != null && !e.outcome.shouldAcknowledge()) {
                    // Its first copy failed or was held back on another partition; this partition is
                    // healthy up to here, so the copy gets a try (and an outcome) of its own.
                    e.outcome = alone.process(e);
                }
                Step step = step(tp, e, deadLetters);
                if (step == Step.ADVANCE) {
                    next = e.offset() + 1;
                    continue;
                }
                head = e;
                if (step == Step.RETRY) {
                    seekTo.put(tp, e.offset());
                    long[] f = failures.get(tp);
                    failuresAtSeek.put(tp, f == null ? 1 : (int) f[1]);
                } else if (fatal == null) {
                    fatal = fatalFor(e);
                }
                break;
            }
            if (next >= 0) {
                commit.put(tp, new OffsetAndMetadata(next));
            }
            remember(tp, p.getValue(), head);
        }
        return new Decision(commit, seekTo, failuresAtSeek, fatal);
    }

    /** What waits on {@code tp} after this batch: the ids from a head that failed on, nothing else. */
    private void remember(TopicPartition tp, List<Entry> entries, Entry head) {
        if (head == null || heldBack(head.outcome)) {
            waiting.remove(tp);
            return;
        }
        Map<String, Long> ids = new HashMap<>();
        waiting.getOrDefault(tp, Map.of()).forEach((id, offset) -> {
            if (offset >= head.offset()) {
                ids.put(id, offset);
            }
        });
        for (Entry e : entries) {
            if (e.delivery != null && e.offset() >= head.offset()) {
                ids.merge(e.delivery.eventId(), e.offset(), Math::min);
            }
        }
        waiting.put(tp, ids);
    }

    private static boolean heldBack(Outcome o) {
        return o != null && o.failure() instanceof HeldBackException;
    }

    private Step step(TopicPartition tp, Entry e, DeadLetters deadLetters) {
        if (e.delivery == null) {
            metrics.missingId.increment();
            if (missingEventIdPolicy == MissingEventIdPolicy.SKIP_AND_LOG) {
                log.warn("{}: skipped {}: {} (missingEventId=SKIP_AND_LOG)", name, e.where(), e.missingReason);
                return Step.ADVANCE;
            }
            if (missingEventIdPolicy == MissingEventIdPolicy.FAIL) {
                return Step.STOP;
            }
            return deadLetter(tp, e, "missing event id: " + e.missingReason, deadLetters);
        }
        Outcome o = e.outcome;
        switch (Verdict.of(o)) {
            case ACKNOWLEDGE -> {
                (o.status() == Outcome.Status.APPLIED ? metrics.applied : metrics.duplicate).increment();
                failures.remove(tp);
                return Step.ADVANCE;
            }
            case DEAD_LETTER -> {
                metrics.failedPermanent.increment();
                return deadLetter(tp, e, "failed permanently: " + o.failure(), deadLetters);
            }
            default -> {
                metrics.failedRetryable.increment();
                if (o.status() == Outcome.Status.IN_PROGRESS || heldBack(o)) {
                    // Another delivery holds the claim and will apply it or roll back, or the record waits
                    // for one before it (on another partition holding its id, when it heads its own):
                    // not a failure of this record, so it never uses up attempts nor goes to the dead letters.
                    failures.putIfAbsent(tp, new long[] {e.offset(), 1});
                    return Step.RETRY;
                }
                int failed = countFailure(tp, e.offset());
                if (failed < maxAttempts) {
                    return Step.RETRY;
                }
                if (!deadLetterTopic) {
                    // Nowhere to move it, and it may well succeed later (a database restarting): retried
                    // at the capped backoff rather than stopping the runner.
                    if (failed == maxAttempts) {
                        log.error(
                                "{}: {} failed {} times (maxAttempts {}) and no deadLetterTopic is set; it is"
                                        + " retried at the longest backoff until it succeeds: {}",
                                name,
                                e.where(),
                                failed,
                                maxAttempts,
                                o.failure());
                    }
                    return Step.RETRY;
                }
                return deadLetter(
                        tp,
                        e,
                        "failed " + failed + " times (maxAttempts " + maxAttempts + "), last: " + o.failure(),
                        deadLetters);
            }
        }
    }

    private int countFailure(TopicPartition tp, long offset) {
        long[] f = failures.compute(
                tp,
                (k, old) -> old != null && old[0] == offset ? new long[] {offset, old[1] + 1} : new long[] {offset, 1});
        return (int) f[1];
    }

    private Step deadLetter(TopicPartition tp, Entry e, String reason, DeadLetters deadLetters) {
        if (!deadLetterTopic) {
            return Step.STOP;
        }
        if (!deadLetters.send(e, reason)) {
            failures.putIfAbsent(tp, new long[] {e.offset(), 1});
            return Step.RETRY;
        }
        metrics.deadLettered.increment();
        failures.remove(tp);
        return Step.ADVANCE;
    }

    private static Throwable fatalFor(Entry e) {
        if (e.delivery == null) {
            return new InvalidDeliveryException("record " + e.where() + " has no usable event id (" + e.missingReason
                    + ") and missingEventId is FAIL; fix the producer, or choose SKIP_AND_LOG or DEAD_LETTER");
        }
        return new PermanentFailureException(
                "record " + e.where() + " (event id '" + e.delivery.eventId()
                        + "') cannot be processed and no deadLetterTopic is set, so the partition cannot move past it: "
                        + e.outcome.failure(),
                e.outcome.failure());
    }
}
