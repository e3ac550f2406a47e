package dev.once.tx;

import java.sql.Connection;
import java.util.Objects;

/**
 * The part of a joined {@link TransactionHandle} every integration shares: the caller's connection,
 * a {@link #commit()} that commits nothing (the transaction's owner commits), and a
 * {@link #rollback()} that only marks the owner's transaction rollback-only. An integration (Spring,
 * JTA, Quarkus, Micronaut) extends it and says how its transaction is marked rollback-only, how
 * completion callbacks are registered with it, and what {@link #close()} releases.
 *
 * <p>Used by one thread, like every handle; not thread-safe.
 */
public abstract class JoinedTransactionHandle implements TransactionHandle {

    private final Connection connection;
    private final JoinedTransaction transaction;

    /**
     * @param connection the caller's connection, inside its open transaction
     * @param transaction what the engine registers with the physical transaction: one per physical
     *     transaction, told of its savepoints and its end by the integration
     */
    protected JoinedTransactionHandle(Connection connection, JoinedTransaction transaction) {
        this.connection = Objects.requireNonNull(connection, "connection");
        this.transaction = Objects.requireNonNull(transaction, "transaction");
    }

    /** The physical transaction's {@link JoinedTransaction}. */
    public final JoinedTransaction joinedTransaction() {
        return transaction;
    }

    /** Registers {@code callback} with the {@link JoinedTransaction}, which follows the savepoints. */
    @Override
    public void afterCompletion(CompletionCallback callback) {
        transaction.afterCompletion(callback);
    }

    /** Marks the caller's transaction so that its commit fails (or rolls back) instead of committing. */
    protected abstract void markRollbackOnly();

    @Override
    public final Connection connection() {
        return connection;
    }

    /** Always true. */
    @Override
    public final boolean joined() {
        return true;
    }

    /** Does nothing: the transaction's owner commits. */
    @Override
    public final void commit() {}

    /** Marks the caller's transaction rollback-only ({@link #markRollbackOnly()}). */
    @Override
    public final void rollback() {
        markRollbackOnly();
    }
}
