package dev.once.kafka.internal;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.TopicPartition;
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
 * Only the poll thread touches the consumer.
 *
 * <p>This class is the loop itself: poll, pause, resume, backoffs, seeks and rebalances. Its
 * parts: the records fetched for the next batch are {@link NextBatch}; the batch on the worker is
 * {@link InFlight}; the partitions paused for a retry's backoff are {@link Backoffs}; where an
 * assigned partition starts when offsets are kept in the database is {@link StartOffsets}; the offsets sent to Kafka
 * (async between batches, sync on a rebalance or close) are {@link OffsetCommits}; one batch on the
 * worker thread, records to deliveries to outcomes to dead letters, is {@link BatchRun}; what a
 * processed batch means for each partition is decided by {@link BatchVerdicts}. Not API.
 */
final class PollLoop implements Runnable {

    private static final Logger log = LoggerFactory.getLogger(PollLoop.class);

    /** How often the poll thread calls poll while a batch runs: keeps the membership and runs rebalance callbacks. */
    private static final Duration BUSY_POLL_INTERVAL = Duration.ofMillis(20);

    private final RunnerSettings settings;
    private final KafkaRunnerMetrics metrics;
    private final String name;
    private final ExecutorService worker;
    private final CountDownLatch stopped = new CountDownLatch(1);
    /** The worker's decisions, and the failures of each partition's head record (cleared on revoke). */
    private final BatchVerdicts verdicts;
    /** Runs a batch on the worker thread. */
    private final BatchRun batchRun;

    private volatile boolean running = true;
    private volatile Duration closeTimeout;
    private volatile Throwable failure;

    // Poll thread only.
    private KafkaConsumer<byte[], byte[]> consumer;
    private OffsetCommits commits;
    private InFlight inFlight;
    private final NextBatch next;

    private final Backoffs backoffs = new Backoffs();

