package dev.once.kafka.internal;

import dev.once.BatchHandler;
import dev.once.BatchTx;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.RetryableException;
import dev.once.Tx;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.kafka.common.TopicPartition;

/**
 * Wraps the user's handler to keep effects in offset order per partition. When a batch fails,
 * {@code processBatch} rolls it back and retries it one record per transaction; without this
 * guard, record k+1 of a partition could then be applied while record k failed and waits for its
 * retry. The guard remembers the first failed offset of each partition in the current batch and
 * refuses later records of that partition with a {@link RetryableException} ("held back"), so the
 * runner seeks back to k and they come again after it. Records of other partitions are untouched.
 *
 * <p>A claim that waits for a concurrent delivery ({@code IN_PROGRESS}) never reaches the handler,
 * so it cannot hold back what follows it; that case needs two owners of one partition at once (a
 * zombie after a rebalance) and is absorbed by the inbox, though not ordered.
 *
 * <p>Around a {@link BatchHandler} the same rule holds per call: a failing call names no record, so
 * the engine halves the batch, and halves are run in list order (a partition's records in offset
 * order), so the failing record k stands alone, and is remembered, before any part holding a later
 * record of its partition runs; such a part is then refused whole, and halved, until its records of
 * other partitions go through and the held-back ones fail alone. Not API. State is per thread: each
 * worker thread runs its own batch.
 */
public final class OrderGuard implements Handler, BatchHandler {

    /** Where a record sits in its partition. */
    public record Position(TopicPartition partition, long offset) {}

    private final Handler handler;
    private final BatchHandler batchHandler;
    private final DatabaseOffsets offsets;
    private final ThreadLocal<Batch> current = new ThreadLocal<>();

    /** @param offsets where applied records' next offsets go in their transaction; null when not kept in the database */
    public OrderGuard(Handler handler, DatabaseOffsets offsets) {
        this.handler = handler;
        this.batchHandler = null;
        this.offsets = offsets;
    }

    /** Guards a batch handler; {@code offsets} as in {@link #OrderGuard(Handler, DatabaseOffsets)}. */
    public OrderGuard(BatchHandler batchHandler, DatabaseOffsets offsets) {
        this.handler = null;
        this.batchHandler = batchHandler;
        this.offsets = offsets;
    }

    /** Runs {@code body} (a {@code processBatch} call) with the positions of the batch's event ids. */
    public <T> T guard(Map<String, Position> positions, Supplier<T> body) {
        return guard(positions, Map.of(), body);
    }

    /**
     * As {@link #guard(Map, Supplier)}; {@code gaps} holds, per partition, the first offset of the
     * batch that is settled only after the transaction (a record without an id going to the dead
     * letters): no offset past it is written to the database.
     */
    public <T> T guard(Map<String, Position> positions, Map<TopicPartition, Long> gaps, Supplier<T> body) {
        current.set(new Batch(positions, gaps));
        try {
            return body.get();
        } finally {
            current.remove();
        }
    }

    @Override
    public void handle(Delivery delivery, Tx tx) throws Exception {
        Batch batch = current.get();
        Position p = batch == null ? null : batch.positions.get(delivery.eventId());
        if (p == null) {
            handler.handle(delivery, tx);
            return;
        }
        Long failed = batch.failedAt.get(p.partition());
        if (failed != null && p.offset() > failed) {
            throw new RetryableException("held back: " + p.partition() + " offset " + failed
                    + " failed first; records of a partition are applied in offset order");
        }
        try {
            handler.handle(delivery, tx);
        } catch (Exception e) {
            batch.failedAt.merge(p.partition(), p.offset(), Math::min);
            throw e;
        }
        applied(batch, p);
    }

    @Override
    public void handle(List<Delivery> claimed, BatchTx tx) throws Exception {
        Batch batch = current.get();
        if (batch == null) {
            batchHandler.handle(claimed, tx);
            return;
        }
        for (Delivery d : claimed) {
            Position p = batch.positions.get(d.eventId());
            Long failed = p == null ? null : batch.failedAt.get(p.partition());
            if (failed != null && p.offset() > failed) {
                throw new RetryableException("held back: " + p.partition() + " offset " + failed
                        + " failed first; records of a partition are applied in offset order");
            }
        }
        try {
            batchHandler.handle(claimed, tx);
        } catch (Exception e) {
            Position alone =
                    claimed.size() == 1 ? batch.positions.get(claimed.get(0).eventId()) : null;
            if (alone != null) {
                batch.failedAt.merge(alone.partition(), alone.offset(), Math::min);
            }
            throw e;
        }
        for (Delivery d : claimed) {
            Position p = batch.positions.get(d.eventId());
            if (p != null) {
                applied(batch, p);
            }
        }
    }

    /** Record {@code p} is applied in this thread's open transaction. */
    private void applied(Batch batch, Position p) {
        Long failed = batch.failedAt.get(p.partition());
        if (failed != null && failed == p.offset()) {
            batch.failedAt.remove(p.partition()); // the failed record went through on its second try
        }
        Long gap = batch.gaps.get(p.partition());
        if (offsets != null && (gap == null || p.offset() < gap)) {
            // Everything before it in its partition is applied or a duplicate: an earlier failure
            // holds this record back above, so its transaction would not commit.
            offsets.applied(p.partition(), p.offset() + 1);
        }
    }

    private static final class Batch {
        final Map<String, Position> positions;
        final Map<TopicPartition, Long> gaps;
        final Map<TopicPartition, Long> failedAt = new HashMap<>();

        Batch(Map<String, Position> positions, Map<TopicPartition, Long> gaps) {
            this.positions = positions;
            this.gaps = gaps;
        }
    }
}
