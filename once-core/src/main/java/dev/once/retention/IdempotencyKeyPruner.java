package dev.once.retention;

import dev.once.OnceException;
import dev.once.internal.JdbcTarget;
import java.sql.Timestamp;
import java.time.Duration;

/**
 * Deletes idempotency keys created longer ago than the retention, in bounded chunks of one short
 * transaction each, as {@link InboxPruner} does for the inbox. A key whose claim is still held
 * (processing, not yet expired) is spared whatever its age. Immutable and thread-safe.
 *
 * <p>After a key is pruned, a request that reuses it starts afresh: keep keys at least as long as
 * clients retry (Stripe keeps them 24 hours).
 */
public final class IdempotencyKeyPruner extends RowPruner {

    /** Default retention: Stripe's 24 hours. */
    public static final Duration DEFAULT_RETENTION = Duration.ofHours(24);
    /** Rows deleted per transaction unless configured. */
    public static final int DEFAULT_CHUNK_SIZE = PrunerBuilder.DEFAULT_CHUNK_SIZE;

    private IdempotencyKeyPruner(Builder b, JdbcTarget t) {
        super(t, b, "idempotency_key", t.dialect().pruneKeys(t.tablePrefix()), null, "idempotency keys pruned");
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Deletes idempotency keys created before now minus the retention, chunk by chunk.
     *
     * @return rows deleted
     * @throws OnceException if the database fails; chunks already committed stay deleted
     */
    @Override
    public long prune() {
        return pruneBefore( // the cutoff on created_at
                "idempotency keys created",
                (ps, now) -> {
                    ps.setTimestamp(2, Timestamp.from(now)); // 2 now: claims held until later are spared
                    return 3; // 3 chunk size
                },
                null);
    }

    /** Builds an {@link IdempotencyKeyPruner}; {@code dataSource} is required. Not thread-safe. */
    public static final class Builder extends PrunerBuilder<Builder> {
        private Builder() {
            retention = DEFAULT_RETENTION;
        }

        @Override
        protected Builder self() {
            return this;
        }

        /** How long a key is kept after it was created, at least one minute; default {@link #DEFAULT_RETENTION}. */
        public Builder retention(Duration retention) {
            this.retention = atLeastOneMinute(
                    retention, ": a key pruned while clients still retry lets the retry run the request again");
            return this;
        }

        /** @throws dev.once.InvalidConfigurationException if the data source is missing or the dialect cannot be detected */
        public IdempotencyKeyPruner build() {
            return new IdempotencyKeyPruner(this, resolve());
        }
    }
}
