package dev.once.tx;

/**
 * Told of the savepoints of one transaction, as Spring's {@code TransactionSynchronization} is:
 * implemented by what {@code once} keeps for a transaction (its completion callbacks,
 * {@link JoinedTransaction}; the rows a {@link dev.once.TransactionOutbox} buffers) so that a rollback
 * to a savepoint undoes in memory what it undid in the database.
 *
 * <p>Call {@link #savepoint} once the savepoint exists and before anything is added under it;
 * {@link #rollbackToSavepoint} for a rollback to it (before or after the database's, on the same
 * thread, before anything else is added); {@link #releaseSavepoint} when it is released (optional:
 * a savepoint never released is simply remembered until the transaction ends). Savepoints are matched
 * by identity. Used by the transaction's thread; not thread-safe.
 */
public interface SavepointListener {

    /** A savepoint was set: what is added from now on is undone by a rollback to it. */
    void savepoint(Object savepoint);

    /**
     * The transaction rolled back to {@code savepoint}: what was added since is undone; savepoints set
     * after it are gone, it stays.
     *
     * @throws IllegalStateException if {@code savepoint} was never announced with {@link #savepoint}
     */
    void rollbackToSavepoint(Object savepoint);

    /** The savepoint was released; what was added since stays with the enclosing transaction. */
    default void releaseSavepoint(Object savepoint) {}
}
