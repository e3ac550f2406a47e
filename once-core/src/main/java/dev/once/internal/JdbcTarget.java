package dev.once.internal;

import dev.once.InvalidConfigurationException;
import dev.once.jdbc.Dialect;

import javax.sql.DataSource;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;

/**
 * Where a component's tables live and which clock it judges time by, resolved at build(), and the
 * transactions the outbox relay, admin, idempotency keys and leases own on it. Not API.
 *
 * <p>{@link #inTransaction} and {@link #autoCommit} are these components' only way to a connection:
 * when the engine's transaction seam ({@code dev.once.tx}) lands, they delegate to its owning
 * provider and nothing else changes.
 */
public record JdbcTarget(DataSource dataSource, Dialect dialect, String tablePrefix, Clock clock) {

    /** Work on a connection. */
    @FunctionalInterface
    public interface Work<T> {
        T run(Connection connection) throws SQLException;
    }

    /**
     * Runs {@code work} in a transaction of its own: begins on a connection in auto-commit, commits
     * when it returns, rolls back when it throws anything, and hands the connection back in auto-commit.
     *
     * @throws InvalidConfigurationException if the data source hands out a connection with auto-commit off
     */
    public <T> T inTransaction(Work<T> work) throws SQLException {
        try (Connection c = checkout()) {
            c.setAutoCommit(false);
            try {
                T result = work.run(c);
                c.commit();
                return result;
            } catch (Throwable t) {
                try {
                    c.rollback();
                } catch (SQLException e) {
                    t.addSuppressed(e);
                }
                throw t;
            } finally {
                c.setAutoCommit(true);
            }
        }
    }

    /**
     * Begins a transaction that outlives one call (the caller's request runs in it): a connection in
     * auto-commit, switched off. The caller commits or rolls back, then hands it back with {@link #release}.
     *
     * @throws InvalidConfigurationException if the data source hands out a connection with auto-commit off
     */
    public Connection begin() throws SQLException {
        Connection c = checkout();
        try {
            c.setAutoCommit(false);
        } catch (SQLException | RuntimeException e) {
            c.close();
            throw e;
        }
        return c;
    }

    /** Hands back a connection from {@link #begin} whose transaction has ended, in auto-commit. */
    public static void release(Connection c) throws SQLException {
        try (c) {
            c.setAutoCommit(true);
        }
    }

    /**
     * Runs {@code work} on a connection in auto-commit: each statement is a transaction of its own.
     *
     * @throws InvalidConfigurationException if the data source hands out a connection with auto-commit off
     */
    public <T> T autoCommit(Work<T> work) throws SQLException {
        try (Connection c = checkout()) {
            return work.run(c);
        }
    }

    // A connection that arrives with auto-commit off belongs to a transaction someone else runs
    // (a transaction-aware proxy such as Spring's TransactionAwareDataSourceProxy inside
    // @Transactional, or a pool configured autoCommit=false). Switching it to auto-commit, or
    // committing it, would commit that caller's work with ours: refuse it instead.
    private Connection checkout() throws SQLException {
        Connection c = dataSource.getConnection();
        boolean autoCommit;
        try {
            autoCommit = c.getAutoCommit();
        } catch (SQLException | RuntimeException e) {
            c.close();
            throw e;
        }
        if (!autoCommit) {
            c.close();
            throw new InvalidConfigurationException("the DataSource handed out a connection with auto-commit off;"
                    + " once runs its own short transactions on it and would commit the work of whoever owns that"
                    + " transaction (a transaction-aware proxy, or a pool with autoCommit=false): give once the"
                    + " plain pool, with auto-commit on");
        }
        return c;
    }
}
