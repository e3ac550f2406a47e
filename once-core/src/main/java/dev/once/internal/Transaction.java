package dev.once.internal;

import dev.once.tx.TransactionHandle;

import java.sql.Connection;

/** One transaction as work inside {@link Transactions#inTransaction} sees it. Not thread-safe. Not API. */
public final class Transaction {

    private final TransactionHandle handle;
    private boolean rollbackOnly;

    Transaction(TransactionHandle handle) {
        this.handle = handle;
    }

    public Connection connection() {
        return handle.connection();
    }

    /** True when the caller owns the transaction and commits it after the work returns. */
    public boolean joined() {
        return handle.joined();
    }

    /** Ends the transaction with a rollback once the work returns (joined: marks the caller's rollback-only). */
    public void setRollbackOnly() {
        rollbackOnly = true;
    }

    boolean rollbackOnly() {
        return rollbackOnly;
    }

    /** Runs {@code callback} once the transaction has ended: owned, at once; joined, at the caller's commit or rollback. */
    public void afterCompletion(TransactionHandle.CompletionCallback callback) {
        handle.afterCompletion(callback);
    }
}
