package dev.once.tx;

import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** {@link TransactionProvider#owning}: the engine begins, commits and returns the connection. */
final class OwnedTransactions implements TransactionProvider {

    private static final Logger log = LoggerFactory.getLogger(OwnedTransactions.class);

    private final DataSource dataSource;

    OwnedTransactions(DataSource dataSource) {
        this.dataSource = dataSource;
    }

    @Override
    public boolean joins() {
        return false;
    }

    @Override
    public TransactionHandle begin() throws SQLException {
        Connection c = dataSource.getConnection();
        try {
            if (!c.getAutoCommit()) {
                throw new SQLException(
                        "the DataSource handed out a connection with auto-commit off; once owns this"
                                + " transaction and would commit whatever that connection already holds (a transaction-aware"
                                + " proxy hands out the caller's transaction this way): give it a DataSource whose connections"
                                + " are in auto-commit, or join the caller's transaction with transactions(...)",
                        "55000");
            }
            c.setAutoCommit(false);
        } catch (SQLException | RuntimeException | Error e) {
            c.close();
            throw e;
        }
        return new Owned(c);
    }

    private static final class Owned implements TransactionHandle {
        private final Connection connection;
        private final Completions completions = new Completions();
        private boolean rollbackFailed;

        Owned(Connection connection) {
            this.connection = connection;
        }

        @Override
        public Connection connection() {
            return connection;
        }

        @Override
        public boolean joined() {
            return false;
        }

        @Override
        public void commit() throws SQLException {
            connection.commit();
            completions.fire(true);
        }

        @Override
        public void rollback() throws SQLException {
            try {
                connection.rollback();
            } catch (SQLException e) {
                rollbackFailed = true;
                throw e;
            } finally {
                completions.fire(false);
            }
        }

        @Override
        public void afterCompletion(CompletionCallback callback) {
            completions.add(callback);
        }

        @Override
        public void close() throws SQLException {
            try {
                if (!completions.done()) {
                    rollback();
                }
            } catch (SQLException e) {
                log.debug("rollback before close failed", e);
            } finally {
                try {
                    // Restoring auto-commit commits whatever is open: only safe once the rollback went through.
                    if (!rollbackFailed && !connection.isClosed()) {
                        connection.setAutoCommit(true);
                    }
                } catch (SQLException e) {
                    log.debug("could not restore auto-commit", e);
                } finally {
                    connection.close();
                }
            }
        }
    }
}
