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
 * The owned transaction's handle, the only code that switches a connection's auto-commit and calls
 * its {@code commit} and {@code rollback}, is the seam's public side ({@link TransactionProvider#owning},
 * {@link TransactionProvider#session}); {@code ArchitectureTest} holds every other class to these two.
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

    /** True when each joined transaction was begun for one call of the engine and holds nothing else. */
    boolean dedicated() {
        return provider.dedicated();
    }

    /** The provider's transactions apart from its own ({@link TransactionProvider#afterRollback}), or null. */
    Transactions afterRollback() {
        TransactionProvider apart = provider.afterRollback();
        return apart == null ? null : new Transactions(apart);
    }

    /** Runs {@code work} in one transaction from the provider: commits, or rolls back on any throwable. */
    public <T> T inTransaction(Work<T> work) throws SQLException {
        try (TransactionHandle handle = provider.begin()) {
            return run(handle, work);
        }
    }

    /**
     * Begins a transaction that outlives one call (a request applies its effect in it); it ends
     * with {@link Open#commitAfter} or {@link Open#rollback}, under the same rules as
     * {@link #inTransaction}.
     */
    public Open begin() throws SQLException {
        return new Open(provider.begin());
    }

    /**
     * Runs {@code work} in one transaction on a connection the component holds for a whole session
     * (a migration lock): the connection must be in auto-commit, which is restored after, and stays open.
     *
     * @throws SQLException if the connection is not in auto-commit (it would hold someone else's transaction)
     */
    public static <T> T inTransaction(Connection session, Work<T> work) throws SQLException {
        try (TransactionHandle handle = TransactionProvider.session(session).begin()) {
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

    /** A transaction begun by {@link #begin()}, ended by one of its methods, closed in every case. Not thread-safe. */
    public static final class Open implements AutoCloseable {
        private final TransactionHandle handle;
        private boolean ended;

        private Open(TransactionHandle handle) {
            this.handle = handle;
        }

        public Connection connection() {
            return handle.connection();
        }

        /** True once the transaction was committed or rolled back. */
        public boolean ended() {
            return ended;
        }

        /** Runs {@code last} and commits with it; any throwable, or a failed commit, rolls all of it back. */
        public <T> T commitAfter(Work<T> last) throws SQLException {
            ended = true;
            try {
                return run(handle, last);
            } finally {
                handle.close();
            }
        }

        /** Rolls the transaction back. */
        public void rollback() throws SQLException {
            ended = true;
            try {
                handle.rollback();
            } finally {
                handle.close();
            }
        }

        /** Rolls back unless the transaction has ended. */
        @Override
        public void close() throws SQLException {
            if (!ended) {
                rollback();
            }
        }
    }
}
