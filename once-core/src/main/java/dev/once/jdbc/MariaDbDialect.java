package dev.once.jdbc;

import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Duration;

/**
 * MariaDB 10.6 and later with InnoDB; not MySQL ({@link Dialects#byName} refuses it). A batch is claimed with one multi-row
 * {@code INSERT IGNORE … RETURNING} (MariaDB 10.5+ returns only the rows it inserted; MySQL 8 has
 * no {@code RETURNING} and is not covered by this dialect's batch claim).
 */
public final class MariaDbDialect implements Dialect {

    /** The one instance is {@link Dialects#MARIADB}. */
    MariaDbDialect() {}

    private static final int ER_LOCK_WAIT_TIMEOUT = 1205;
    private static final int ER_LOCK_DEADLOCK = 1213;

    @Override
    public String name() {
        return "mariadb";
    }

    @Override
    public String quote(String identifier) {
        return '`' + identifier + '`';
    }

    // INSERT IGNORE turns only the duplicate key into "0 rows"; the other errors it would
    // downgrade (truncation) cannot happen because Delivery validates the id's length first.
    // SET STATEMENT scopes the lock wait to this one statement; InnoDB counts it in whole seconds.
    @Override
    public String claim(String prefix, Duration lockTimeout) {
        return withLockTimeout(
                lockTimeout,
                "INSERT IGNORE INTO " + quote(prefix + "inbox")
                        + " (consumer, event_id, processed_at) VALUES (?, ?, ?)");
    }

    @Override
    public String claimAtCommit(String prefix) {
        return "INSERT INTO " + quote(prefix + "inbox") + " (consumer, event_id, processed_at) VALUES (?, ?, ?)";
    }

    @Override
    public String claimWithFingerprint(String prefix, Duration lockTimeout) {
        return withLockTimeout(
                lockTimeout,
                "INSERT IGNORE INTO " + quote(prefix + "inbox")
                        + " (consumer, event_id, processed_at, payload_fingerprint) VALUES (?, ?, ?, ?)");
    }

    private static String withLockTimeout(Duration lockTimeout, String statement) {
        return lockTimeout == null
                ? statement
                : "SET STATEMENT innodb_lock_wait_timeout = " + seconds(lockTimeout) + " FOR " + statement;
    }

    // A deadlock makes InnoDB roll the whole transaction back, and the handler's later statements
    // run in a new one: the claim is then no longer visible. (information_schema.innodb_trx would
    // name the transaction, but InnoDB refreshes that view at most every 100 ms.) Statements that
    // commit implicitly are refused by the engine's guard before they run.
    @Override
    public String verifyClaim(String prefix) {
        return "SELECT count(*) FROM " + quote(prefix + "inbox") + " WHERE consumer = ? AND event_id = ?";
    }

    private static long seconds(Duration timeout) {
        return Math.max(1, (timeout.toMillis() + 999) / 1000);
    }

    @Override
    public boolean supportsBatchClaim() {
        return true;
    }

    // Server-side prepared statements (useServerPrepStmts) take at most 65,535 placeholders; three
    // or four per id keep a chunk well inside that and inside any max_allowed_packet.
    @Override
    public int maxBatchClaimSize() {
        return 1_000;
    }

    // With IGNORE, RETURNING yields only the rows inserted: a duplicate key (an id an earlier
    // transaction committed) is skipped silently and is not returned. MariaDB inserts the rows in
    // the order listed, so sorted ids are locked in one global order, as on PostgreSQL. Tried on
    // 10.11: INSERT IGNORE ... VALUES ('a'),('b'),('c') RETURNING event_id with 'b' present returns a, c.
    @Override
    public String claimBatch(String prefix, Duration lockTimeout, int size) {
        return claimBatch(prefix, lockTimeout, size, "", "");
    }

    @Override
    public String claimBatchWithFingerprints(String prefix, Duration lockTimeout, int size) {
        return claimBatch(prefix, lockTimeout, size, ", payload_fingerprint", ", ?");
    }

