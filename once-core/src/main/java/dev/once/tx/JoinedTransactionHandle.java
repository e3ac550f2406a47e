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

    /** @param connection the caller's connection, inside its open transaction */
    protected JoinedTransactionHandle(Connection connection) {
        this.connection = Objects.requireNonNull(connection, "connection");
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
