package dev.once.tx;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.util.Objects;

/**
 * A joined {@link TransactionProvider} for transactions managed by hand on a plain JDBC
 * connection: the caller binds its connection to the current thread, calls the engine, and ends
 * the transaction through the returned {@link Scope}, which then tells the engine how it ended.
 *
 * <pre>{@code
 * ManualTransactions manual = new ManualTransactions();
 * IdempotentConsumer billing = IdempotentConsumer.builder().transactions(manual)
 *     .consumer("billing").handler(h).build();
 * try (ManualTransactions.Scope tx = manual.join(connection)) {   // auto-commit must be off
 *     writeSomethingOfMyOwn(connection);
 *     billing.process(delivery);     // claims and runs the handler on `connection`, commits nothing
 *     tx.commit();                   // commits everything together, then reports the outcome
 * }                                  // closing without commit() rolls back
 * }</pre>
 *
 * <p>Savepoints: take them through the scope ({@link Scope#setSavepoint()}, {@link Scope#rollback(Savepoint)},
 * {@link Scope#releaseSavepoint(Savepoint)}), not on the connection. A delivery processed after a
 * savepoint that the scope then rolls back to is reported as not applied when the transaction ends,
 * even though the transaction commits: its claim and effect were undone. A savepoint taken on the
 * connection directly, or a rollback there, is invisible to the scope: the claim check at
 * {@link Scope#commit()} finds a claim it undid and rolls the whole transaction back instead of
 * reporting the delivery applied.
 *
 * <p>A failed {@code process} marks the transaction rollback-only. A rollback through the scope to a
 * savepoint set before that failure undoes all the failed call did, and clears the mark: the caller
 * may go on and commit the rest, as with JDBC, or Spring's {@code NESTED}:
 *
 * <pre>{@code
 * Savepoint before = tx.setSavepoint();
 * billing.process(delivery);
 * if (tx.rollbackOnly()) {
 *     tx.rollback(before);           // the failed delivery's claim and effect are gone; not rollback-only
 * }
 * tx.commit();                       // commits the rest
 * }</pre>
 *
 * A rollback to a savepoint set after the failure undoes none of it, and the mark stays.
 *
 * <p>Thread-safe: each thread binds its own connection. A scope belongs to the thread that opened it.
 */
public final class ManualTransactions implements TransactionProvider {

    private final ThreadLocal<Scope> current = new ThreadLocal<>();

    /** A provider with no transaction open on any thread. */
    public ManualTransactions() {}

    @Override
    public boolean joins() {
        return true;
    }

    /**
     * Binds {@code connection}'s open transaction to the current thread until the scope is closed.
     *
     * @throws SQLException if the connection is in auto-commit (there is no transaction to join) or
     *         this thread already has a scope open
     */
    public Scope join(Connection connection) throws SQLException {
        Objects.requireNonNull(connection, "connection");
        if (connection.getAutoCommit()) {
            throw new SQLException("cannot join a connection in auto-commit mode: every statement would commit on its"
                    + " own and the claim would not be atomic with the effect; call setAutoCommit(false) first");
        }
        if (current.get() != null) {
            throw new SQLException("this thread already joined a transaction; close its scope first");
        }
        Scope scope = new Scope(connection);
        current.set(scope);
        return scope;
    }

    @Override
    public TransactionHandle begin() throws SQLException {
        Scope scope = current.get();
        if (scope == null) {
            throw new SQLException("no transaction to join on this thread: call ManualTransactions.join(connection)"
                    + " before handing work to once");
        }
        return scope.handle;
    }

    /** One hand-managed transaction bound to a thread. Ends it and reports the end to the engine. */
    public final class Scope implements AutoCloseable {
        private final Connection connection;
        // The engine checks its claims after the handler (process() returns a lost claim's failure) and again at
        // this scope's commit (runChecks), which also covers what the caller did on the connection itself after
        // process() returned: a rollback, or a savepoint set and rolled back there, undoes claims this scope
        // never heard undone.
        private final JoinedTransaction completions = JoinedTransaction.checkingAfterHandlerAndBeforeCommit();
        private final Joined handle;
        private boolean rollbackOnly;
        // While rollbackOnly: how many of the savepoints still valid were set before the failure that marked it. A
        // rollback to one of those undoes the failed part and clears the mark; to a later one, undoes none of it.
        private int markedAbove;

