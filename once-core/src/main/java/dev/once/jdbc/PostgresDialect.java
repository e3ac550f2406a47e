package dev.once.jdbc;

import java.sql.Array;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;

/** PostgreSQL 12 and later (and PostgreSQL-compatible databases). */
public final class PostgresDialect implements Dialect {

    @Override
    public String name() {
        return "postgresql";
    }

    @Override
    public String quote(String identifier) {
        return '"' + identifier + '"';
    }

    // The lock timeout rides inside the claim through set_config(..., is_local => true): it takes
    // effect for this transaction before the insert can wait on a concurrent duplicate's index
    // entry, and costs no extra round trip (a separate SET LOCAL would add one per transaction).
    @Override
    public String claim(String prefix, Duration lockTimeout) {
        return "INSERT INTO " + quote(prefix + "inbox") + " (consumer, message_id, processed_at)"
                + " SELECT ?, ?, ? WHERE " + lockTimeout(lockTimeout) + " ON CONFLICT DO NOTHING";
    }

    @Override
    public boolean supportsBatchClaim() {
        return true;
    }

    // WITH ORDINALITY ... ORDER BY n keeps the caller's sorted order, so the index entries (and
    // their locks) are taken in one global order by every worker.
    @Override
    public String claimBatch(String prefix, Duration lockTimeout) {
        return "INSERT INTO " + quote(prefix + "inbox") + " (consumer, message_id, processed_at)"
                + " SELECT ?, t.m, ? FROM unnest(?::varchar[]) WITH ORDINALITY AS t(m, n)"
                + " WHERE " + lockTimeout(lockTimeout) + " ORDER BY t.n"
                + " ON CONFLICT DO NOTHING RETURNING message_id";
    }

    private static String lockTimeout(Duration timeout) {
        return "set_config('lock_timeout', '" + timeout.toMillis() + "ms', true) IS NOT NULL";
    }

    @Override
    public Array createIdArray(Connection connection, String[] ids) throws SQLException {
        return connection.createArrayOf("varchar", ids);
    }

    @Override
    public String fence(String prefix) {
        String table = quote(prefix + "fence");
        return "INSERT INTO " + table + " AS f (resource, token, updated_at) VALUES (?, ?, ?)"
                + " ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = EXCLUDED.updated_at"
                + " WHERE f.token < EXCLUDED.token";
    }

    @Override
    public String outboxInsert(String prefix) {
        return "INSERT INTO " + quote(prefix + "outbox")
                + " (event_id, destination, msg_key, payload, headers, idempotency_key, available_at, created_at)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id";
    }

    @Override
    public String pruneInbox(String prefix) {
        String table = quote(prefix + "inbox");
        // SKIP LOCKED: a chunk never waits on rows a live claim transaction is touching.
        return "DELETE FROM " + table + " i USING (SELECT consumer, message_id FROM " + table
                + " WHERE processed_at < ? LIMIT ? FOR UPDATE SKIP LOCKED) old"
                + " WHERE i.consumer = old.consumer AND i.message_id = old.message_id";
    }

    @Override
    public boolean isLockTimeout(SQLException e) {
        return "55P03".equals(e.getSQLState());
    }

    @Override
    public boolean isTransientConflict(SQLException e) {
        return "40P01".equals(e.getSQLState()) || "40001".equals(e.getSQLState());
    }

    @Override
    public String lockMigrations() {
        return "SELECT pg_advisory_xact_lock(hashtext(?))";
    }

    @Override
    public String unlockMigrations() {
        return null;
    }

    @Override
    public String countInboxRows(String prefix) {
        return "SELECT count(*) FROM " + quote(prefix + "inbox");
    }
}
