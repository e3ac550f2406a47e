package dev.once.retention;

import dev.once.InvalidConfigurationException;
import dev.once.internal.JdbcTarget;
import dev.once.jdbc.JdbcBuilder;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import java.time.Duration;
import java.util.Objects;

/** The settings every pruner shares; each pruner's builder adds its retention rule. Not thread-safe. */
abstract class PrunerBuilder<B extends PrunerBuilder<B>> extends JdbcBuilder<B> {

    /** Rows deleted per transaction unless configured. */
    static final int DEFAULT_CHUNK_SIZE = 5_000;

    int chunkSize = DEFAULT_CHUNK_SIZE;
    MeterRegistry meterRegistry = Metrics.globalRegistry;
    /** How long rows are kept: each pruner's builder sets it by its own rule. */
    Duration retention;

    /** Rows deleted per transaction (1 to 1,000,000), default {@value #DEFAULT_CHUNK_SIZE}. */
    public B chunkSize(int chunkSize) {
        if (chunkSize < 1 || chunkSize > 1_000_000) {
            throw new InvalidConfigurationException("chunkSize must be between 1 and 1000000, but was " + chunkSize);
        }
        this.chunkSize = chunkSize;
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

    /** The resolved database settings. @throws InvalidConfigurationException if the data source is missing */
    JdbcTarget resolve() {
        return JdbcTarget.of(settings());
    }
}
