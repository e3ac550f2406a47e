package dev.once;

import java.sql.Connection;
import java.sql.SQLException;

/**
 * The transaction of one batch as a {@link BatchHandler} sees it. Valid only during
 * {@link BatchHandler#handle}; not thread-safe (a transaction belongs to one thread).
 */
public interface BatchTx {

    /**
     * The JDBC connection of the batch's transaction. Statements run on it commit atomically with
     * the claims. Transaction control ({@code commit}, {@code rollback}, {@code close},
     * {@code setAutoCommit}) is refused with {@link HandlerMisuseException}.
     */
    Connection connection();

    /** The consumer name this transaction claims for. */
    String consumer();

    /**
     * The transactional outbox for effects caused by {@code cause}, one of the deliveries this
     * transaction claimed: rows get event ids derived from the cause's ({@code <consumer>:<cause id>#<n>}),
     * exactly as {@link Tx#outbox()} does for the per-event handler, so a re-run of the batch after
     * a rollback writes the same ids.
     *
     * @throws IllegalArgumentException if {@code cause} is not one of the claimed deliveries
     */
    Outbox outbox(Delivery cause);

    /**
     * Rejects, in this transaction, a write protected by a fencing token older than the newest
     * accepted for {@code resource} (see {@link Tx#fence}), checked again last before the commit.
     *
     * @throws StaleFencingTokenException if a newer token has already been accepted
     */
    void fence(String resource, long token) throws SQLException;
}