    private String claimBatch(String prefix, Duration lockTimeout, int size, String column, String bind) {
        checkSize(size);
        StringBuilder sql = new StringBuilder(96 + size * 14);
        if (lockTimeout != null) {
            sql.append("SET STATEMENT innodb_lock_wait_timeout = ")
                    .append(seconds(lockTimeout))
                    .append(" FOR ");
        }
        sql.append("INSERT IGNORE INTO ")
                .append(quote(prefix + "inbox"))
                .append(" (consumer, event_id, processed_at")
                .append(column)
                .append(") VALUES (?, ?, ?")
                .append(bind)
                .append(')');
        for (int i = 1; i < size; i++) {
            sql.append(", (?, ?, ?").append(bind).append(')');
        }
        return sql.append(" RETURNING event_id").toString();
    }

    private void checkSize(int size) {
        if (size < 1 || size > maxBatchClaimSize()) {
            throw new IllegalArgumentException(
                    "a batch claim takes 1 to " + maxBatchClaimSize() + " ids, but was " + size);
        }
    }

    @Override
    public void bindBatchClaim(PreparedStatement statement, String consumer, Timestamp processedAt, String[] sortedIds)
            throws SQLException {
        int p = 1;
        for (String id : sortedIds) {
            statement.setString(p++, consumer); // consumer
            statement.setString(p++, id); // event_id
            statement.setTimestamp(p++, processedAt); // processed_at
        }
    }

    @Override
    public void bindBatchClaimWithFingerprints(
            PreparedStatement statement,
            String consumer,
            Timestamp processedAt,
            String[] sortedIds,
            Long[] fingerprints)
            throws SQLException {
        int p = 1;
        for (int i = 0; i < sortedIds.length; i++) {
            statement.setString(p++, consumer); // consumer
            statement.setString(p++, sortedIds[i]); // event_id
            statement.setTimestamp(p++, processedAt); // processed_at
            statement.setObject(p++, fingerprints[i], Types.BIGINT); // payload_fingerprint, null without payload
        }
    }

    // A locking read sees the latest committed row, not the snapshot REPEATABLE READ (the default)
    // took at the transaction's first read, which may predate the claim the insert conflicted with.
    // It costs no wait: INSERT IGNORE already holds a shared lock on each duplicate it skipped.
    @Override
    public String storedFingerprints(String prefix, int size) {
        checkSize(size);
        StringBuilder sql = new StringBuilder(128 + size * 3)
                .append("SELECT event_id, payload_fingerprint FROM ")
                .append(quote(prefix + "inbox"))
                .append(" WHERE consumer = ? AND event_id IN (?");
        for (int i = 1; i < size; i++) {
            sql.append(", ?");
        }
        return sql.append(") LOCK IN SHARE MODE").toString();
    }

    @Override
    public void bindStoredFingerprints(PreparedStatement statement, String consumer, String[] ids) throws SQLException {
        statement.setString(1, consumer); // 1 consumer
        for (int i = 0; i < ids.length; i++) {
            statement.setString(i + 2, ids[i]); // 2.. event ids
        }
    }

    // Every check that may pass writes the fence row, the holder's own token included (updated_at
    // moves forward by at least a microsecond, so the row always changes): on Galera, conflicts are
    // found at commit only between write sets, and a check that merely read the row would let a
    // node that has not yet applied a newer token commit the stale writer's effect after it
    // (GaleraClusterTest: stale_writes_accepted=3 of 3). Written, the row puts the check in the
    // write set, and certification refuses it (1213, retried) against any newer token committed
    // on another node. On a single server the row lock already serialized the two; nothing changes.
    @Override
    public String fence(String prefix) {
        return "INSERT INTO " + quote(prefix + "fence") + " (resource, token, updated_at) VALUES (?, ?, ?)"
                + " ON DUPLICATE KEY UPDATE updated_at = IF(token <= VALUES(token),"
                + " GREATEST(VALUES(updated_at), updated_at + INTERVAL 1 MICROSECOND), updated_at),"
                + " token = GREATEST(token, VALUES(token))";
    }

    // wsrep_sync_wait makes the read wait until this Galera node has applied every write the
    // cluster committed before it, so the retry after a certification conflict sees the newer token
    // and refuses the stale holder (StaleFencingTokenException) instead of conflicting again until
    // the node catches up. Without Galera (wsrep_on=OFF) the setting does nothing.
    @Override
    public String newestFence(String prefix) {
        return "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT token FROM " + quote(prefix + "fence")
                + " WHERE resource = ? FOR UPDATE";
    }

