package dev.once.retention;

import dev.once.OnceException;
import dev.once.internal.JdbcTarget;
import java.time.Duration;

/**
 * Deletes outbox rows sent longer ago than the retention, in bounded chunks of one short
 * transaction each, as {@link InboxPruner} does for the inbox. Pending and dead rows are never
 * deleted: only an operator decides about dead ones ({@link dev.once.outbox.OutboxAdmin}).
 * Sent rows are kept only for audit (the provider's recorded answer); relays configured with
 * {@code deleteSent(true)} leave none. Immutable and thread-safe.
 */
public final class OutboxPruner extends RowPruner {

    /** Default retention of sent rows: a week of audit trail. */
    public static final Duration DEFAULT_RETENTION = Duration.ofDays(7);
    /** Rows deleted per transaction unless configured. */
    public static final int DEFAULT_CHUNK_SIZE = PrunerBuilder.DEFAULT_CHUNK_SIZE;

    private OutboxPruner(Builder b, JdbcTarget t) {
        super(t, b, "outbox", t.dialect().pruneOutbox(t.tablePrefix()), null, "sent outbox rows pruned");
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Deletes outbox rows sent before now minus the retention, chunk by chunk.
     *
     * @return rows deleted
     * @throws OnceException if the database fails; chunks already committed stay deleted
     */
    @Override
    public long prune() {
        return pruneBefore("outbox rows sent", CUTOFF_ONLY, null); // the cutoff on sent_at
    }

    /** Builds an {@link OutboxPruner}; {@code dataSource} is required. Not thread-safe. */
    public static final class Builder extends PrunerBuilder<Builder> {
        private Builder() {
            retention = DEFAULT_RETENTION;
        }

        @Override
        protected Builder self() {
            return this;
        }

        /** How long a sent row is kept, at least one minute; default {@link #DEFAULT_RETENTION}. */
        public Builder retention(Duration retention) {
            this.retention = atLeastOneMinute(retention, "");
            return this;
        }

        /** @throws dev.once.InvalidConfigurationException if the data source is missing or the dialect cannot be detected */
        public OutboxPruner build() {
            return new OutboxPruner(this, resolve());
        }
    }
}
