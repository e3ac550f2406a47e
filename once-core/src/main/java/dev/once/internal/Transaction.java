package dev.once.internal;

import dev.once.tx.JoinedTransaction;
import dev.once.tx.JoinedTransactionHandle;
import dev.once.tx.TransactionHandle;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;

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

    /** Sets the binds of a statement. */
    @FunctionalInterface
    public interface Binds {
        void bind(PreparedStatement ps) throws SQLException;
    }

    /**
     * True when the engine's own handle ends this transaction, so its commit is the COMMIT alone and
     * {@link #commitWithCheck} may send it. A provider's owned handle may do work of its own in
     * {@code commit()} before the COMMIT (the Kafka runner writes the offsets of what the transaction
     * applied there): folding the COMMIT into the check would commit without that work, which would
     * then land in a second transaction.
     */
    public boolean commitFoldable() {
        return handle.bareCommit();
    }

    /**
     * Commits through a statement string that checks the transaction first and ends with
     * {@code COMMIT} (see {@code Dialect.verifyClaimAndCommit}): the check rides in the commit's
     * round trip. When the check fails the server skips the {@code COMMIT}, this throws its error,
     * and the transaction is still open to be rolled back. The seam's own commit that follows finds
     * the transaction ended and sends nothing. Only when {@link #commitFoldable()}.
     *
     * @throws IllegalStateException if the transaction is joined (its owner commits) or a provider's
     *         handle ends it
     */
    public void commitWithCheck(String sql, Binds binds) throws SQLException {
        if (!commitFoldable()) {
            throw new IllegalStateException("only the engine's own transaction folds its COMMIT into the check");
        }
        try (PreparedStatement ps = handle.connection().prepareStatement(sql)) {
            binds.bind(ps);
            ps.execute();
        }
    }

    /** Runs {@code callback} once the transaction has ended: owned, at once; joined, at the caller's commit or rollback. */
    public void afterCompletion(TransactionHandle.CompletionCallback callback) {
        handle.afterCompletion(callback);
    }
}
