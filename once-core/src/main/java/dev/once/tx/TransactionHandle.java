package dev.once.tx;

import java.sql.Connection;
import java.sql.SQLException;

/**
 * One transaction as the engine sees it, from {@link TransactionProvider#begin()} to
 * {@link #close()}. Used by one thread; not thread-safe.
 *
 * <p>Only the engine's transaction helper calls {@link #commit()} and {@link #rollback()}; nothing
 * else in {@code once} ends a transaction.
 */
public interface TransactionHandle extends AutoCloseable {

    /** The connection every statement of this transaction runs on. */
    Connection connection();

    /** True when the caller owns the transaction: {@link #commit()} and {@link #rollback()} do not end it. */
    boolean joined();

    /**
     * Owned: commits. Joined: does nothing (the caller commits later).
     *
     * @throws SQLException if the commit failed; whether it took effect is then unknown, and the
     *         engine reports the work as retryable (a redelivery is absorbed by the inbox if it did)
     */
    void commit() throws SQLException;

    /**
     * True when {@link #commit()} sends the COMMIT and nothing else, so the engine may send its last
     * check and the COMMIT in one round trip and skip the call. False by default: a handle may do work
     * of its own in {@code commit()} before the COMMIT (the Kafka runner writes the offsets of what the
     * transaction applied there), which a folded COMMIT would leave to a second transaction.
     */
    default boolean bareCommit() {
        return false;
    }

    /**
     * Owned: rolls back. Joined: marks the caller's transaction rollback-only, so the caller's
     * commit fails instead of committing half of the engine's work.
     */
    void rollback() throws SQLException;

    /**
     * Registers {@code callback} for the end of the transaction: owned, right after {@link #commit()}
     * or {@link #rollback()}; joined, when the caller's transaction commits or rolls back (which may
     * be long after {@link #close()}). Called once, with whether the transaction committed.
     */
    void afterCompletion(CompletionCallback callback);

    /** Owned: ends the transaction if still open (rolling back), restores auto-commit and returns the connection. Joined: releases it. */
    @Override
    void close() throws SQLException;

    /** Told once how a transaction ended. */
    @FunctionalInterface
    interface CompletionCallback {
        /** @param committed true if the transaction committed, false if it rolled back or its end is unknown */
        void completed(boolean committed);
    }
}
