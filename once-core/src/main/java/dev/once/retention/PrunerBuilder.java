package dev.once.retention;

import dev.once.InvalidConfigurationException;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;

import javax.sql.DataSource;
import java.time.Clock;
import java.time.Duration;
import java.util.Objects;

/** The settings every pruner shares; each pruner's builder adds its retention rule. Not thread-safe. */
abstract class PrunerBuilder<B extends PrunerBuilder<B>> {

    /** Rows deleted per transaction unless configured. */
    static final int DEFAULT_CHUNK_SIZE = 5_000;

    DataSource dataSource;
    Dialect dialect;
    String tablePrefix = TablePrefix.DEFAULT;
    int chunkSize = DEFAULT_CHUNK_SIZE;
    Clock clock = Clock.systemUTC();
    MeterRegistry meterRegistry = Metrics.globalRegistry;

    abstract B self();

    /** The database holding the tables. Required. */
    public B dataSource(DataSource dataSource) {
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
        return self();
    }

    /** The SQL dialect; detected at {@code build()} when not set. */
    public B dialect(Dialect dialect) {
        this.dialect = Objects.requireNonNull(dialect, "dialect");
        return self();
    }

    /** Table prefix, default {@value TablePrefix#DEFAULT}. */
    public B tablePrefix(String tablePrefix) {
        this.tablePrefix = TablePrefix.validate(tablePrefix);
        return self();
    }

    /** Rows deleted per transaction (1 to 1,000,000), default {@value #DEFAULT_CHUNK_SIZE}. */
    public B chunkSize(int chunkSize) {
        if (chunkSize < 1 || chunkSize > 1_000_000) {
            throw new InvalidConfigurationException("chunkSize must be between 1 and 1000000, but was " + chunkSize);
        }
        this.chunkSize = chunkSize;
        return self();
    }

    /** The clock the retention is measured against; tests inject one to move time. */
    public B clock(Clock clock) {
        this.clock = Objects.requireNonNull(clock, "clock");
        return self();
    }

    /** Where {@code once.retention.deleted} goes; default Micrometer's global registry. */
    public B meterRegistry(MeterRegistry meterRegistry) {
        this.meterRegistry = Objects.requireNonNull(meterRegistry, "meterRegistry");
        return self();
    }

    static Duration atLeastOneMinute(Duration retention, String why) {
        if (retention == null || retention.compareTo(Duration.ofMinutes(1)) < 0) {
            throw new InvalidConfigurationException("retention must be at least 1 minute, but was " + retention + why);
        }
        return retention;
    }

    /** The dialect, detected when not set. @throws InvalidConfigurationException if the data source is missing */
    Dialect resolveDialect() {
        if (dataSource == null) {
            throw new InvalidConfigurationException("dataSource is required, but was not set");
        }
        return dialect != null ? dialect : Dialects.detect(dataSource);
    }
}
