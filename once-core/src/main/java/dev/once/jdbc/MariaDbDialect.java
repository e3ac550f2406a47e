package dev.once.jdbc;

import java.sql.Array;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;

/**
 * MariaDB 10.6 and later with InnoDB (MySQL 8 differs only where noted). No batch claim: MariaDB
 * has no array bind, so a batch claims its sorted ids one statement each inside the one
 * transaction, which keeps the lock order and the single commit.
 */
public final class MariaDbDialect implements Dialect {

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
        String insert = "INSERT IGNORE INTO " + quote(prefix + "inbox")
                + " (consumer, event_id, processed_at) VALUES (?, ?, ?)";
        return lockTimeout == null ? insert
                : "SET STATEMENT innodb_lock_wait_timeout = " + seconds(lockTimeout) + " FOR " + insert;
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
        return false;
    }

    @Override
    public String claimBatch(String prefix, Duration lockTimeout) {
        throw new UnsupportedOperationException("mariadb has no batch claim; check supportsBatchClaim()");
    }

    @Override
    public Array createIdArray(Connection connection, String[] ids) {
        throw new UnsupportedOperationException("mariadb has no array binds; check supportsBatchClaim()");
    }

    @Override
    public String fence(String prefix) {
        return "INSERT INTO " + quote(prefix + "fence") + " (resource, token, updated_at) VALUES (?, ?, ?)"
                + " ON DUPLICATE KEY UPDATE updated_at = IF(token < VALUES(token), VALUES(updated_at), updated_at),"
                + " token = GREATEST(token, VALUES(token))";
    }

    @Override
    public String outboxInsert(String prefix) {
        return "INSERT INTO " + quote(prefix + "outbox")
                + " (event_id, destination, msg_key, payload, headers, idempotency_key, available_at, created_at)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id";
    }

    @Override
    public String pruneInbox(String prefix) {
        return "DELETE FROM " + quote(prefix + "inbox") + " WHERE processed_at < ? ORDER BY processed_at LIMIT ?";
    }

    // MariaDB has no upsert that reports whether its conditional update happened; leases need a
    // single atomic statement that does, so they are PostgreSQL-only for now.
    @Override
    public String leaseAcquire(String prefix) {
        throw new UnsupportedOperationException("leases are not supported on mariadb yet; use PostgreSQL");
    }

    @Override
    public String keyInsert(String prefix) {
        return "INSERT IGNORE INTO " + quote(prefix + "idempotency_key")
                + " (scope, idem_key, fingerprint, state, fencing_token, locked_until, created_at, updated_at)"
                + " VALUES (?, ?, ?, 'processing', 1, ?, ?, ?)";
    }

    @Override
    public String pruneKeys(String prefix) {
        return "DELETE FROM " + quote(prefix + "idempotency_key")
                + " WHERE created_at < ? AND (state <> 'processing' OR locked_until < ?) ORDER BY created_at LIMIT ?";
    }

    @Override
    public String pruneOutbox(String prefix) {
        return "DELETE FROM " + quote(prefix + "outbox") + " WHERE status = 'sent' AND sent_at < ? ORDER BY id LIMIT ?";
    }

    @Override
    public boolean mysqlLexing() {
        return true;
    }

    @Override
    public boolean isLockTimeout(SQLException e) {
        return e.getErrorCode() == ER_LOCK_WAIT_TIMEOUT;
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
}
