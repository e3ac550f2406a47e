package dev.once.internal;

import dev.once.Outcome;
import dev.once.tx.JoinedTransaction;
import dev.once.tx.JoinedTransactionHandle;
import dev.once.tx.TransactionHandle;
import java.sql.Connection;

/** One transaction as work inside {@link Transactions#inTransaction} sees it. Not thread-safe. Not API. */
public final class Transaction {

    private final TransactionHandle handle;
    private boolean rollbackOnly;
    private Outcome lostAtCommit;

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

    /** The caller's physical transaction, told of its savepoints, when the handle joined one that has it; else null. */
    public JoinedTransaction joinedTransaction() {
        return handle instanceof JoinedTransactionHandle j ? j.joinedTransaction() : null;
    }

    /** Ends the transaction with a rollback once the work returns (joined: marks the caller's rollback-only). */
    public void setRollbackOnly() {
        rollbackOnly = true;
    }

    boolean rollbackOnly() {
        return rollbackOnly;
    }

    /**
     * True when the engine's own handle ends this transaction, so its commit is the COMMIT alone and
     * the engine may send its last check and the COMMIT in one round trip. A provider's owned handle
     * may do work of its own in {@code commit()} before the COMMIT (the Kafka runner writes the offsets
     * of what the transaction applied there): folding the COMMIT into the check would commit without
     * that work, which would then land in a second transaction.
     */
    public boolean commitFoldable() {
        return handle.bareCommit();
    }

    /** What a claim check left to the caller's commit found lost, for the report after the rollback; null if none. */
    Outcome lostAtCommit() {
        return lostAtCommit;
    }

    void lostAtCommit(Outcome lost) {
        lostAtCommit = lost;
    }

    /** Runs {@code callback} once the transaction has ended: owned, at once; joined, at the caller's commit or rollback. */
    public void afterCompletion(TransactionHandle.CompletionCallback callback) {
        handle.afterCompletion(callback);
    }
}