        private Scope(Connection connection) {
            this.connection = connection;
            this.handle = new Joined(connection, completions);
        }

        /**
         * True when the engine's part failed and this transaction may only roll back, or first roll back to a
         * savepoint set before that failure.
         */
        public boolean rollbackOnly() {
            return rollbackOnly;
        }

        /**
         * Commits the connection and reports it committed.
         *
         * @throws SQLException if the engine marked the transaction rollback-only, or a claim made in it was
         *         undone on the connection behind the scope's back (it is rolled back instead, and reported so),
         *         or the commit fails (reported as not committed)
         */
        public void commit() throws SQLException {
            if (rollbackOnly) {
                rollback();
                throw new SQLException(
                        "transaction rolled back: once marked it rollback-only because a delivery"
                                + " processed in it failed; nothing of it was committed (to keep the rest, roll back"
                                + " to a savepoint set before that delivery with rollback(savepoint) first)",
                        "40000");
            }
            boolean committed = false;
            try {
                try {
                    // a folded check commits on PostgreSQL, and pgjdbc's commit then sends nothing
                    completions.runChecks(() -> true);
                } catch (SQLException e) {
                    connection.rollback();
                    throw e;
                } catch (RuntimeException e) {
                    connection.rollback();
                    throw new SQLException(
                            "transaction rolled back: a claim once made in it was undone before the commit (a"
                                    + " rollback or a savepoint's rollback on the connection itself, not through the"
                                    + " scope?), and committing the rest would report it applied: " + e.getMessage(),
                            "40000",
                            e);
                }
                connection.commit();
                committed = true;
            } finally {
                completions.completed(committed);
            }
        }

        /** Sets an unnamed savepoint on the connection and marks the point outcomes are undone back to. */
        public Savepoint setSavepoint() throws SQLException {
            Savepoint savepoint = connection.setSavepoint();
            completions.savepoint(savepoint);
            return savepoint;
        }

        /** Sets a named savepoint on the connection and marks the point outcomes are undone back to. */
        public Savepoint setSavepoint(String name) throws SQLException {
            Savepoint savepoint = connection.setSavepoint(name);
            completions.savepoint(savepoint);
            return savepoint;
        }

        /**
         * Rolls the connection back to {@code savepoint}: every delivery processed since is reported as
         * not applied when the transaction ends, whether it then commits or not. A transaction once marked
         * rollback-only after {@code savepoint} was set may commit again: the rollback undid what failed.
         *
         * @throws IllegalStateException if {@code savepoint} was not set through this scope
         */
        public void rollback(Savepoint savepoint) throws SQLException {
            int at = completions.indexOf(savepoint);
            if (at < 0) {
                throw new IllegalStateException("rollback to a savepoint not set through this scope (" + savepoint
                        + "): set savepoints with scope.setSavepoint() so once knows which outcomes a rollback undoes");
            }
            connection.rollback(savepoint);
            completions.rollbackToSavepoint(savepoint);
            if (rollbackOnly && at < markedAbove) {
                rollbackOnly = false;
            }
        }

        /** Releases {@code savepoint}; what was processed since stays with the enclosing transaction. */
        public void releaseSavepoint(Savepoint savepoint) throws SQLException {
            connection.releaseSavepoint(savepoint);
            completions.releaseSavepoint(savepoint);
            // a released savepoint's work joins the one before it: a failure under it is now that one's
            markedAbove = Math.min(markedAbove, completions.savepointCount());
        }

        /** Rolls the connection back and reports it. */
        public void rollback() throws SQLException {
            try {
                connection.rollback();
            } finally {
                completions.completed(false);
            }
        }

        /** Unbinds the thread; rolls back first if neither {@link #commit()} nor {@link #rollback()} ran. */
        @Override
        public void close() throws SQLException {
            current.remove();
            if (!completions.done()) {
                rollback();
            }
        }

        private final class Joined extends JoinedTransactionHandle {
            Joined(Connection connection, JoinedTransaction transaction) {
                super(connection, transaction);
            }

            @Override
            protected void markRollbackOnly() {
                int valid = completions.savepointCount();
                markedAbove = rollbackOnly ? Math.min(markedAbove, valid) : valid;
                rollbackOnly = true;
            }

            @Override
            public void close() {
                // the caller's connection stays with the caller
            }
        }
    }
}