    PollLoop(RunnerSettings settings, KafkaRunnerMetrics metrics, Producer<byte[], byte[]> deadLetters, String name) {
        this.settings = settings;
        this.metrics = metrics;
        this.name = name;
        this.closeTimeout = settings.closeTimeout();
        this.verdicts = new BatchVerdicts(
                settings.maxAttempts(), settings.missingEventIdPolicy(), deadLetters != null, metrics, name);
        this.batchRun = new BatchRun(settings, verdicts, deadLetters, name);
        this.next = new NextBatch(settings.maxBatchRecords());
        this.worker = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, name + "-work");
            t.setDaemon(true);
            return t;
        });
    }

    @Override
    public void run() {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(settings.consumerProperties())) {
            consumer = c;
            commits = new OffsetCommits(c, settings.afterDatabaseCommit(), metrics, name);
            consumer.subscribe(settings.topics(), new Listener());
            try {
                loop();
            } catch (Throwable t) {
                awaitWorker();
                throw t;
            }
        } catch (Throwable t) {
            failure = t;
            log.error("{}: poll loop stopped by an unexpected failure; uncommitted records will be replayed", name, t);
        } finally {
            worker.shutdownNow();
            stopped.countDown();
        }
    }

    private void loop() throws InterruptedException {
        while (running) {
            resumeDueBackoffs();
            if (inFlight == null) {
                if (next.isEmpty()) {
                    // With offsets to commit, do not wait for records: commit first.
                    take(consumer.poll(commits.pending() ? Duration.ZERO : settings.pollTimeout()));
                }
                if (!next.isEmpty()) {
                    startBatch(next.take());
                    resumeAllButBackoffs();
                }
                // The finished batch's commit overlaps the next batch's transaction.
                commits.commit(false);
            } else {
                // A poll returns at most max.poll.records: poll again while the fetched records fill the
                // next batch (up to maxBatchRecords), or in a backlog each batch was about one poll and
                // the runner ran a transaction per poll (issue 21: 0.9x the hand-written floor).
                while (take(consumer.poll(Duration.ZERO)) && inFlight != null && !inFlight.result.isDone()) {
                    // the next poll
                }
                // A revoke inside those polls may have finished the batch already.
                if (inFlight != null && inFlight.await(BUSY_POLL_INTERVAL)) {
                    finishBatch();
                }
            }
        }
        drainOnClose();
        next.clear();
        commits.commit(true);
    }

    /**
     * The loop died of an unexpected failure: waits (up to the close timeout) for the batch on the
     * worker, before the consumer leaves the group and the loop reports itself stopped. Otherwise a
     * close or a rebalance takes the partitions for free while the worker still applies the batch and
     * commits its claims (and, with offsets in the database, its offsets), overlapping their next
     * owner. Nothing of the batch is committed to Kafka: its records are replayed and absorbed.
     */
    private void awaitWorker() {
        InFlight f = inFlight;
        if (f == null || f.abandoned) {
            return;
        }
        try {
            if (!f.await(closeTimeout)) {
                log.warn(
                        "{}: stopping with a batch still running after {}; it may overlap the partitions' next owner",
                        name,
                        closeTimeout);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
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
     * offset order) and pauses everything once the batch is full, until it is started. True when it
     * took records and the batch has room for more.
     */
    private boolean take(ConsumerRecords<byte[], byte[]> records) {
        if (records.isEmpty()) {
            return false;
        }
        if (next.full()) {
            // Paused partitions return nothing; one assigned meanwhile may slip through: give it back.
            for (TopicPartition tp : records.partitions()) {
                consumer.seek(tp, records.records(tp).get(0).offset());
                consumer.pause(List.of(tp));
            }
            return false;
        }
        metrics.polled.increment(records.count());
        recordLag();
        next.add(records);
        if (next.full()) {
            consumer.pause(consumer.assignment());
            return false;
        }
        return true;
    }

    private void startBatch(Map<TopicPartition, List<ConsumerRecord<byte[], byte[]>>> batch) {
        List<ConsumerRecord<byte[], byte[]>> list = new ArrayList<>();
        Map<TopicPartition, Long> firstOffsets = new HashMap<>();
        batch.forEach((tp, rs) -> {
            firstOffsets.put(tp, rs.get(0).offset());
            list.addAll(rs);
        });
        inFlight = new InFlight(worker.submit(() -> batchRun.process(list)), firstOffsets);
    }

    /** Seeks {@code tp} to {@code offset}, dropping what was prefetched of it. */
    private void seek(TopicPartition tp, long offset) {
        consumer.seek(tp, offset);
        dropPrefetched(List.of(tp));
    }

    private void dropPrefetched(Collection<TopicPartition> partitions) {
        if (!next.isEmpty()) {
            boolean wasFull = next.full();
            next.drop(partitions);
            if (wasFull && !next.full()) {
                resumeAllButBackoffs();
            }
        }
    }

    private void resumeAllButBackoffs() {
        consumer.resume(backoffs.notBackingOff(consumer.assignment()));
    }

    private void finishBatch() {
        InFlight f = inFlight;
        inFlight = null;
        BatchRun.Result r;
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
            commits.databaseCommitted(r.commit());
            long now = System.nanoTime();
            r.seekTo().forEach((tp, offset) -> {
                if (owned.contains(tp)) {
                    seek(tp, offset);
                    // Paused, or the next poll fetches the record again at once (or whenever the fetch
                    // in flight returns) and the attempts are spent without the backoff.
                    consumer.pause(List.of(tp));
                    backoffs.pause(
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
        if (!next.full()) {
            resumeAllButBackoffs();
        }
    }

    private void resumeDueBackoffs() {
        List<TopicPartition> due = backoffs.due(System.nanoTime());
        if (due.isEmpty()) {
            return;
        }
        if (!next.full()) {
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
            if (inFlight == null || inFlight.await(BUSY_POLL_INTERVAL)) {
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
            if (next.full()) {
                consumer.pause(partitions); // at most one batch waits
            }
            if (settings.databaseOffsets() != null && !partitions.isEmpty()) {
                // Where the database is ahead (a crash in the ack gap), Kafka is brought level with the next commit.
                commits.databaseCommitted(StartOffsets.seek(consumer, settings.databaseOffsets(), partitions, name));
            }
        }

        /** Commits what the database committed, if this loop may still commit; drops the rest. */
        private void settle(Collection<TopicPartition> partitions, boolean mayCommit) {
            if (mayCommit) {
                commits.commit(true);
            } else {
                commits.dropPending(partitions);
            }
            InFlight f = inFlight;
            if (f != null && !f.abandoned && intersects(f.firstOffsets.keySet(), partitions)) {
                boolean done = false;
                if (mayCommit) {
                    try {
                        done = f.await(settings.revokeTimeout());
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                if (done) {
                    finishBatch();
                    commits.commit(true);
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
            backoffs.forget(partitions);
            // A later owner moves them on; a stale offset sent on its return would move them back.
            commits.forget(partitions);
            verdicts.forget(partitions);
            if (!next.isEmpty()) {
                dropPrefetched(partitions); // their next owner fetches them from the committed offset
                if (next.isEmpty()) {
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
}
