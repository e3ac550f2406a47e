package dev.once.internal;

import dev.once.tx.TransactionHandle;
import dev.once.tx.TransactionProvider;
import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one place in {@code once} that begins, commits and rolls back a transaction; every
 * component (engine, relay, keys, leases, schema, pruning) runs its transactional work through
 * {@link #inTransaction}. The rules it keeps, once for everybody:
 * <ul>
 *   <li>work that returns normally commits, unless it marked the transaction rollback-only;</li>
 *   <li>work that throws anything ({@code Error}s included) rolls back before the connection is
 *       released, so restoring auto-commit can never commit half of it;</li>
 *   <li>a failed commit is followed by a rollback and rethrown: the caller treats the outcome as
 *       unknown (retryable), never as applied.</li>
 * </ul>
 * Immutable and thread-safe. Not API.
 */
public final class Transactions {

    private static final Logger log = LoggerFactory.getLogger(Transactions.class);

    /** Work inside one transaction. */
    @FunctionalInterface
    public interface Work<T> {
        T run(Transaction tx) throws SQLException;
    }

    private final TransactionProvider provider;

    public Transactions(TransactionProvider provider) {
        this.provider = provider;
    }

    /** Transactions the engine owns on {@code dataSource}. */
    public static Transactions owning(DataSource dataSource) {
        return new Transactions(TransactionProvider.owning(dataSource));
    }

    /** True when the work joins the caller's transaction, which the caller commits. */
    public boolean joins() {
        return provider.joins();
    }

    /** Runs {@code work} in one transaction from the provider: commits, or rolls back on any throwable. */
    public <T> T inTransaction(Work<T> work) throws SQLException {
        try (TransactionHandle handle = provider.begin()) {
            return run(handle, work);
        }
    }

    /**
     * Runs {@code work} in one transaction on a connection the component holds for a whole session
     * (a migration lock, a listener): the connection must be in auto-commit, which is restored after.
     *
     * @throws SQLException if the connection is not in auto-commit (it would hold someone else's transaction)
     */
    public static <T> T inTransaction(Connection session, Work<T> work) throws SQLException {
        try (SessionHandle handle = new SessionHandle(session)) {
            return run(handle, work);
        }
    }

    private static <T> T run(TransactionHandle handle, Work<T> work) throws SQLException {
        Transaction tx = new Transaction(handle);
        T result;
        try {
            result = work.run(tx);
        } catch (Throwable e) {
            rollbackQuietly(handle);
            throw e;
        }
        if (tx.rollbackOnly()) {
            // The work already decided its result; a rollback that fails (a dead connection) ends the
            // transaction all the same, and the connection is not reused with auto-commit restored.
            rollbackQuietly(handle);
            return result;
        }
        try {
            handle.commit();
        } catch (SQLException e) {
            rollbackQuietly(handle);
            throw e;
        }
        return result;
    }

    private static void rollbackQuietly(TransactionHandle handle) {
        try {
            handle.rollback();
        } catch (SQLException | RuntimeException e) {
            log.debug("rollback failed", e);
        }
    }

    /** A transaction on a session connection that stays open after it. */
    private static final class SessionHandle implements TransactionHandle {
        private final Connection connection;
        private final java.util.List<CompletionCallback> callbacks = new java.util.ArrayList<>(1);
        private boolean ended;
        private boolean rollbackFailed;

        SessionHandle(Connection connection) throws SQLException {
            if (!connection.getAutoCommit()) {
                throw new SQLException(
                        "connection is not in auto-commit: it holds an open transaction that once did"
                                + " not begin and must not commit; hand once a connection in auto-commit mode",
                        "55000");
            }
            connection.setAutoCommit(false);
            this.connection = connection;
        }

        @Override
        public Connection connection() {
            return connection;
        }

        @Override
        public boolean joined() {
            return false;
        }

        @Override
        public void commit() throws SQLException {
            connection.commit();
            end(true);
        }

        @Override
        public void rollback() throws SQLException {
            try {
                connection.rollback();
            } catch (SQLException e) {
                rollbackFailed = true;
                throw e;
            } finally {
                end(false);
            }
        }

        private void end(boolean committed) {
            if (!ended) {
                ended = true;
                callbacks.forEach(cb -> cb.completed(committed));
            }
        }

        @Override
        public void afterCompletion(CompletionCallback callback) {
            callbacks.add(callback);
        }

        @Override
        public void close() throws SQLException {
            if (!ended) {
                rollback();
            }
            if (!rollbackFailed) {
                connection.setAutoCommit(true);
            }
        }
    }
}
