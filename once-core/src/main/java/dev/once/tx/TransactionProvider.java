package dev.once.tx;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.Objects;
import javax.sql.DataSource;

/**
 * Where the engine's transactions come from: the seam between {@code once} and whoever owns the
 * transaction. Two kinds exist.
 *
 * <ul>
 *   <li><b>Owned</b> ({@link #owning(DataSource)}): the engine takes a connection, begins, commits or
 *       rolls back, and returns the connection. This is what {@code dataSource(ds)} on every builder
 *       means.</li>
 *   <li><b>Joined</b>: the engine runs on a transaction the caller already has (Spring
 *       {@code @Transactional}, JTA, a hand-managed JDBC transaction such as
 *       {@link ManualTransactions}). The caller commits; the engine commits nothing, marks the
 *       caller's transaction rollback-only when its part failed, and learns the end through
 *       {@link TransactionHandle#afterCompletion}.</li>
 * </ul>
 *
 * <p>An integration (Spring, Quarkus, Micronaut) implements this interface; a Spring one with
 * {@code DataSourceUtils.getConnection} and a transaction synchronization, a JTA one with the
 * {@code TransactionSynchronizationRegistry}; its handle extends {@link JoinedTransactionHandle}.
 * Implementations must be thread-safe: the engine calls
 * {@link #begin()} from any thread, one transaction per call, and uses a handle on the calling
 * thread only.
 */
public interface TransactionProvider {

    /**
     * The engine owns each transaction: a connection from {@code dataSource}, auto-commit switched
     * off for the transaction and back on before the connection is returned. A connection that
     * arrives with auto-commit already off is refused: it is the mark of a transaction-aware proxy
     * or a pool handing out someone else's transaction, whose work the engine's commit would commit.
     */
    static TransactionProvider owning(DataSource dataSource) {
        Objects.requireNonNull(dataSource, "dataSource");
        return new TransactionProvider() {
            @Override
            public TransactionHandle begin() throws SQLException {
                Connection c = dataSource.getConnection();
                try {
                    return OwnedTransaction.begin(c, false);
                } catch (SQLException | RuntimeException | Error e) {
                    c.close();
                    throw e;
                }
            }

            @Override
            public boolean joins() {
                return false;
            }
        };
    }

    /**
     * The engine owns each transaction on {@code session}, a connection its caller holds and keeps (a
     * migration lock, a LISTEN session): auto-commit is switched off for the transaction and back on
     * after it, and the connection is never closed. One transaction at a time. A session that arrives
     * with auto-commit off is refused, as with {@link #owning}; one whose auto-commit cannot be
     * restored fails the transaction's close, so the session's next transaction does not find it off.
     */
    static TransactionProvider session(Connection session) {
        Objects.requireNonNull(session, "session");
        return new TransactionProvider() {
            @Override
            public TransactionHandle begin() throws SQLException {
                return OwnedTransaction.begin(session, true);
            }

            @Override
            public boolean joins() {
                return false;
            }
        };
    }

    /**
     * Begins (owned) or joins (joined) a transaction for one unit of the engine's work.
     *
     * @throws SQLException when no connection can be had, or an owned connection arrives with
     *         auto-commit off, or (joined) no caller transaction is active on this thread
     */
    TransactionHandle begin() throws SQLException;

    /** True when {@link #begin()} joins a caller's transaction rather than beginning one. */
    boolean joins();

    /**
     * True when every transaction {@link #begin()} joins was begun by this provider's integration for
     * one call of the engine and holds nothing else, and the integration runs the engine's checks right
     * before its commit ({@link JoinedTransaction#checkingBeforeCommit()}). The engine may then leave a
     * {@link dev.once.ClaimTiming#AT_COMMIT} claim to that commit: a duplicate found there rolls back the
     * delivery's own work and nobody else's. The integration must read the inbox after any rollback
     * before it settles the message (a handler that failed on the work a copy committed is a duplicate,
     * not a failure), as Spring's {@code @IdempotentListener} does. With the claim first, the claim is the
     * transaction's first statement and may be the plain insert that fails on an id claimed before: the
     * engine then marks the transaction rollback-only and reports {@code DUPLICATE}, which the integration
     * acknowledges although its transaction rolled back. Default false.
     */
    default boolean dedicated() {
        return false;
    }

    /**
     * For a {@link #dedicated()} provider: transactions the engine owns on connections apart from the
     * integration's, in which it reads the inbox after a delivery whose claim waited for the commit
     * ({@link dev.once.ClaimTiming#AT_COMMIT}) did not commit, before it reports the outcome: a claim
     * there makes the delivery a {@code DUPLICATE} (a copy committed the event, and a handler that failed
     * on the copy's work is the expected case), not a failure. Asked when that transaction has ended, also
     * from the integration's completion callbacks, while its connection may still be held: the read needs
     * a connection of its own. Null (the default) where there is none; the engine then reports the failure
     * and only the integration's own read tells the duplicate.
     */
    default TransactionProvider afterRollback() {
        return null;
    }
}
