package dev.once.retention;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import javax.sql.DataSource;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

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
    public static final int DEFAULT_CHUNK_SIZE = 5_000;

    private static final Logger log = LoggerFactory.getLogger(OutboxPruner.class);

    private final DataSource dataSource;
    private final String pruneSql;
    private final Duration retention;
    private final int chunkSize;
    private final Clock clock;
    private final Counter deleted;

    private OutboxPruner(Builder b, Dialect dialect) {
        this.dataSource = b.dataSource;
        this.pruneSql = dialect.pruneOutbox(b.tablePrefix);
        this.retention = b.retention;
        this.chunkSize = b.chunkSize;
        this.clock = b.clock;
        this.deleted = Counter.builder("once.retention.deleted").description("sent outbox rows pruned")
                .tag("table", b.tablePrefix + "outbox").register(b.meterRegistry);
    }

    public static Builder builder() {
        return new Builder();
    }

    public Duration retention() {
        return retention;
    }

    /**
     * Deletes every row sent before now minus the retention.
     *
     * @return rows deleted
     * @throws OnceException if the database fails; chunks already committed stay deleted
     */
    public long prune() {
        Instant cutoff = clock.instant().minus(retention);
        long total = 0;
        try (Connection c = dataSource.getConnection()) {
            boolean autoCommit = c.getAutoCommit();
            c.setAutoCommit(true);
            try (PreparedStatement ps = c.prepareStatement(pruneSql)) {
                while (true) {
                    ps.setTimestamp(1, Timestamp.from(cutoff));   // 1 cutoff on sent_at
                    ps.setInt(2, chunkSize);                      // 2 chunk size
                    int n = ps.executeUpdate();
                    total += n;
                    deleted.increment(n);
                    if (n < chunkSize) {
                        break;
                    }
                }
            } finally {
                c.setAutoCommit(autoCommit);
            }
        } catch (SQLException e) {
            throw new OnceException("pruning outbox rows sent before " + cutoff + " failed after " + total
                    + " rows: " + e.getMessage(), e);
        }
        log.info("pruned {} outbox rows sent before {}", total, cutoff);
        return total;
    }

    /** Runs {@link #prune()} every {@code interval}; a failed run is logged and retried at the next. */
    public ScheduledFuture<?> schedule(ScheduledExecutorService executor, Duration interval) {
        Objects.requireNonNull(executor, "executor");
        if (interval == null || interval.isNegative() || interval.isZero()) {
            throw new InvalidConfigurationException("prune interval must be positive, but was " + interval);
        }
        return executor.scheduleWithFixedDelay(() -> {
            try {
                prune();
            } catch (RuntimeException e) {
                log.warn("scheduled outbox prune failed, will try again in {}", interval, e);
            }
        }, interval.toMillis(), interval.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** Builds an {@link OutboxPruner}; {@code dataSource} is required. Not thread-safe. */
    public static final class Builder {
        private DataSource dataSource;
        private Dialect dialect;
        private String tablePrefix = TablePrefix.DEFAULT;
        private Duration retention = DEFAULT_RETENTION;
        private int chunkSize = DEFAULT_CHUNK_SIZE;
        private Clock clock = Clock.systemUTC();
        private MeterRegistry meterRegistry = Metrics.globalRegistry;

        private Builder() {
        }

        public Builder dataSource(DataSource dataSource) {
            this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
            return this;
        }

        public Builder dialect(Dialect dialect) {
            this.dialect = Objects.requireNonNull(dialect, "dialect");
            return this;
        }

        public Builder tablePrefix(String tablePrefix) {
            this.tablePrefix = TablePrefix.validate(tablePrefix);
            return this;
        }

        /** How long a sent row is kept, at least one minute; default {@link #DEFAULT_RETENTION}. */
        public Builder retention(Duration retention) {
            if (retention == null || retention.compareTo(Duration.ofMinutes(1)) < 0) {
                throw new InvalidConfigurationException("retention must be at least 1 minute, but was " + retention);
            }
            this.retention = retention;
            return this;
        }

        public Builder chunkSize(int chunkSize) {
            if (chunkSize < 1 || chunkSize > 1_000_000) {
                throw new InvalidConfigurationException("chunkSize must be between 1 and 1000000, but was " + chunkSize);
            }
            this.chunkSize = chunkSize;
            return this;
        }

        public Builder clock(Clock clock) {
            this.clock = Objects.requireNonNull(clock, "clock");
            return this;
        }

        public Builder meterRegistry(MeterRegistry meterRegistry) {
            this.meterRegistry = Objects.requireNonNull(meterRegistry, "meterRegistry");
            return this;
        }

        /** @throws InvalidConfigurationException if the data source is missing or the dialect cannot be detected */
        public OutboxPruner build() {
            if (dataSource == null) {
                throw new InvalidConfigurationException("dataSource is required, but was not set");
            }
            Dialect d = dialect;
            if (d == null) {
                try (Connection c = dataSource.getConnection()) {
                    d = Dialects.detect(c);
                } catch (SQLException e) {
                    throw new InvalidConfigurationException("could not detect the SQL dialect (" + e.getMessage()
                            + "); set dialect(...) explicitly or check the DataSource");
                }
            }
            return new OutboxPruner(this, d);
        }
    }
}
