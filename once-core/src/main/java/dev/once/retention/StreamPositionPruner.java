package dev.once.retention;

import dev.once.OnceException;
import dev.once.internal.JdbcTarget;
import java.time.Duration;

/**
 * Deletes the positions of ordered streams ({@link dev.once.StreamPositions}: one row per consumer and SQS FIFO
 * message group ever applied) that have not moved for longer than the retention, in bounded chunks of one short
 * transaction each, as {@link InboxPruner} does for the inbox. A stream that moves while a chunk runs keeps its row
 * at its new position: the chunk passes the row or waits for the move's commit, and a move that finds its row
 * pruned stores it again. Immutable and thread-safe.
 *
 * <p>A pruned stream starts afresh: its next message is applied whatever its position, also one behind the position
 * the stream had reached. Keep rows at least as long as such a message can still arrive; the default does for SQS.
 */
public final class StreamPositionPruner extends RowPruner {

    /**
     * Default retention, 15 days. A message behind a stream's position was sent before the message the position
     * names, so before the stream last moved; SQS keeps a message at most 14 days (the longest
     * {@code MessageRetentionPeriod}), and a receive of it holds it at most one visibility timeout, at most 12 hours,
     * so 14 days and 12 hours after the last move no receive of it can still be at work. Half a day more for margin.
     * Not covered: a process stalled longer than that (paused, cut off from SQS) with the message in hand.
     */
    public static final Duration DEFAULT_RETENTION = Duration.ofDays(15);
    /** Rows deleted per transaction unless configured. */
    public static final int DEFAULT_CHUNK_SIZE = PrunerBuilder.DEFAULT_CHUNK_SIZE;

    private StreamPositionPruner(Builder b, JdbcTarget t) {
        super(
                t,
                b,
                "stream_position",
                t.dialect().pruneStreamPositions(t.tablePrefix()),
                null,
                "stream positions pruned");
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Deletes the positions of streams last moved before now minus the retention, chunk by chunk.
     *
     * @return rows deleted
     * @throws OnceException if the database fails; chunks already committed stay deleted
     */
    @Override
    public long prune() {
        return pruneBefore("stream positions last moved", CUTOFF_ONLY, null); // the cutoff on moved_at
    }

    /** Builds a {@link StreamPositionPruner}; {@code dataSource} is required. Not thread-safe. */
    public static final class Builder extends PrunerBuilder<Builder> {
        private Builder() {
            retention = DEFAULT_RETENTION;
        }

        @Override
        protected Builder self() {
            return this;
        }

        /**
         * How long a stream's position is kept after it last moved, at least one minute; default
         * {@link #DEFAULT_RETENTION}.
         */
        public Builder retention(Duration retention) {
            this.retention = atLeastOneMinute(
                    retention,
                    ": a stream pruned while a message behind its position can still arrive lets that message apply"
                            + " after its successors (with SQS, keep the queue's retention plus its visibility timeout)");
            return this;
        }

        /** @throws dev.once.InvalidConfigurationException if the data source is missing or the dialect cannot be detected */
        public StreamPositionPruner build() {
            return new StreamPositionPruner(this, resolve());
        }
    }
}
