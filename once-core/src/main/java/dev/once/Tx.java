package dev.once;

import dev.once.outbox.Outbox;

import java.sql.Connection;
import java.sql.SQLException;

/**
 * The claim transaction as a handler sees it. Valid only during {@link Handler#handle}; not
 * thread-safe (a transaction belongs to one thread).
 */
public interface Tx {

    /**
     * The JDBC connection of the claim transaction. Statements run on it commit atomically with
     * the claim. Transaction control ({@code commit}, {@code rollback}, {@code close},
     * {@code setAutoCommit}) is refused with {@link HandlerMisuseException}.
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
     * pass (one holder writing several times).
     *
     * @throws StaleFencingTokenException if a newer token has already been accepted; the
     *         transaction is then rolled back by the engine and nothing of it applies
     */
    void fence(String resource, long token) throws SQLException;
}
