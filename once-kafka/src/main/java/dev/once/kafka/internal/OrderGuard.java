package dev.once.kafka.internal;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.RetryableException;
import dev.once.Tx;
import java.util.HashMap;
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
 * zombie after a rebalance) and is absorbed by the inbox, though not ordered. Not API. State is per
 * thread: each worker thread runs its own batch.
 */
public final class OrderGuard implements Handler {

    /** Where a record sits in its partition. */
    public record Position(TopicPartition partition, long offset) {}

    private final Handler handler;
    private final DatabaseOffsets offsets;
    private final ThreadLocal<Batch> current = new ThreadLocal<>();

    /** @param offsets where applied records' next offsets go in their transaction; null when not kept in the database */
    public OrderGuard(Handler handler, DatabaseOffsets offsets) {
        this.handler = handler;
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
