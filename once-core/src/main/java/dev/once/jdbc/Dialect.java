package dev.once.jdbc;

import java.sql.SQLException;
import java.time.Duration;

/**
 * Everything {@code once} says to one kind of database, in one place: one implementing class per
 * dialect holds every statement, and the capabilities it declares sit next to the SQL they unlock.
 * Table names are built from a prefix already validated by {@link TablePrefix}; values are always
 * bind parameters. Implementations are stateless and thread-safe.
 */
public interface Dialect {

    /** A short name: {@code postgresql}, {@code mariadb}. Also the resource folder of its migrations. */
    String name();

    /** Quotes an identifier that has already been validated. */
    String quote(String identifier);

    /**
     * Claims one event id, waiting at most {@code lockTimeout} for a concurrent transaction that
     * holds the same id. Binds: 1 consumer, 2 message id, 3 processed_at (timestamp). Executed
     * with {@code executeUpdate}: 1 row means claimed, 0 means an earlier delivery committed it.
     * The timeout is a validated {@link Duration}, written into the statement as a number.
     */
    String claim(String prefix, Duration lockTimeout);

    /** True when many ids can be claimed by one statement that returns the claimed ones ({@link #claimBatch}). */
    boolean supportsBatchClaim();

    /**
     * Claims many ids in one statement, in the order given (callers sort them, so overlapping
     * batches take their locks in one order and cannot deadlock), returning the ids it claimed.
     * Binds: 1 consumer, 2 processed_at, 3 id array (see {@link #createIdArray}).
     */
    String claimBatch(String prefix, Duration lockTimeout);

    /** Builds the array bound by {@link #claimBatch}. */
    java.sql.Array createIdArray(java.sql.Connection connection, String[] ids) throws SQLException;

    /** Guarded transition on already-validated identifiers. Binds: 1 to, 2 id, 3 from. */
    default String transition(String table, String idColumn, String statusColumn) {
        return "UPDATE " + table + " SET " + statusColumn + " = ? WHERE " + idColumn + " = ? AND " + statusColumn + " = ?";
    }

    /**
     * Records a fencing token unless a newer one is already recorded, and keeps the newest.
     * Binds: 1 resource, 2 token, 3 updated_at. The row stays locked until the transaction ends,
     * so {@link #newestFence} read right after it is the truth for this transaction.
     */
    String fence(String prefix);

    /** Reads the newest accepted token. Binds: 1 resource. */
    default String newestFence(String prefix) {
        return "SELECT token FROM " + quote(prefix + "fence") + " WHERE resource = ?";
    }

    /**
     * Inserts one outbox row and returns its id. Binds: 1 event_id, 2 destination, 3 msg_key,
     * 4 payload, 5 headers, 6 idempotency_key, 7 available_at, 8 created_at.
     */
    String outboxInsert(String prefix);

    /**
     * Deletes up to a chunk of inbox rows processed before a cutoff. Binds: 1 cutoff, 2 chunk size.
     * Bounded so that pruning a large backlog never holds locks or bloats one transaction.
     */
    String pruneInbox(String prefix);

    /** SQL states, error codes: the claim waited longer than the lock timeout for a concurrent duplicate. */
    boolean isLockTimeout(SQLException e);

    /** Deadlock or serialization failure: the whole transaction may be retried. */
    boolean isTransientConflict(SQLException e);

    /**
     * Serializes concurrent migrations of one prefix; released by {@link #unlockMigrations} or,
     * where that returns null, by the end of the transaction. Binds: 1 the lock name.
     */
    String lockMigrations();

    /** Releases the migration lock, or null when the lock ends with the transaction. Binds: 1 the lock name. */
    String unlockMigrations();

    /** Counts the rows of the inbox, for the {@code once.inbox.rows} gauge the pruner keeps after each run. */
    String countInboxRows(String prefix);
}