    // READ COMMITTED locks no gap on a scan and lets go of each row the delete reads and does not delete, so a chunk
    // holds only the rows it deletes; a row a live transaction holds is still waited for and decided on as it
    // committed. Like the relay's batch, it needs a binary log in ROW or MIXED format (MariaDB's default), where
    // InnoDB logs such a delete by rows (error 1665 under binlog_format=STATEMENT).
    @Override
    public String pruneChunkBegin() {
        return "SET TRANSACTION ISOLATION LEVEL READ COMMITTED";
    }

    @Override
    public String pruneInbox(String prefix) {
        return chunkedDelete(prefix + "inbox", "processed_at < ?", "processed_at");
    }

    // What every pruner's chunk is: up to a chunk (the last bind) of the rows matching `where`, in `order`, under
    // READ COMMITTED (pruneChunkBegin). The delete's locking read waits for a transaction that holds a row and
    // decides on the row as it committed.
    private String chunkedDelete(String table, String where, String order) {
        return "DELETE FROM " + quote(table) + " WHERE " + where + " ORDER BY " + order + " LIMIT ?";
    }

    // The ordered delete starts each chunk at the oldest entry of the processed_at B-tree; the
    // entries earlier chunks delete-marked are gone once InnoDB's background purge has run. Its
    // speed on a large inbox has not been measured (the retention benchmark runs on PostgreSQL).
    @Override
    public String pruneInboxWalking(String prefix, int serverMajorVersion) {
        return null;
    }

    // INSERT ... ON DUPLICATE KEY UPDATE inserts the lease's row or takes its exclusive lock, and
    // decides on the row as last committed, so two rivals can never both acquire one expiry (as
    // PostgreSQL's ON CONFLICT ... WHERE). Its RETURNING cannot say whether the update happened:
    // MariaDB returns the row either way (tried on 10.11), and the row a refusal leaves can be exactly
    // the one an acquisition writes (the holder asking again at the same instant with the same ttl).
    // LAST_INSERT_ID(expr), MySQL's documented way to hand a value from an update to the client,
    // carries the verdict within the statement: the values row sets it to 1 (kept when the row is
    // new), the token's assignment to the new token when the lease is free or expired, else to 0;
    // the assignments after it read it, and RETURNING answers it, NULL when held. The token's
    // assignment is first, so it reads the owner and expiry before they change. wsrep_sync_wait
    // (4: before INSERT) makes a Galera node apply every write the cluster committed first, so it
    // decides on the latest lease; without Galera it does nothing.
    @Override
    public String leaseAcquire(String prefix) {
        return "SET STATEMENT wsrep_sync_wait = 4 FOR INSERT INTO " + quote(prefix + "lease")
                + " (name, owner, token, expires_at) VALUES (?, ?, LAST_INSERT_ID(1), ?) ON DUPLICATE KEY UPDATE"
                + " token = IF(owner IS NULL OR expires_at <= ?, LAST_INSERT_ID(token + 1), token + LAST_INSERT_ID(0)),"
                + " owner = IF(LAST_INSERT_ID() = 0, owner, VALUES(owner)),"
                + " expires_at = IF(LAST_INSERT_ID() = 0, expires_at, VALUES(expires_at))"
                + " RETURNING NULLIF(LAST_INSERT_ID(), 0)";
    }

    // INSERT IGNORE takes a shared lock on a duplicate, so it waits for a transaction that updated
    // or locked the key; IGNORE does not turn that wait's timeout (1205) into a warning.
    @Override
    public String keyInsert(String prefix, Duration lockWait) {
        return withLockTimeout(
                lockWait,
                "INSERT IGNORE INTO " + quote(prefix + "idempotency_key")
                        + " (scope, idem_key, fingerprint, state, fencing_token, locked_until, created_at, updated_at)"
                        + " VALUES (?, ?, ?, 'processing', 1, ?, ?, ?)");
    }

    @Override
    public String withLockWait(Duration wait, String filtered, String tail) {
        return withLockTimeout(wait, filtered + tail);
    }

    @Override
    public String pruneKeys(String prefix) {
        return chunkedDelete(
                prefix + "idempotency_key",
                "created_at < ? AND (state <> 'processing' OR locked_until < ?)",
                "created_at");
    }

    @Override
    public String outboxBatchBegin() {
        return "SET TRANSACTION ISOLATION LEVEL READ COMMITTED";
    }

    @Override
    public String pruneOutbox(String prefix) {
        return chunkedDelete(prefix + "outbox", "status = 'sent' AND sent_at < ?", "id");
    }

