package dev.once.kafka.internal;

import dev.once.Delivery;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.kafka.MissingEventIdPolicy;
import dev.once.kafka.internal.BatchVerdicts.Entry;
import dev.once.kafka.internal.OrderGuard.Plan;
import dev.once.kafka.internal.OrderGuard.Position;
import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One poll loop: a {@code KafkaConsumer} owned by the poll thread, and a worker thread that runs
 * each batch through the idempotent consumer. While a batch runs, the poll thread keeps calling
 * {@code poll}, so the group membership survives a batch longer than {@code max.poll.interval.ms};
 * what those polls return is merged into the next batch until it holds
 * {@link RunnerSettings#maxBatchRecords()} records, then every partition is paused, so at most one
 * batch waits and a slow database gets larger transactions. When the batch ends, the poll thread
 * seeks back where a record must be tried again (dropping what was fetched after it), starts the
 * next batch, and commits the finished batch's offsets with {@code commitAsync} while the next one
 * runs: only offsets whose database commit is done are ever sent, so a failed or late async commit
 * only causes replays, which the inbox absorbs. A rebalance and a close commit with
 * {@code commitSync}, again including what was sent asynchronously, before the partitions go.
 * Only the poll thread touches the consumer. What a processed batch means for each partition is
 * decided by {@link BatchVerdicts}. Not API.
 */
final class PollLoop implements Runnable {

    private static final Logger log = LoggerFactory.getLogger(PollLoop.class);

    /** How often the poll thread calls poll while a batch runs: keeps the membership and runs rebalance callbacks. */
    private static final Duration BUSY_POLL_INTERVAL = Duration.ofMillis(20);

    private static final Duration DEAD_LETTER_SEND_TIMEOUT = Duration.ofSeconds(30);

    static final String DLT_REASON = "once-dlt-reason";
    static final String DLT_TOPIC = "once-dlt-topic";
    static final String DLT_PARTITION = "once-dlt-partition";
    static final String DLT_OFFSET = "once-dlt-offset";
    static final String DLT_CONSUMER = "once-dlt-consumer";

    private final RunnerSettings settings;
    private final KafkaRunnerMetrics metrics;
    private final Producer<byte[], byte[]> deadLetters;
    private final String name;
    private final ExecutorService worker;
    private final CountDownLatch stopped = new CountDownLatch(1);
    /** The worker's decisions, and the failures of each partition's head record (cleared on revoke). */
    private final BatchVerdicts verdicts;

    private volatile boolean running = true;
    private volatile Duration closeTimeout;
    private volatile Throwable failure;

    // Poll thread only.
    private KafkaConsumer<byte[], byte[]> consumer;
    private InFlight inFlight;
    /**
     * The next batch, fetched while the current one runs; every partition is paused once it holds
     * {@code maxBatchRecords}, so at most one batch waits. Its records of a partition that is
     * sought back or revoked are dropped.
     */
    private Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> prefetched;

    private int prefetchedCount;
    /** Offsets of the last finished batch, committed in the database and not yet sent to Kafka. */
    private Map<TopicPartition, OffsetAndMetadata> pendingCommit;
    /**
     * The newest offsets of each owned partition whose database commit is done, sent or not: what a
     * revoke or close commits synchronously, since an async commit still in flight may fail.
     */
    private final Map<TopicPartition, OffsetAndMetadata> databaseCommitted = new HashMap<>();

    private final Map<TopicPartition, Long> backoffUntil = new HashMap<>();

    PollLoop(RunnerSettings settings, KafkaRunnerMetrics metrics, Producer<byte[], byte[]> deadLetters, String name) {
        this.settings = settings;
        this.metrics = metrics;
        this.deadLetters = deadLetters;
        this.name = name;
        this.closeTimeout = settings.closeTimeout();
        this.verdicts = new BatchVerdicts(
                settings.maxAttempts(), settings.missingEventIdPolicy(), deadLetters != null, metrics, name);
        this.worker = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, name + "-work");
            t.setDaemon(true);
            return t;
        });
    }

    /** A batch handed to the worker. */
    private static final class InFlight {
        final Future<BatchResult> result;
        /** First offset of each partition in the batch: where to replay from if it is abandoned. */
        final Map<TopicPartition, Long> firstOffsets;

        boolean abandoned;

        InFlight(Future<BatchResult> result, Map<TopicPartition, Long> firstOffsets) {
            this.result = result;
            this.firstOffsets = firstOffsets;
        }
    }

    /** What the worker decided for each partition of a batch. */
    private record BatchResult(
            Map<TopicPartition, OffsetAndMetadata> commit,
            Map<TopicPartition, Long> seekTo,
            Map<TopicPartition, Integer> failuresAtSeek,
            Throwable fatal) {}

    @Override
    public void run() {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(settings.consumerProperties())) {
            consumer = c;
            consumer.subscribe(settings.topics(), new Listener());
            while (running) {
                resumeDueBackoffs();
                if (inFlight == null) {
                    if (prefetched == null) {
                        // With offsets to commit, do not wait for records: commit first.
                        take(consumer.poll(pendingCommit == null ? settings.pollTimeout() : Duration.ZERO));
                    }
                    if (prefetched != null) {
                        startBatch(prefetched);
                        clearPrefetched();
                        resumeAllButBackoffs();
                    }
                    // The finished batch's commit overlaps the next batch's transaction.
                    commitPending(false);
                } else {
                    take(consumer.poll(Duration.ZERO));
                    // A revoke inside that poll may have finished the batch already.
                    if (inFlight != null && await(inFlight, BUSY_POLL_INTERVAL)) {
                        finishBatch();
                    }
                }
            }
            drainOnClose();
            clearPrefetched();
            commitPending(true);
        } catch (Throwable t) {
            failure = t;
            log.error("{}: poll loop stopped by an unexpected failure; uncommitted records will be replayed", name, t);
        } finally {
            worker.shutdownNow();
            stopped.countDown();
        }
    }

    /** Stops the loop after its in-flight batch; returns at once. */
    void stop(Duration timeout) {
        closeTimeout = timeout;
        running = false;
    }

    /** Waits for the loop to end. */
    boolean awaitStopped(Duration timeout) throws InterruptedException {
        return stopped.await(timeout.toMillis(), TimeUnit.MILLISECONDS);
    }

    boolean isRunning() {
        return stopped.getCount() > 0 && running;
    }

    Throwable failure() {
        return failure;
    }

    // ---- poll thread -----------------------------------------------------------------------

    /**
     * Adds what a poll returned to the next batch (each partition's records continue its list in
     * offset order) and pauses everything once the batch is full, until it is started.
     */
    private void take(ConsumerRecords<byte[], byte[]> records) {
        if (records.isEmpty()) {
            return;
        }
        if (full()) {
            // Paused partitions return nothing; one assigned meanwhile may slip through: give it back.
            for (TopicPartition tp : records.partitions()) {
                consumer.seek(tp, records.records(tp).get(0).offset());
                consumer.pause(List.of(tp));
            }
            return;
        }
        metrics.polled.increment(records.count());
        recordLag();
        if (prefetched == null) {
            prefetched = new LinkedHashMap<>();
        }
        for (TopicPartition tp : records.partitions()) {
            prefetched.computeIfAbsent(tp, k -> new ArrayList<>()).addAll(records.records(tp));
        }
        prefetchedCount += records.count();
        if (full()) {
            consumer.pause(consumer.assignment());
        }
    }

    /** Whether the next batch holds all it may: every partition is paused until it starts. */
    private boolean full() {
        return prefetched != null && prefetchedCount >= settings.maxBatchRecords();
    }

    private void startBatch(Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> batch) {
        List<ConsumerRecord<byte[], byte[]>> list = new ArrayList<>();
        Map<TopicPartition, Long> firstOffsets = new HashMap<>();
        batch.forEach((tp, rs) -> {
            firstOffsets.put(tp, rs.get(0).offset());
            list.addAll(rs);
        });
        inFlight = new InFlight(worker.submit(() -> process(list)), firstOffsets);
    }

    private void clearPrefetched() {
        prefetched = null;
        prefetchedCount = 0;
    }

    /** Seeks {@code tp} to {@code offset}, dropping what was prefetched of it. */
    private void seek(TopicPartition tp, long offset) {
        consumer.seek(tp, offset);
        dropPrefetched(List.of(tp));
    }

    private void dropPrefetched(Collection<TopicPartition> partitions) {
        if (prefetched != null) {
            boolean wasFull = full();
            for (TopicPartition tp : partitions) {
                List<ConsumerRecord<byte[], byte[]>> dropped = prefetched.remove(tp);
                prefetchedCount -= dropped == null ? 0 : dropped.size();
            }
            if (prefetched.isEmpty()) {
                clearPrefetched();
            }
            if (wasFull && !full()) {
                resumeAllButBackoffs();
            }
        }
    }

    private void resumeAllButBackoffs() {
        Set<TopicPartition> resume = new HashSet<>(consumer.assignment());
        resume.removeAll(backoffUntil.keySet());
        consumer.resume(resume);
    }

    private boolean await(InFlight f, Duration timeout) throws InterruptedException {
        try {
            f.result.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            return true;
        } catch (TimeoutException e) {
            return false;
        } catch (ExecutionException e) {
            return true;
        }
    }

    private void finishBatch() {
        InFlight f = inFlight;
        inFlight = null;
        BatchResult r;
        try {
            r = f.result.get();
        } catch (ExecutionException | InterruptedException e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            // processBatch reports failures as outcomes; an exception here is a bug or a broken
            // DataSource: nothing of the batch is committed to Kafka, so it is replayed when the
            // loop is restarted.
            throw new IllegalStateException(name + ": a batch failed outside the handler: " + e.getCause(), e);
        }
        Set<TopicPartition> owned = consumer.assignment();
        if (f.abandoned) {
            // Its partitions were revoked while it ran; whatever of it came back to this loop is
            // replayed from the batch start and absorbed as duplicates.
            f.firstOffsets.forEach((tp, offset) -> {
                if (owned.contains(tp)) {
                    seek(tp, offset);
                }
            });
        } else {
            if (!r.commit().isEmpty()) {
                pendingCommit = pendingCommit == null ? new HashMap<>() : pendingCommit;
                pendingCommit.putAll(r.commit());
                databaseCommitted.putAll(r.commit());
            }
            long now = System.nanoTime();
            r.seekTo().forEach((tp, offset) -> {
                if (owned.contains(tp)) {
                    seek(tp, offset);
                    // Paused, or the next poll fetches the record again at once (or whenever the fetch
                    // in flight returns) and the attempts are spent without the backoff.
                    consumer.pause(List.of(tp));
                    backoffUntil.put(
                            tp,
                            now + settings.backoff(r.failuresAtSeek().get(tp)).toNanos());
                }
            });
            if (r.fatal() != null) {
                failure = r.fatal();
                running = false;
                log.error("{}: stopping: {}", name, r.fatal().getMessage());
            }
        }
        if (!full()) {
            resumeAllButBackoffs();
        }
    }

    /**
     * Commits the offsets of the finished batches that this loop still owns, all of them committed
     * in the database first. Asynchronously between batches; {@code sync} (a rebalance, a close)
     * waits, and sends again every owned partition's newest database-committed offset, since an
     * async commit still in flight may yet fail.
     */
    private void commitPending(boolean sync) {
        Set<TopicPartition> owned = consumer.assignment();
        if (pendingCommit != null) {
            Map<TopicPartition, OffsetAndMetadata> offsets = pendingCommit;
            pendingCommit = null;
            offsets.keySet().retainAll(owned);
            settings.afterDatabaseCommit().accept(Map.copyOf(offsets));
            if (!sync && !offsets.isEmpty()) {
                long start = System.nanoTime();
                consumer.commitAsync(offsets, (committed, e) -> {
                    metrics.commitLatency.record(System.nanoTime() - start, TimeUnit.NANOSECONDS);
                    if (e != null) {
                        metrics.commitFailed.increment();
                        // The database has these records; the next commit carries newer offsets, and a
                        // new owner replays from the last one that landed, absorbed by the inbox.
                        log.debug("{}: async offset commit failed: {}", name, e.toString());
                    }
                });
            }
        }
        if (!sync) {
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>(databaseCommitted);
        offsets.keySet().retainAll(owned);
        if (offsets.isEmpty()) {
            return;
        }
        long start = System.nanoTime();
        try {
            consumer.commitSync(offsets);
        } catch (KafkaException e) {
            metrics.commitFailed.increment();
            // The database has these records; a new owner replays them and the inbox absorbs them.
            log.warn(
                    "{}: offset commit failed, {} partitions will be replayed from their last commit: {}",
                    name,
                    offsets.size(),
                    e.toString());
        } finally {
            metrics.commitLatency.record(System.nanoTime() - start, TimeUnit.NANOSECONDS);
        }
    }

    private void resumeDueBackoffs() {
        if (backoffUntil.isEmpty()) {
            return;
        }
        long now = System.nanoTime();
        List<TopicPartition> due = new ArrayList<>();
        backoffUntil.forEach((tp, until) -> {
            if (now - until >= 0) {
                due.add(tp);
            }
        });
        due.forEach(backoffUntil::remove);
        if (!full()) {
            due.retainAll(consumer.assignment());
            consumer.resume(due);
        }
    }

    private void recordLag() {
        for (TopicPartition tp : consumer.assignment()) {
            consumer.currentLag(tp).ifPresent(l -> metrics.lag(tp, l));
        }
    }

    private void drainOnClose() throws InterruptedException {
        if (inFlight == null) {
            return;
        }
        long deadline = System.nanoTime() + closeTimeout.toNanos();
        while (System.nanoTime() - deadline < 0) {
            take(consumer.poll(Duration.ZERO));
            if (inFlight == null || await(inFlight, BUSY_POLL_INTERVAL)) {
                break;
            }
        }
        if (inFlight == null) {
            return;
        }
        if (inFlight.result.isDone()) {
            finishBatch();
        } else {
            log.warn(
                    "{}: closing with a batch still running after {}; it is not committed and will be replayed",
                    name,
                    closeTimeout);
            inFlight = null;
        }
    }

    /** Runs on the poll thread, inside poll(). */
    private final class Listener implements ConsumerRebalanceListener {

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            settle(partitions, true);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            settle(partitions, false);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            if (full()) {
                consumer.pause(partitions); // at most one batch waits
            }
            if (settings.databaseOffsets() != null && !partitions.isEmpty()) {
                seekToDatabaseOffsets(partitions);
            }
        }

        /** Starts where the database is ahead of Kafka: what it committed is not replayed. */
        private void seekToDatabaseOffsets(Collection<TopicPartition> partitions) {
            Map<TopicPartition, Long> stored;
            try {
                stored = settings.databaseOffsets().read();
            } catch (SQLException e) {
                log.warn(
                        "{}: could not read the offsets kept in the database, starting from Kafka's (replays are"
                                + " absorbed): {}",
                        name,
                        e.toString());
                return;
            }
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(new HashSet<>(partitions));
            for (TopicPartition tp : partitions) {
                Long next = stored.get(tp);
                OffsetAndMetadata kafka = committed.get(tp);
                if (next != null && (kafka == null || next > kafka.offset())) {
                    consumer.seek(tp, next);
                }
            }
        }

        /** Commits what the database committed, if this loop may still commit; drops the rest. */
        private void settle(Collection<TopicPartition> partitions, boolean mayCommit) {
            if (mayCommit) {
                commitPending(true);
            } else if (pendingCommit != null) {
                pendingCommit.keySet().removeAll(partitions);
            }
            InFlight f = inFlight;
            if (f != null && !f.abandoned && intersects(f.firstOffsets.keySet(), partitions)) {
                boolean done = false;
                if (mayCommit) {
                    try {
                        done = await(f, settings.revokeTimeout());
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                if (done) {
                    finishBatch();
                    commitPending(true);
                } else {
                    f.abandoned = true;
                    log.warn(
                            "{}: partitions {} {} while a batch ran past {}; the batch is abandoned, its records are "
                                    + "replayed by their next owner and absorbed as duplicates",
                            name,
                            partitions,
                            mayCommit ? "revoked" : "lost",
                            settings.revokeTimeout());
                }
            }
            for (TopicPartition tp : partitions) {
                backoffUntil.remove(tp);
                // A later owner moves them on; a stale offset sent on its return would move them back.
                databaseCommitted.remove(tp);
            }
            verdicts.forget(partitions);
            if (prefetched != null) {
                dropPrefetched(partitions); // their next owner fetches them from the committed offset
                if (prefetched == null) {
                    resumeAllButBackoffs();
                }
            }
        }

        private boolean intersects(Set<TopicPartition> a, Collection<TopicPartition> b) {
            for (TopicPartition tp : b) {
                if (a.contains(tp)) {
                    return true;
                }
            }
            return false;
        }
    }

    // ---- worker thread ----------------------------------------------------------------------

    private BatchResult process(List<ConsumerRecord<byte[], byte[]>> records) {
        Map<TopicPartition, List<Entry>> byPartition = new LinkedHashMap<>();
        List<Entry> withId = new ArrayList<>(records.size());
        // Each id's first position on each partition, the first occurrence first; its list index.
        Map<String, List<Position>> positions = new HashMap<>();
        Map<String, Integer> order = new HashMap<>();
        Map<TopicPartition, NavigableMap<Long, String>> ids = new HashMap<>();
        // Under FAIL, a record without an id stops its partition: what follows it is not applied,
        // so no effect gets ahead of the record the runner stops at.
        Set<TopicPartition> stopped = new HashSet<>();
        boolean failOnMissing = settings.missingEventIdPolicy() == MissingEventIdPolicy.FAIL;
        // records dead-lettered after the transaction: no offset past them goes to the database
        Map<TopicPartition, Long> gaps = new HashMap<>();
        boolean deadLetterMissing = settings.missingEventIdPolicy() == MissingEventIdPolicy.DEAD_LETTER;
        for (ConsumerRecord<byte[], byte[]> r : records) {
            TopicPartition tp = new TopicPartition(r.topic(), r.partition());
            if (stopped.contains(tp)) {
                continue;
            }
            Entry e = entry(r, tp, positions);
            byPartition.computeIfAbsent(tp, k -> new ArrayList<>()).add(e);
            if (e.delivery == null && failOnMissing) {
                stopped.add(tp);
            } else if (e.delivery == null && deadLetterMissing) {
                gaps.putIfAbsent(tp, r.offset());
            } else if (e.delivery != null) {
                String id = e.delivery.eventId();
                order.putIfAbsent(id, withId.size());
                withId.add(e);
                ids.computeIfAbsent(tp, k -> new TreeMap<>()).put(r.offset(), id);
                List<Position> at = positions.computeIfAbsent(id, k -> new ArrayList<>());
                if (at.stream().noneMatch(p -> p.partition().equals(tp))) {
                    at.add(new Position(tp, r.offset()));
                }
            }
        }
        Map<String, List<Position>> waiting = verdicts.waiting();
        if (!withId.isEmpty()) {
            List<Delivery> deliveries = withId.stream().map(e -> e.delivery).toList();
            // Without a guard (a prebuilt consumer) records after a failed one may be applied ahead
            // of its retry; the seek back below still replays from it and absorbs them as duplicates.
            List<Outcome> outcomes = guarded(new Plan(positions, order, ids, waiting, gaps), deliveries);
            for (int i = 0; i < withId.size(); i++) {
                withId.get(i).outcome = outcomes.get(i);
            }
        }
        BatchVerdicts.Decision d = verdicts.decide(
                byPartition,
                this::deadLetter,
                e -> guarded(
                                new Plan(
                                        Map.of(e.delivery.eventId(), List.of(new Position(e.partition, e.offset()))),
                                        Map.of(),
                                        ids,
                                        waiting,
                                        gaps),
                                List.of(e.delivery))
                        .get(0));
        return new BatchResult(d.commit(), d.seekTo(), d.failuresAtSeek(), d.fatal());
    }

    private List<Outcome> guarded(Plan plan, List<Delivery> deliveries) {
        return settings.orderGuard() == null
                ? settings.idempotentConsumer().processBatch(deliveries)
                : settings.orderGuard()
                        .guard(plan, () -> settings.idempotentConsumer().processBatch(deliveries));
    }

    private Entry entry(ConsumerRecord<byte[], byte[]> r, TopicPartition tp, Map<String, List<Position>> positions) {
        String id;
        try {
            id = settings.eventIdExtractor().eventId(r);
        } catch (RuntimeException ex) {
            return new Entry(r, null, "the event id extractor failed: " + ex, false);
        }
        if (id == null) {
            return new Entry(r, null, "the record carries no event id", false);
        }
        int attempt = verdicts.attempt(tp, r.offset());
        List<Position> seen = positions.get(id);
        boolean copy = seen != null && !seen.get(0).partition().equals(tp);
        try {
            Delivery d = new Delivery(
                    id,
                    r.topic(),
                    r.value(),
                    headers(r),
                    attempt,
                    attempt > 1,
                    "kafka:" + r.topic() + "/" + r.partition() + "@" + r.offset());
            return new Entry(r, d, null, copy);
        } catch (InvalidDeliveryException ex) {
            return new Entry(r, null, ex.getMessage(), false);
        }
    }

    /** Sends a dead letter and waits for the broker's answer; false when it was not written. */
    private boolean deadLetter(Entry e, String reason) {
        ConsumerRecord<byte[], byte[]> r = e.record;
        RecordHeaders headers = new RecordHeaders(r.headers().toArray());
        headers.add(DLT_REASON, utf8(reason));
        headers.add(DLT_TOPIC, utf8(r.topic()));
        headers.add(DLT_PARTITION, utf8(Integer.toString(r.partition())));
        headers.add(DLT_OFFSET, utf8(Long.toString(r.offset())));
        headers.add(DLT_CONSUMER, utf8(settings.idempotentConsumer().consumer()));
        try {
            deadLetters
                    .send(new ProducerRecord<>(settings.deadLetterTopic(), null, r.key(), r.value(), headers))
                    .get(DEAD_LETTER_SEND_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return false;
        } catch (ExecutionException | TimeoutException | KafkaException ex) {
            log.warn(
                    "{}: could not dead-letter {} to {}; it is tried again: {}",
                    name,
                    e.where(),
                    settings.deadLetterTopic(),
                    ex.toString());
            return false;
        }
        log.warn("{}: dead-lettered {} to {}: {}", name, e.where(), settings.deadLetterTopic(), reason);
        return true;
    }

    private static Map<String, String> headers(ConsumerRecord<byte[], byte[]> r) {
        Map<String, String> m = new HashMap<>();
        for (Header h : r.headers()) {
            m.put(h.key(), h.value() == null ? "" : new String(h.value(), StandardCharsets.UTF_8));
        }
        return m;
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
