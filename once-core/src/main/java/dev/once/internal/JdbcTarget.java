package dev.once.internal;

import dev.once.jdbc.Dialect;

import javax.sql.DataSource;
import java.time.Clock;

/** Where a component's tables live and which clock it judges time by, resolved at build(). Not API. */
public record JdbcTarget(DataSource dataSource, Dialect dialect, String tablePrefix, Clock clock) {
}