    // In primary key order, not by moved_at: it has no index, on purpose (InnoDB would rewrite its entry on every
    // move, each ordered run), so ordering by it would sort every old row for each chunk, where the primary key's
    // order lets the scan stop at the chunk's last row. The delete's locking read waits for a move in progress and
    // reads the row as it committed: moved, it is not old any more and stays.
    @Override
    public String pruneStreamPositions(String prefix) {
        return chunkedDelete(prefix + "stream_position", "moved_at < ?", "consumer, stream");
    }

    @Override
    public boolean mysqlLexing() {
        return true;
    }

    @Override
    public boolean isLockTimeout(SQLException e) {
        return e.getErrorCode() == ER_LOCK_WAIT_TIMEOUT;
    }

    // A locking read: a plain SELECT in the caller's REPEATABLE READ transaction reads the snapshot of
    // its first read, taken before a successor took the key over, and would find the caller's own token
    // ("already finished") where the UPDATE that was just refused saw the successor's.
    @Override
    public String keyToken(String prefix) {
        return Dialect.super.keyToken(prefix) + " LOCK IN SHARE MODE";
    }

    // InnoDB rolls back the whole transaction on a deadlock (1213, and Galera's certification failure,
    // reported alike); a lock wait timeout (1205) rolls back only the statement, unless the server runs
    // with innodb_rollback_on_timeout, where the count check finds the claim gone.
    @Override
    public boolean endsTransaction(SQLException e) {
        return e.getErrorCode() == ER_LOCK_DEADLOCK || "40001".equals(e.getSQLState());
    }

    @Override
    public boolean isTransientConflict(SQLException e) {
        return e.getErrorCode() == ER_LOCK_DEADLOCK || "40001".equals(e.getSQLState());
    }

    @Override
    public String lockMigrations(Duration wait) {
        return "SELECT GET_LOCK(?, " + seconds(wait) + ")";
    }

    @Override
    public String unlockMigrations() {
        return "SELECT RELEASE_LOCK(?)";
    }

    @Override
    public String countInboxRows(String prefix) {
        return "SELECT count(*) FROM " + quote(prefix + "inbox");
    }

    @Override
    public String inboxStats(String prefix) {
        return "SELECT count(*) AS inbox_rows, min(processed_at) AS oldest_claim FROM " + quote(prefix + "inbox");
    }

    @Override
    public String kafkaOffsetUpsert(String prefix) {
        return "INSERT INTO " + quote(prefix + "kafka_offsets") + " (consumer_group, topic, partition_no, next_offset)"
                + " VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE next_offset = VALUES(next_offset)";
    }

    // A new key is inserted under an insert intention lock, which waits for no other insert into the gap (only for
    // a gap lock, which no statement on this table takes then); a duplicate primary key is X-locked, the record only
    // (not the gap), and updated as last committed: no run's fence locks a gap, so the first runs of new streams
    // neither wait for nor deadlock with each other (an UPDATE or SELECT ... FOR UPDATE of the missing key locked
    // the gap around it). The assignments run in order, each reading the columns as the earlier ones left them, so
    // the position's decides first, on the stored position. The verdict comes back as the lease's does: the values
    // row sets LAST_INSERT_ID to 1 (kept when the row is new), the position's assignment to 1 when it moves the
    // stream, else to 0 (adding 0 leaves the position as it is); RETURNING answers it and the position after the
    // statement, the stored one when refused. Not the update count: ROW_COUNT() says 1 inserted, 2 moved, 0 left
    // (tried on 10.11), but a client that sets CLIENT_FOUND_ROWS (Connector/J does, unless useAffectedRows) gets 1
    // for a row left as it is, as for a new one.
    @Override
    public String streamPositionMove(String prefix) {
        return "INSERT INTO " + quote(prefix + "stream_position") + " (consumer, stream, position, moved_at)"
                + " VALUES (?, ?, LAST_INSERT_ID(1) * ?, ?) ON DUPLICATE KEY UPDATE"
                + " position = IF(position < ?, LAST_INSERT_ID(1) * VALUES(position), position + LAST_INSERT_ID(0)),"
                + " moved_at = IF(LAST_INSERT_ID() = 1, VALUES(moved_at), moved_at)"
                + " RETURNING LAST_INSERT_ID(), position";
    }
}
