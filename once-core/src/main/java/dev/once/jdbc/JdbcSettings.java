package dev.once.jdbc;

import java.time.Clock;
import java.util.Objects;
import javax.sql.DataSource;

/**
 * Where a JDBC-backed component's tables live and which clock it judges time by, as resolved by
 * {@link JdbcBuilder} at {@code build()}: the data source, its dialect (given or detected), the
 * validated table prefix. Immutable.
 *
 * @param dataSource  the business database holding the {@code once} tables
 * @param dialect     the SQL dialect of that database
 * @param tablePrefix the validated table prefix ({@link TablePrefix})
 * @param clock       the clock that judges expiry, backoff and retention
 */
public record JdbcSettings(DataSource dataSource, Dialect dialect, String tablePrefix, Clock clock) {

    public JdbcSettings {
        Objects.requireNonNull(dataSource, "dataSource");
        Objects.requireNonNull(dialect, "dialect");
        TablePrefix.validate(tablePrefix);
        Objects.requireNonNull(clock, "clock");
    }
}
