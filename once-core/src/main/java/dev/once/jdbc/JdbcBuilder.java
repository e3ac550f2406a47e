package dev.once.jdbc;

import dev.once.InvalidConfigurationException;
import java.time.Clock;
import java.util.Objects;
import javax.sql.DataSource;

/**
 * The settings every JDBC-backed builder shares (outbox relay and admin, leases, idempotency keys,
 * pruners): one place that validates them and detects the dialect. Its setters are part of each
 * builder's API; {@link #settings()} resolves them into an immutable {@link JdbcSettings}. Not
 * thread-safe.
 *
 * @param <B> the concrete builder, returned by every setter
 */
public abstract class JdbcBuilder<B extends JdbcBuilder<B>> {

    private DataSource dataSource;
    private Dialect dialect;
    private String tablePrefix = TablePrefix.DEFAULT;
    private Clock clock = Clock.systemUTC();

    protected JdbcBuilder() {}

    /** This builder, for the setters to return. */
    protected abstract B self();

    /** The database holding the tables (the business database). Required. */
    public B dataSource(DataSource dataSource) {
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
        return self();
    }

    /** The SQL dialect; detected at {@code build()} when not set. */
    public B dialect(Dialect dialect) {
        this.dialect = Objects.requireNonNull(dialect, "dialect");
        return self();
    }

    /** Table prefix, default {@value TablePrefix#DEFAULT}; the one given to {@code Schema.migrate}. */
    public B tablePrefix(String tablePrefix) {
        this.tablePrefix = TablePrefix.validate(tablePrefix);
        return self();
    }

    /** The clock that judges time (expiry, backoff, retention); tests inject one to move time. Default system UTC. */
    public B clock(Clock clock) {
        this.clock = Objects.requireNonNull(clock, "clock");
        return self();
    }

    /** True once {@link #dataSource} was set, for a builder that names everything missing at once. */
    protected boolean hasDataSource() {
        return dataSource != null;
    }

    /**
     * The resolved settings.
     *
     * @throws InvalidConfigurationException if the data source is missing or the dialect cannot be detected
     */
    protected JdbcSettings settings() {
        if (dataSource == null) {
            throw new InvalidConfigurationException("dataSource is required, but was not set");
        }
        return new JdbcSettings(
                dataSource, dialect != null ? dialect : Dialects.detect(dataSource), tablePrefix, clock);
    }
}
