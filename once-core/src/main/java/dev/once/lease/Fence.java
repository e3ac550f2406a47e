package dev.once.lease;

import dev.once.InvalidConfigurationException;
import dev.once.StaleFencingTokenException;
import dev.once.internal.GuardedConnection;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.util.Objects;

/**
 * Fencing tokens enforced by the database, usable in any transaction (the engine's
 * {@link dev.once.Tx#fence} is the same check). {@link #check} records the token as the newest
 * accepted for a resource, or throws if a newer one was accepted before; the fence row stays
 * locked until the caller's transaction ends, so the check and the protected write commit or
 * roll back together and two writers with different tokens are serialized.
 *
 * <pre>{@code
 * connection.setAutoCommit(false);
 * Fence.check(connection, "ledger:42", lease.token());   // throws if a newer holder has written
 * update the ledger ...
 * connection.commit();
 * }</pre>
 *
 * <p>Stateless and thread-safe. The connection must not be in auto-commit mode, or the fence row
 * is released before the write it protects. A rollback to a savepoint taken before the check undoes
 * it like any statement: the token is no longer recorded and, on PostgreSQL (on MariaDB when the check
 * inserted the row), the fence row is free, so a newer holder's check passes and its writes may commit
 * before this transaction's. Check again after such a rollback, or last before the commit, in the
 * transaction's outer scope. Once does that where it commits the transaction: for {@link dev.once.Tx#fence}, and
 * for this check on a handler's {@code tx.connection()} or a {@link dev.once.keys.KeyTransaction}'s {@code
 * connection()}, which it checks again last before the commit (a stale one rolls the transaction back with
 * {@link StaleFencingTokenException}).
 */
public final class Fence {

    private Fence() {}

    /**
     * Checks {@code token} for {@code resource} on the default table prefix, detecting the dialect.
     *
     * @throws StaleFencingTokenException if a newer token was accepted: roll back and stop, this
     *         writer's lease was taken over; retrying with the same token fails again
     * @throws SQLException the driver's error
     */
    public static void check(Connection connection, String resource, long token) throws SQLException {
        check(connection, Dialects.detect(connection), TablePrefix.DEFAULT, resource, token, Clock.systemUTC());
    }

    /**
     * Checks {@code token} for {@code resource} with an explicit dialect, prefix and clock.
     *
     * @throws StaleFencingTokenException if a newer token was accepted
     * @throws InvalidConfigurationException if resource is blank or longer than 255 characters
     */
    public static void check(
            Connection connection, Dialect dialect, String prefix, String resource, long token, Clock clock)
            throws SQLException {
        Objects.requireNonNull(connection, "connection");
        Objects.requireNonNull(dialect, "dialect");
        Objects.requireNonNull(clock, "clock");
        TablePrefix.validate(prefix);
        if (resource == null || resource.isBlank() || resource.length() > 255) {
            throw new InvalidConfigurationException("fenced resource must be 1 to 255 non-blank characters, but was "
                    + (resource == null ? "null" : "'" + resource + "'"));
        }
        // On once's guarded connection (a handler's, a key transaction's) once commits the transaction: it checks
        // the fence again last before, as for Tx.fence. Recorded first, so that a refusal caught is found again.
        GuardedConnection guard = GuardedConnection.of(connection);
        if (guard != null) {
            guard.fenced(prefix, resource, token);
        }
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
