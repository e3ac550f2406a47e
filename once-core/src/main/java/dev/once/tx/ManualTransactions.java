package dev.once.tx;

import dev.once.internal.Completions;
import java.sql.Connection;
import java.sql.SQLException;
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
 * <p>Thread-safe: each thread binds its own connection. A scope belongs to the thread that opened it.
 */
public final class ManualTransactions implements TransactionProvider {

    private final ThreadLocal<Scope> current = new ThreadLocal<>();

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
        private final Completions completions = new Completions();
        private final Joined handle;
        private boolean rollbackOnly;

        private Scope(Connection connection) {
            this.connection = connection;
            this.handle = new Joined();
        }

        /** True when the engine's part failed and this transaction may only roll back. */
        public boolean rollbackOnly() {
            return rollbackOnly;
        }

        /**
         * Commits the connection and reports it committed.
         *
         * @throws SQLException if the engine marked the transaction rollback-only (it is rolled back
         *         instead, and reported so), or the commit fails (reported as not committed)
         */
        public void commit() throws SQLException {
            if (rollbackOnly) {
                rollback();
                throw new SQLException(
                        "transaction rolled back: once marked it rollback-only because a delivery"
                                + " processed in it failed; nothing of it was committed",
                        "40000");
            }
            boolean committed = false;
            try {
                connection.commit();
                committed = true;
            } finally {
                completions.fire(committed);
            }
        }

        /** Rolls the connection back and reports it. */
        public void rollback() throws SQLException {
            try {
                connection.rollback();
            } finally {
                completions.fire(false);
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
            Joined() {
                super(connection);
            }

            @Override
            protected void markRollbackOnly() {
                rollbackOnly = true;
            }

            @Override
            public void afterCompletion(CompletionCallback callback) {
                completions.add(callback);
            }

            @Override
            public void close() {
                // the caller's connection stays with the caller
            }
        }
    }
}
