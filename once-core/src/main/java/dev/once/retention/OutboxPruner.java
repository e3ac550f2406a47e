package dev.once.retention;

import dev.once.OnceException;
import dev.once.jdbc.Dialect;

import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;

/**
 * Deletes outbox rows sent longer ago than the retention, in bounded chunks of one short
 * transaction each, as {@link InboxPruner} does for the inbox. Pending and dead rows are never
 * deleted: only an operator decides about dead ones ({@link dev.once.outbox.OutboxAdmin}).
 * Sent rows are kept only for audit (the provider's recorded answer); relays configured with
 * {@code deleteSent(true)} leave none. Immutable and thread-safe.
 */
public final class OutboxPruner {


    /** Default retention of sent rows: a week of audit trail. */
    public static final Duration DEFAULT_RETENTION = Duration.ofDays(7);
    /** Rows deleted per transaction unless configured. */
    public static final int DEFAULT_CHUNK_SIZE = PrunerBuilder.DEFAULT_CHUNK_SIZE;

    private final ChunkedPrune chunks;
    private final Duration retention;
    private final Clock clock;

    private OutboxPruner(Builder b, Dialect dialect) {
        this.chunks = new ChunkedPrune(b.dataSource, dialect.pruneOutbox(b.tablePrefix), b.chunkSize, b.meterRegistry,
                b.tablePrefix + "outbox", "sent outbox rows pruned");
        this.retention = b.retention;
        this.clock = b.clock;
    }

    public static Builder builder() {
        return new Builder();
    }

    public Duration retention() {
        return retention;
    }

    /**
     * Deletes outbox rows sent before now minus the retention, chunk by chunk.
     *
     * @return rows deleted
     * @throws OnceException if the database fails; chunks already committed stay deleted
     */
    public long prune() {
        Instant now = clock.instant();
        Instant cutoff = now.minus(retention);
        return chunks.run(ps -> {
            ps.setTimestamp(1, Timestamp.from(cutoff));   // 1 cutoff on sent_at
            return 2;                                     // 2 chunk size
        }, "outbox rows sent before " + cutoff, null);
    }

    /** Runs {@link #prune()} every {@code interval}; a failed run is logged and retried at the next. */
    public ScheduledFuture<?> schedule(ScheduledExecutorService executor, Duration interval) {
        return ChunkedPrune.schedule(executor, interval, this::prune, "outbox");
    }

    /** Builds an {@link OutboxPruner}; {@code dataSource} is required. Not thread-safe. */
    public static final class Builder extends PrunerBuilder<Builder> {
        private Duration retention = DEFAULT_RETENTION;

        private Builder() {
        }

        @Override
        Builder self() {
            return this;
        }

        /** How long a sent row is kept, at least one minute; default {@link #DEFAULT_RETENTION}. */
        public Builder retention(Duration retention) {
            this.retention = atLeastOneMinute(retention, "");
            return this;
        }

        /** @throws dev.once.InvalidConfigurationException if the data source is missing or the dialect cannot be detected */
        public OutboxPruner build() {
            return new OutboxPruner(this, resolveDialect());
        }
    }
}
