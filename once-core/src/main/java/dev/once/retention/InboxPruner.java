package dev.once.retention;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.internal.JdbcTarget;
import io.micrometer.core.instrument.Gauge;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Deletes inbox rows older than the retention, in bounded chunks of one short transaction each,
 * so the dedupe table does not become the next incident. Immutable and thread-safe.
 *
 * <p>The retention must be at least the redelivery horizon: the longest time after which any
 * copy of an event can still arrive (SQS retention plus dead-letter time before redrive, Kafka
 * topic retention or the furthest offset reset). A row pruned earlier than that lets a late copy
 * apply twice, so a shorter retention is refused, never clamped.
 */
public final class InboxPruner extends RowPruner {

    /** Default redelivery horizon: Kafka's default topic retention, longer than SQS's default 4 days. */
    public static final Duration DEFAULT_REDELIVERY_HORIZON = Duration.ofDays(7);
    /** Rows deleted per transaction unless configured. */
    public static final int DEFAULT_CHUNK_SIZE = PrunerBuilder.DEFAULT_CHUNK_SIZE;

    private final String countSql;
    private final AtomicLong rows = new AtomicLong();

    private InboxPruner(Builder b, JdbcTarget t) {
        super(
                t,
                b,
                "inbox",
                t.dialect().pruneInbox(t.tablePrefix()),
                version -> t.dialect().pruneInboxWalking(t.tablePrefix(), version),
                "inbox rows pruned");
        this.countSql = t.dialect().countInboxRows(t.tablePrefix());
        Gauge.builder("once.inbox.rows", rows, AtomicLong::get)
                .description("inbox rows after the last prune")
                .tag("table", t.tablePrefix() + "inbox")
                .register(b.meterRegistry);
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Deletes every row processed before now minus the retention, chunk by chunk, then counts what
     * is left for the {@code once.inbox.rows} gauge.
     *
     * @return rows deleted
     * @throws OnceException if the database fails; chunks already committed stay deleted, which is safe
     */
    @Override
    public long prune() {
        return pruneBefore( // the cutoff on processed_at
                "inbox rows processed", CUTOFF_ONLY, c -> {
                    try (Statement s = c.createStatement();
                            ResultSet rs = s.executeQuery(countSql)) {
                        rs.next();
                        rows.set(rs.getLong(1));
                    }
                });
    }

    /** Builds an {@link InboxPruner}; {@code dataSource} and {@code retention} are required. Not thread-safe. */
    public static final class Builder extends PrunerBuilder<Builder> {
        private Duration redeliveryHorizon = DEFAULT_REDELIVERY_HORIZON;

        private Builder() {}

        @Override
        protected Builder self() {
            return this;
        }

        /** How long a processed event id is kept. Required; at least the redelivery horizon. */
        public Builder retention(Duration retention) {
            if (retention == null || retention.isNegative() || retention.isZero()) {
                throw new InvalidConfigurationException("retention must be positive, but was " + retention);
            }
            this.retention = retention;
            return this;
        }

        /** The longest time after which a copy of an event can still arrive; default {@link #DEFAULT_REDELIVERY_HORIZON}. */
        public Builder redeliveryHorizon(Duration redeliveryHorizon) {
            if (redeliveryHorizon == null || redeliveryHorizon.isNegative()) {
                throw new InvalidConfigurationException(
                        "redeliveryHorizon must be zero or positive, but was " + redeliveryHorizon);
            }
            this.redeliveryHorizon = redeliveryHorizon;
            return this;
        }

        /**
         * @throws InvalidConfigurationException if required settings are missing or the retention is
         *         shorter than the redelivery horizon
         */
        public InboxPruner build() {
            if (retention == null) {
                throw new InvalidConfigurationException("retention is required, but was not set");
            }
            if (retention.compareTo(redeliveryHorizon) < 0) {
                throw new InvalidConfigurationException("retention " + retention
                        + " is shorter than the redelivery horizon "
                        + redeliveryHorizon + ": a copy arriving after its row was pruned would apply twice; keep rows"
                        + " at least as long as any message can be redelivered or replayed");
            }
            return new InboxPruner(this, resolve());
        }
    }
}
