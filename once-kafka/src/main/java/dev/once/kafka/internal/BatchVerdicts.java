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
                TopicPartition partition,
                ConsumerRecord<byte[], byte[]> record,
                Delivery delivery,
                String missingReason,
                boolean copyOfOtherPartition) {
            this.partition = partition;
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
        // Only copies of an event on several partitions, or waits from an earlier batch, make one partition's
        // stop another's: without them each partition stops at its own failure, and the batch needs no Stops.
        boolean copies = !waiting.isEmpty()
                || byPartition.values().stream().flatMap(List::stream).anyMatch(e -> e.copyOfOtherPartition);
        Stops stops = copies ? new Stops(byPartition, waiting()) : null;
        for (Map.Entry<TopicPartition, List<Entry>> p : byPartition.entrySet()) {
            TopicPartition tp = p.getKey();
            long next = -1;
            Entry head = null;
            for (Entry e : p.getValue()) {
                if (e.copyOfOtherPartition && e.outcome != null && !e.outcome.shouldAcknowledge()) {
                    // Its first copy failed or was held back on another partition, and this partition is
                    // settled up to here.
                    String why = stops.blocker(e.delivery.eventId());
                    if (why != null) {
                        // Applied from here, the event would overtake a record that failed before it there.
                        e.outcome = new Outcome(
                                e.delivery.eventId(),
                                Outcome.Status.FAILED_RETRYABLE,
                                new HeldBackException("held back: " + why));
                    } else {
                        // Its first copy failed itself, or only waited for copies that wait in turn for it:
                        // it gets a try (and an outcome) of its own, so the partitions move.
                        e.outcome = alone.process(e);
                        if (!e.outcome.shouldAcknowledge() && !heldBack(e.outcome)) {
                            stops.failed(e);
                        }
                    }
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
            remember(
                    tp,
                    p.getValue(),
                    head,
                    head != null && (stops == null ? !heldBack(head.outcome) : stops.stopsAt(head)));
        }
        return new Decision(commit, seekTo, failuresAtSeek, fatal);
    }

    /**
     * What waits on {@code tp} after this batch: the ids from a head that failed, or that waits
     * behind a failure of this batch, on; nothing behind a head that is only held back.
     */
    private void remember(TopicPartition tp, List<Entry> entries, Entry head, boolean stopped) {
        if (head == null || !stopped) {
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

    /**
     * Where a batch's partitions stop for a reason of their own: a record that failed (or whose claim
     * another transaction holds, or that has no id under FAIL), and, carried through the event ids a
     * batch holds on several partitions, a record waiting for such a one: its event stands behind the
     * failure on another partition. A record held back only by copies that wait for it in turn (two
     * partitions holding the same events in opposite orders) is not stopped: one of them has to go first.
     */
    private final class Stops {
        private final Map<TopicPartition, List<Entry>> byPartition;
        /** Each event id's first offset on each partition of the batch. */
        private final Map<String, Map<TopicPartition, Long>> at = new HashMap<>();
        /** Event ids seen behind a failure in an earlier batch, with where. */
        private final Map<String, List<Position>> waitingBefore;
        /** The first stopped offset of each partition; every later record of it is stopped too. */
        private final Map<TopicPartition, Long> stop = new HashMap<>();

        Stops(Map<TopicPartition, List<Entry>> byPartition, Map<String, List<Position>> waitingBefore) {
            this.byPartition = byPartition;
            this.waitingBefore = waitingBefore;
            byPartition.forEach((tp, entries) -> {
                for (Entry e : entries) {
                    if (e.delivery != null) {
                        at.computeIfAbsent(e.delivery.eventId(), k -> new HashMap<>())
                                .merge(tp, e.offset(), Math::min);
                    }
                    if (stop.get(tp) == null && failedItself(e)) {
                        stop.put(tp, e.offset());
                    }
                }
            });
            spread();
        }

        /** A copy tried alone failed: its partition stops there. */
        void failed(Entry e) {
            stop.merge(e.partition, e.offset(), Math::min);
            spread();
        }

        boolean stopsAt(Entry head) {
            Long s = stop.get(head.partition);
            return s != null && s <= head.offset();
        }

        /** Why event {@code id} may not be applied from any partition now, or null. */
        String blocker(String id) {
            String why = stoppedBefore(id);
            if (why != null) {
                return why;
            }
            for (Position w : waitingBefore.getOrDefault(id, List.of())) {
                Long s = stop.get(w.partition());
                if (!reaches(w) || (s != null && s < w.offset())) {
                    return w.partition() + " has not reached it (offset " + w.offset()
                            + ", behind a record that failed)";
                }
            }
            return null;
        }

        private String stoppedBefore(String id) {
            for (Map.Entry<TopicPartition, Long> p :
                    at.getOrDefault(id, Map.of()).entrySet()) {
                Long s = stop.get(p.getKey());
                if (s != null && s < p.getValue()) {
                    return p.getKey() + " offset " + s + " failed, or waits for a record that failed, before it";
                }
            }
            return null;
        }

        private boolean reaches(Position w) {
            return byPartition.getOrDefault(w.partition(), List.of()).stream().anyMatch(e -> e.offset() == w.offset());
        }

        /** Stops each partition at its first unsettled record whose event stands behind a stop elsewhere. */
        private void spread() {
            boolean changed = true;
            while (changed) {
                changed = false;
                for (Map.Entry<TopicPartition, List<Entry>> p : byPartition.entrySet()) {
                    Long s = stop.get(p.getKey());
                    for (Entry e : p.getValue()) {
                        if (s != null && e.offset() >= s) {
                            break;
                        }
                        if (e.delivery != null
                                && e.outcome != null
                                && !e.outcome.shouldAcknowledge()
                                && stoppedBefore(e.delivery.eventId()) != null) {
                            stop.put(p.getKey(), e.offset());
                            changed = true;
                            break;
                        }
                    }
                }
            }
        }

        private boolean failedItself(Entry e) {
            if (e.delivery == null) {
                return missingEventIdPolicy == MissingEventIdPolicy.FAIL;
            }
            return e.outcome != null
                    && !e.outcome.shouldAcknowledge()
                    && !heldBack(e.outcome)
                    && !e.copyOfOtherPartition;
        }
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
