package dev.once.internal;

import dev.once.jdbc.Dialect;
import dev.once.jdbc.JdbcSettings;
import dev.once.tx.TransactionProvider;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import javax.sql.DataSource;

/**
 * Where a component's tables live and which clock it judges time by, resolved at build(), and the
 * transactions the outbox relay, admin, idempotency keys and leases own on it, through the one
 * transaction seam ({@link Transactions}, as {@link TransactionProvider#owning} does): a connection that
 * arrives with auto-commit off (someone else's transaction) is refused, never switched. Not API.
 */
public record JdbcTarget(DataSource dataSource, Dialect dialect, String tablePrefix, Clock clock) {

    /** The target of a builder's resolved settings. */
    public static JdbcTarget of(JdbcSettings s) {
        return new JdbcTarget(s.dataSource(), s.dialect(), s.tablePrefix(), s.clock());
    }

    /** Work on the connection of one transaction. */
    @FunctionalInterface
    public interface Work<T> {
        T run(Connection connection) throws SQLException;
    }

    /**
     * Runs {@code work} in a transaction of its own: commits when it returns, rolls back when it
     * throws anything.
     *
     * @throws SQLException the work's, or the seam's refusal of a connection with auto-commit off
     */
    public <T> T inTransaction(Work<T> work) throws SQLException {
        return Transactions.owning(dataSource).inTransaction(tx -> work.run(tx.connection()));
    }

    /**
     * Begins a transaction that outlives one call (a request runs in it); the caller ends it through
     * {@link Transactions.Open} and closes it.
     */
    public Transactions.Open begin() throws SQLException {
        return Transactions.owning(dataSource).begin();
    }
}
