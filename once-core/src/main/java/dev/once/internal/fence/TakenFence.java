package dev.once.internal.fence;

import dev.once.InvalidConfigurationException;
import dev.once.StaleFencingTokenException;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.TablePrefix;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.util.Objects;

/**
 * One fence, validated: what {@link dev.once.lease.Fence#check} runs, and what the engine and a transaction's
 * integration ({@link TransactionFences}) keep to check it again before the commit. Immutable. Not API: the
 * package is exported to once-spring only.
 */
public record TakenFence(Dialect dialect, String prefix, String resource, long token, Clock clock) {

    /**
     * @throws InvalidConfigurationException if resource is blank or longer than 255 characters, or
     *     prefix is not a valid table prefix
     */
    public TakenFence {
        Objects.requireNonNull(dialect, "dialect");
        Objects.requireNonNull(clock, "clock");
        TablePrefix.validate(prefix);
        if (resource == null || resource.isBlank() || resource.length() > 255) {
            throw new InvalidConfigurationException("fenced resource must be 1 to 255 non-blank characters,"
                    + " but was " + (resource == null ? "null" : "'" + resource + "'"));
        }
    }

    /**
     * Runs the check on {@code connection}, telling no integration (application code calls {@link
     * dev.once.lease.Fence#check}, which does).
     *
     * @throws StaleFencingTokenException if a newer token was accepted
     * @throws SQLException the driver's error
     */
    public void checkOn(Connection connection) throws SQLException {
        try (PreparedStatement ps = connection.prepareStatement(dialect.fence(prefix))) {
            ps.setString(1, resource); // 1 resource
            ps.setLong(2, token); // 2 token
            ps.setTimestamp(3, Timestamp.from(clock.instant())); // 3 updated_at
            ps.executeUpdate();
        }
        // A locking read: under REPEATABLE READ (InnoDB's default) a plain SELECT would answer from
        // the transaction's snapshot, taken at its first read, and miss a newer token accepted since.
        try (PreparedStatement ps = connection.prepareStatement(dialect.newestFence(prefix))) {
            ps.setString(1, resource); // 1 resource
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                long newest = rs.getLong(1);
                if (newest > token) {
                    throw new StaleFencingTokenException(resource, token, newest);
                }
            }
        }
    }
}
