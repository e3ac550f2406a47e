package dev.once.tx;

import java.sql.Connection;
import java.sql.SQLException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A transaction the engine owns on a connection in auto-commit: switched off for the
 * transaction and back on after it. The connection is closed (a pool's) or kept (a session's).
 */
final class OwnedTransaction implements TransactionHandle {

    private static final Logger log = LoggerFactory.getLogger(OwnedTransaction.class);

    private final Connection connection;
    private final boolean keep;
    // Created by the first afterCompletion: the engine's owned per-event path registers no callback,
    // and this was five lists per transaction (issue 21).
    private JoinedTransaction completions;
    private boolean done;
    private boolean rollbackFailed;

    private OwnedTransaction(Connection connection, boolean keep) {
        this.connection = connection;
        this.keep = keep;
    }

    static OwnedTransaction begin(Connection connection, boolean keep) throws SQLException {
        if (!connection.getAutoCommit()) {
            throw new SQLException(
                    (keep
                                    ? "the connection once holds for a session (a migration lock) arrived with auto-commit off"
                                    : "the DataSource handed out a connection with auto-commit off")
                            + "; once owns this transaction and would commit whatever that connection already"
                            + " holds (a transaction-aware proxy hands out the caller's transaction this way):"
                            + " give it a DataSource whose connections are in auto-commit, or join the caller's"
                            + " transaction with transactions(...)",
                    "55000");
        }
        connection.setAutoCommit(false);
        return new OwnedTransaction(connection, keep);
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
    public boolean bareCommit() {
        return true;
    }

    @Override
    public void commit() throws SQLException {
        connection.commit();
        completed(true);
    }

    @Override
    public void rollback() throws SQLException {
        try {
            connection.rollback();
        } catch (SQLException e) {
            rollbackFailed = true;
            throw e;
        } finally {
            completed(false);
        }
    }

    private void completed(boolean committed) {
        done = true;
        if (completions != null) {
            completions.completed(committed);
        }
    }

    @Override
    public void afterCompletion(CompletionCallback callback) {
        if (completions == null) {
            completions = new JoinedTransaction();
            if (done) {
                completions.completed(false); // no callback yet: only so that the registration refuses, as it must
            }
        }
        completions.afterCompletion(callback);
    }

    @Override
    public void close() throws SQLException {
        try {
            if (!done) {
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
                if (keep) {
                    throw e; // the session's next transaction would find auto-commit off: say so now
                }
                log.debug("could not restore auto-commit", e);
            } finally {
                if (!keep) {
                    connection.close();
                }
            }
        }
    }
}
