package dev.once.lease;

import dev.once.InvalidConfigurationException;
import dev.once.StaleFencingTokenException;
import dev.once.internal.GuardedConnection;
import dev.once.internal.fence.TakenFence;
import dev.once.internal.fence.TransactionFences;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.ServiceLoader;

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
 * before this transaction's; and a caller may catch the refusal and write on. The check is therefore
 * repeated last before the commit, in the transaction's outer scope, where something manages the
 * transaction: once, where it commits it, for {@link dev.once.Tx#fence} and for this check on a handler's
 * {@code tx.connection()} or a {@link dev.once.keys.KeyTransaction}'s {@code connection()}; once-spring for
 * this check on the connection of a Spring-managed transaction (checked in the transaction's {@code
 * beforeCommit}). A stale one rolls the transaction back with {@link
 * StaleFencingTokenException}. In a JDBC transaction of your own nothing repeats it: check again after such a
 * rollback, or last before the commit, and let a refusal end the transaction.
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
        TakenFence fence = new TakenFence(dialect, prefix, resource, token, clock);
        // On once's guarded connection (a handler's, a key transaction's) once commits the transaction: it checks
        // the fence again last before, as for Tx.fence. Recorded first, so that a refusal caught is found again.
        // Elsewhere the integration managing the transaction does (once-spring's, at the physical commit).
        GuardedConnection guard = GuardedConnection.of(connection);
        if (guard != null) {
            guard.fenced(fence);
        } else {
            List<TransactionFences> integrations = Integrations.FOUND;
            for (int i = 0; i < integrations.size(); i++) {
                integrations.get(i).taken(connection, fence);
            }
        }
        fence.checkOn(connection);
    }

    /** The integrations on the class path, found once: none (an empty list, no call) outside Spring. */
    private static final class Integrations {
        static final List<TransactionFences> FOUND = find();

        private static List<TransactionFences> find() {
            List<TransactionFences> found = new ArrayList<>(1);
            ServiceLoader.load(TransactionFences.class, Fence.class.getClassLoader())
                    .forEach(found::add);
            return List.copyOf(found);
        }
    }
}
