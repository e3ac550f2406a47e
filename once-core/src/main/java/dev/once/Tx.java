package dev.once;

import java.sql.Connection;
import java.sql.SQLException;

/**
 * The claim transaction as a handler sees it. Valid only during {@link Handler#handle}; not
 * thread-safe (a transaction belongs to one thread).
 */
public interface Tx {

    /**
     * The JDBC connection of the claim transaction. Statements run on it commit atomically with
     * the claim. The engine alone ends the transaction, so the following are refused with
     * {@link HandlerMisuseException}, and the delivery is rolled back and reported
     * {@link Outcome.Status#FAILED_PERMANENT} even if the handler catches the refusal:
     * <ul>
     *   <li>calls: {@code commit()}, {@code rollback()}, {@code close()}, {@code abort(…)},
     *       {@code setAutoCommit(…)}, {@code setTransactionIsolation(…)}, {@code setReadOnly(…)};</li>
     *   <li>SQL, through {@code execute*}, {@code addBatch}, {@code prepareStatement} and
     *       {@code prepareCall}, in any statement of a multi-statement string, whatever the case,
     *       whitespace or comments before it: {@code COMMIT}, {@code END}, {@code ABORT},
     *       {@code ROLLBACK} (not {@code ROLLBACK TO SAVEPOINT}), {@code BEGIN}, {@code START TRANSACTION},
     *       {@code SET [SESSION|LOCAL|GLOBAL] TRANSACTION}, {@code SET autocommit} (also
     *       {@code @@autocommit}), {@code PREPARE TRANSACTION}, {@code XA}; on MariaDB also the
     *       statements that commit implicitly (DDL except on temporary tables, {@code LOCK}/{@code UNLOCK
     *       TABLES}, {@code TRUNCATE}, {@code RENAME}, {@code GRANT}/{@code REVOKE},
     *       {@code ANALYZE}/{@code OPTIMIZE}/{@code REPAIR}, {@code FLUSH}, {@code RESET}).</li>
     * </ul>
     * Every statement, result set and metadata object reached from it leads back to this guarded
     * connection ({@code getConnection()}, {@code getStatement()}); {@code unwrap} to the driver's
     * connection or statement class throws {@link SQLException}. Savepoints stay available
     * ({@code setSavepoint}, {@code rollback(Savepoint)}, {@code releaseSavepoint}, and their SQL):
     * they only undo the handler's own work.
     *
     * <p>After the handler, before the commit, the engine checks that its claim is still part of the
     * open transaction. A handler that catches a failed statement and goes on (PostgreSQL then
     * aborts the transaction and a commit would silently roll back; a MariaDB deadlock rolls the
     * whole transaction back and later statements run in a new one) is reported
     * {@link Outcome.Status#FAILED_RETRYABLE}, never {@code APPLIED}; a claim deleted by the handler
     * is not applied either. A stored procedure that commits is not seen by the guard: do not call one.
     */
    Connection connection();

    /** The consumer name this transaction claims for. */
    String consumer();

    /** The delivery being handled. */
    Delivery delivery();

    /**
     * The transactional outbox: external effects enqueued here are written in this transaction
     * and performed by a relay after commit, stamped with an event id derived from this delivery's
     * (see {@link Outbox}).
     */
    Outbox outbox();

    /**
     * Guarded transition: {@code UPDATE table SET status = to WHERE id = ? AND status = from}.
     * Uses columns {@code id} and {@code status}.
     *
     * @return true if this call moved the row, false if it was not in state {@code from}
     *         (already moved by an earlier delivery, or never there)
     * @throws InvalidConfigurationException if {@code table} is not a plain or schema-qualified identifier
     */
    boolean transition(String table, Object id, String from, String to) throws SQLException;

    /**
     * Guarded transition on named columns: {@code UPDATE table SET statusColumn = to WHERE
     * idColumn = id AND statusColumn = from}.
     */
    boolean transition(String table, String idColumn, Object id, String statusColumn, String from, String to)
            throws SQLException;

    /**
     * Rejects, in this transaction, a write protected by a fencing token older than the newest
     * accepted for {@code resource}; records {@code token} as the newest otherwise. Equal tokens
     * pass (one holder writing several times). The fence holds for the whole transaction: the engine
     * checks it again last before the commit, so neither a rollback to a savepoint that undid the check
     * (a Spring {@code NESTED} step that failed) nor a refusal the handler caught lets its writes commit
     * after a newer holder's; the delivery then fails with this exception.
     *
     * @throws StaleFencingTokenException if a newer token has already been accepted; the
     *         transaction is then rolled back by the engine and nothing of it applies
     */
    void fence(String resource, long token) throws SQLException;
}
