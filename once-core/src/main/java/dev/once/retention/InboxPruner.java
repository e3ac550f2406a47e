package dev.once.retention;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import javax.sql.DataSource;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
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
public final class InboxPruner {

    /** Default redelivery horizon: Kafka's default topic retention, longer than SQS's default 4 days. */
    public static final Duration DEFAULT_REDELIVERY_HORIZON = Duration.ofDays(7);
    /** Rows deleted per transaction unless configured. */
    public static final int DEFAULT_CHUNK_SIZE = 5_000;

    private static final Logger log = LoggerFactory.getLogger(InboxPruner.class);

    private final DataSource dataSource;
    private final String pruneSql;
    private final String countSql;
    private final AtomicLong rows = new AtomicLong();
    private final Duration retention;
    private final int chunkSize;
    private final Clock clock;
    private final Counter deleted;

    private InboxPruner(Builder b, Dialect dialect) {
        this.dataSource = b.dataSource;
        this.pruneSql = dialect.pruneInbox(b.tablePrefix);
        this.countSql = dialect.countInboxRows(b.tablePrefix);
        this.retention = b.retention;
        this.chunkSize = b.chunkSize;
        this.clock = b.clock;
        this.deleted = Counter.builder("once.retention.deleted").description("inbox rows pruned")
                .tag("table", b.tablePrefix + "inbox").register(b.meterRegistry);
        Gauge.builder("once.inbox.rows", rows, AtomicLong::get).description("inbox rows after the last prune")
                .tag("table", b.tablePrefix + "inbox").register(b.meterRegistry);
    }

    public static Builder builder() {
        return new Builder();
    }

    public Duration retention() {
        return retention;
    }

    /**
     * Deletes every row processed before now minus the retention, chunk by chunk.
     *
     * @return rows deleted
     * @throws OnceException if the database fails; chunks already committed stay deleted, which is safe
     */
    public long prune() {
        Instant cutoff = clock.instant().minus(retention);
        long total = 0;
        try (Connection c = dataSource.getConnection()) {
            boolean autoCommit = c.getAutoCommit();
            c.setAutoCommit(true);
            try (PreparedStatement ps = c.prepareStatement(pruneSql)) {
                while (true) {
                    ps.setTimestamp(1, Timestamp.from(cutoff));   // 1 cutoff
                    ps.setInt(2, chunkSize);                      // 2 chunk size
                    int n = ps.executeUpdate();
                    total += n;
                    deleted.increment(n);
                    if (n < chunkSize) {
                        break;
                    }
                }
                try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(countSql)) {
                    rs.next();
                    rows.set(rs.getLong(1));
                }
            } finally {
                c.setAutoCommit(autoCommit);
            }
        } catch (SQLException e) {
            throw new OnceException("pruning the inbox before " + cutoff + " failed after " + total
                    + " rows: " + e.getMessage(), e);
        }
        log.info("pruned {} inbox rows processed before {}", total, cutoff);
        return total;
    }

    /**
     * Runs {@link #prune()} every {@code interval} on {@code executor}; a failed run is logged
     * and the next one tries again. Cancel the returned future to stop.
     */
    public ScheduledFuture<?> schedule(ScheduledExecutorService executor, Duration interval) {
        Objects.requireNonNull(executor, "executor");
        if (interval == null || interval.isNegative() || interval.isZero()) {
            throw new InvalidConfigurationException("prune interval must be positive, but was " + interval);
        }
        return executor.scheduleWithFixedDelay(() -> {
            try {
                prune();
            } catch (RuntimeException e) {
                log.warn("scheduled inbox prune failed, will try again in {}", interval, e);
            }
        }, interval.toMillis(), interval.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** Builds an {@link InboxPruner}; {@code dataSource} and {@code retention} are required. Not thread-safe. */
    public static final class Builder {
        private DataSource dataSource;
        private Dialect dialect;
        private String tablePrefix = TablePrefix.DEFAULT;
        private Duration retention;
        private Duration redeliveryHorizon = DEFAULT_REDELIVERY_HORIZON;
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
                throw new InvalidConfigurationException("redeliveryHorizon must be zero or positive, but was "
                        + redeliveryHorizon);
            }
            this.redeliveryHorizon = redeliveryHorizon;
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

        /**
         * @throws InvalidConfigurationException if required settings are missing or the retention is
         *         shorter than the redelivery horizon
         */
        public InboxPruner build() {
            if (dataSource == null || retention == null) {
                throw new InvalidConfigurationException("dataSource and retention are required, but "
                        + (dataSource == null ? "dataSource " : "") + (retention == null ? "retention " : "")
                        + "was not set");
            }
            if (retention.compareTo(redeliveryHorizon) < 0) {
                throw new InvalidConfigurationException("retention " + retention + " is shorter than the redelivery horizon "
                        + redeliveryHorizon + ": a copy arriving after its row was pruned would apply twice; keep rows"
                        + " at least as long as any message can be redelivered or replayed");
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
            return new InboxPruner(this, d);
        }
    }
}
