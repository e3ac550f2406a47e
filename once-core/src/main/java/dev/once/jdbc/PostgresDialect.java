package dev.once.jdbc;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;

/** PostgreSQL 12 and later (and PostgreSQL-compatible databases). */
public final class PostgresDialect implements Dialect {

    /** The one instance is {@link Dialects#POSTGRESQL}. */
    PostgresDialect() {}

    @Override
    public String name() {
        return "postgresql";
    }

    @Override
    public String quote(String identifier) {
        return '"' + identifier + '"';
    }

    // A lock timeout rides inside the claim through set_config(..., is_local => true): it takes
    // effect before the insert can wait on a concurrent duplicate's index entry. The value it
    // replaces is saved in once.lock_timeout and put back by restoreLockTimeout, sent in the same
    // round trip through pgjdbc (which sends both before it waits), so the handler's statements, and
    // a joined caller's, keep their own lock_timeout. It still costs server time on every claim
    // (measured: 4-7% of a one-event transaction), so without one the claim is the plain insert and
    // the role's or database's lock_timeout applies.
    @Override
    public String claim(String prefix, Duration lockTimeout) {
        return claim(prefix, lockTimeout, "", "", ON_CONFLICT);
    }

    @Override
    public String claimWithFingerprint(String prefix, Duration lockTimeout) {
        return claim(prefix, lockTimeout, ", payload_fingerprint", ", ?", ON_CONFLICT);
    }

    // ON CONFLICT inserts speculatively: it first looks the key up in the index (three more buffers
    // than the plain insert touches), then inserts the row with a speculative token and logs a
    // confirmation record for it (48 bytes). Measured on a one-event transaction's claim with
    // pg_stat_statements and pg_walinspect: 37 µs of server time, 4 WAL records, 9 buffers, against
    // 24 µs, 3 records, 6 buffers for the plain insert into the same table. A duplicate makes the
    // plain insert fail with 23505, which the server logs as an ERROR, once per redelivery.
    @Override
    public String claimNew(String prefix, Duration lockTimeout) {
        return claim(prefix, lockTimeout, "", "", "");
    }

    @Override
    public String claimNewFor(String prefix, Duration lockTimeout, String consumer) {
        return claim(prefix, lockTimeout, "", "", "", literal(consumer));
    }

    private static final String ON_CONFLICT = " ON CONFLICT DO NOTHING";

    private String claim(String prefix, Duration lockTimeout, String column, String bind, String onConflict) {
        return claim(prefix, lockTimeout, column, bind, onConflict, "?");
    }

    private String claim(
            String prefix, Duration lockTimeout, String column, String bind, String onConflict, String consumer) {
        String insert = "INSERT INTO " + quote(prefix + "inbox") + " (consumer, event_id, processed_at" + column + ")";
        String values = consumer + ", ?, " + PROCESSED_AT + bind;
        return lockTimeout == null
                ? insert + " VALUES (" + values + ")" + onConflict
                : insert + " SELECT " + values + " WHERE " + lockTimeout(lockTimeout) + onConflict;
    }

    // A string literal that reads as text whatever standard_conforming_strings says: quotes doubled, and a
    // backslash (off: an escape; on: itself) only in the escape form E'...', where it is doubled. Consumer names
    // are validated to neither, so this is the second line of defence, not the first.
    static String literal(String text) {
        String quoted = text.replace("'", "''");
        return text.indexOf('\\') < 0 ? "'" + quoted + "'" : "E'" + quoted.replace("\\", "\\\\") + "'";
    }

    @Override
    public String claimAtCommit(String prefix) {
        return "INSERT INTO " + quote(prefix + "inbox") + " (consumer, event_id, processed_at) VALUES (?, ?, "
                + PROCESSED_AT + ")";
    }

    // As verifyClaimAndCommit: pgjdbc sends both in one round trip, a unique violation skips the COMMIT,
    // and the driver's commit() afterwards finds the transaction idle and sends nothing.
    @Override
    public String claimAtCommitAndCommit(String prefix) {
        return claimAtCommit(prefix) + "; COMMIT";
    }

    // ON CONFLICT DO NOTHING waits for a copy's insert in progress and then inserts nothing if it
    // committed; dividing by the rows inserted turns "taken" into 22012, which skips the folded COMMIT.
    @Override
    public String claimAtJoinedCommit(String prefix) {
        return "WITH c AS (INSERT INTO " + quote(prefix + "inbox")
                + " (consumer, event_id, processed_at) VALUES (?, ?, " + PROCESSED_AT
                + ") ON CONFLICT DO NOTHING RETURNING 1) SELECT 1 / count(*) FROM c";
    }

    @Override
    public String claimAtJoinedCommitAndCommit(String prefix) {
        return claimAtJoinedCommit(prefix) + "; COMMIT";
    }

    // processed_at travels as microseconds since the epoch: pgjdbc's setTimestamp formats through a
    // Calendar (about 800 bytes and 4-5 µs of client CPU per claim, measured against setLong), and the
    // claim is the one statement every delivery sends. 'epoch' is UTC whatever the session's TimeZone,
    // and the product is exact (below 2^53 µs, the year 2255).
    private static final String PROCESSED_AT = "'epoch'::timestamptz + ? * interval '1 microsecond'";

    @Override
    public void bindProcessedAt(PreparedStatement statement, int index, Instant processedAt) throws SQLException {
        statement.setLong(index, ChronoUnit.MICROS.between(Instant.EPOCH, processedAt));
    }

    // The claim is this transaction's when its row is visible and was inserted by the open
    // transaction or one of its subtransactions (a claim made after a savepoint has a subtransaction's
    // id as xmin, never the top-level one). A visible row whose inserter is still in progress can only
    // be ours: another open transaction's rows are invisible. xmin is 32 bits; it is widened to the
    // 64-bit id space against the top-level id t (txid_current_if_assigned()): our ids are t and the
    // subtransaction ids assigned after it, less than 2^31 ahead, so (xmin - t) mod 2^32 below 2^31
    // names them exactly, and txid_status says 'in progress' for them. A copy another transaction
    // committed answers 'committed', or (older than t) falls outside the window and is not looked up.
    // A mismatch divides by zero (22012) instead of answering 0, so that in verifyClaimAndCommit the
    // COMMIT after it never runs; in an aborted transaction the SELECT itself fails with 25P02.
    // PostgreSQL 12+ (txid_* exist through 17).
    @Override
    public String verifyClaim(String prefix) {
        return "SELECT 1 / count(*) FROM " + quote(prefix + "inbox") + " WHERE consumer = ? AND event_id = ?"
                + MADE_BY_THIS_TRANSACTION;
    }

    private static final String AHEAD =
            "(xmin::text::bigint - txid_current_if_assigned() % 4294967296 + 4294967296) % 4294967296";
    private static final String MADE_BY_THIS_TRANSACTION = " AND CASE WHEN " + AHEAD + " < 2147483648"
            + " THEN txid_status(txid_current_if_assigned() + " + AHEAD + ") = 'in progress' END";

    // As verifyClaim, for a batch: one array bind whatever n (one statement text, one plan), and a count
    // short of n divides by zero, so that in verifyClaimsAndCommit the COMMIT never runs.
    @Override
    public String verifyClaims(String prefix, int n) {
        return "SELECT count(*) / (count(*) = ?)::int FROM " + quote(prefix + "inbox")
                + " WHERE consumer = ? AND event_id = ANY (?)" + MADE_BY_THIS_TRANSACTION;
    }

    @Override
    public void bindVerifyClaims(PreparedStatement statement, String consumer, List<String> eventIds)
            throws SQLException {
        statement.setLong(1, eventIds.size());
        statement.setString(2, consumer);
        statement.setArray(3, statement.getConnection().createArrayOf("varchar", eventIds.toArray()));
    }

    @Override
    public String verifyClaimsAndCommit(String prefix, int n) {
        return verifyClaims(prefix, n) + "; COMMIT";
    }

    // pgjdbc sends both statements in one round trip and the server skips the COMMIT when the check
    // fails; the driver's commit() afterwards finds the transaction idle and sends nothing.
    @Override
    public String verifyClaimAndCommit(String prefix) {
        return verifyClaim(prefix) + "; COMMIT";
    }

    @Override
    public boolean isAbortedTransaction(SQLException e) {
        return "25P02".equals(e.getSQLState());
    }

    @Override
    public boolean isClaimMissing(SQLException e) {
        return "22012".equals(e.getSQLState());
    }

    @Override
    public boolean supportsBatchClaim() {
        return true;
    }

    // WITH ORDINALITY ... ORDER BY n keeps the caller's sorted order, so the index entries (and
    // their locks) are taken in one global order by every worker.
    @Override
    public String claimBatch(String prefix, Duration lockTimeout, int size) {
        return claimBatch(prefix, lockTimeout, " ON CONFLICT DO NOTHING RETURNING event_id");
    }

    // ON CONFLICT makes PostgreSQL insert each row speculatively (look the key up, insert the heap row
    // and index entry with a speculative token, then log a confirmation record): measured here at
    // 1.7x the server time of a plain insert of 2,000 ids, and the ids benchmark's set-wise claims ran
    // 1.13x faster with the plain insert first. Ids a broker delivers are new but for
    // redeliveries, so the engine tries this first and pays the ON CONFLICT claim only after a
    // unique violation (which the server logs as an ERROR).
    @Override
    public String claimBatchAllNew(String prefix, Duration lockTimeout, int size) {
        return claimBatch(prefix, lockTimeout, "");
    }

    private String claimBatch(String prefix, Duration lockTimeout, String onConflict) {
        return "INSERT INTO " + quote(prefix + "inbox") + " (consumer, event_id, processed_at)"
                + " SELECT ?, t.m, ? FROM unnest(?::varchar[]) WITH ORDINALITY AS t(m, n)"
                + (lockTimeout == null ? "" : " WHERE " + lockTimeout(lockTimeout)) + " ORDER BY t.n"
                + onConflict;
    }

    @Override
    public boolean isUniqueViolation(SQLException e) {
        return "23505".equals(e.getSQLState());
    }

    // The fingerprints ride in a second array of the same length, unnested in step with the ids.
    @Override
    public String claimBatchWithFingerprints(String prefix, Duration lockTimeout, int size) {
        return "INSERT INTO " + quote(prefix + "inbox") + " (consumer, event_id, processed_at, payload_fingerprint)"
                + " SELECT ?, t.m, ?, t.f FROM unnest(?::varchar[], ?::bigint[]) WITH ORDINALITY AS t(m, f, n)"
                + (lockTimeout == null ? "" : " WHERE " + lockTimeout(lockTimeout)) + " ORDER BY t.n"
                + " ON CONFLICT DO NOTHING RETURNING event_id";
    }

    @Override
    public void bindBatchClaimWithFingerprints(
            PreparedStatement statement,
            String consumer,
            Timestamp processedAt,
            String[] sortedIds,
            Long[] fingerprints)
            throws SQLException {
        bindBatchClaim(statement, consumer, processedAt, sortedIds);
        statement.setArray(4, statement.getConnection().createArrayOf("bigint", fingerprints)); // 4 fingerprints
    }

    // A plain read: under READ COMMITTED it sees the claim the insert waited for; under REPEATABLE
    // READ an insert that conflicts with a row its snapshot cannot see fails (40001) before this runs.
    // No FOR SHARE: it would write a lock into every duplicate's row.
    @Override
    public String storedFingerprints(String prefix, int size) {
        return "SELECT event_id, payload_fingerprint FROM " + quote(prefix + "inbox")
                + " WHERE consumer = ? AND event_id = ANY(?::varchar[])";
    }

    @Override
    public void bindStoredFingerprints(PreparedStatement statement, String consumer, String[] ids) throws SQLException {
        statement.setString(1, consumer); // 1 consumer
        statement.setArray(2, statement.getConnection().createArrayOf("varchar", ids)); // 2 event ids
    }

    // A scalar subquery, so PostgreSQL evaluates the volatile set_config once per statement (an
    // InitPlan) rather than once per row of a batch claim, which cost about 20% of a 100-id claim.
    // The inner set_config saves the current value first: the outer one's argument depends on it,
    // which fixes the order. left(..., 0) contributes nothing to the new value.
    private static String lockTimeout(Duration timeout) {
        return "(SELECT set_config('lock_timeout', '" + timeout.toMillis() + "ms'"
                + " || left(set_config('once.lock_timeout', current_setting('lock_timeout'), true), 0), true))"
                + " IS NOT NULL";
    }

    @Override
    public String restoreLockTimeout() {
        return "SELECT set_config('lock_timeout', current_setting('once.lock_timeout'), true)";
    }

    // One array bind whatever the batch size, so the statement text (and its server-side plan) is one.
    @Override
    public void bindBatchClaim(PreparedStatement statement, String consumer, Timestamp processedAt, String[] sortedIds)
            throws SQLException {
        Array ids = statement.getConnection().createArrayOf("varchar", sortedIds);
        statement.setString(1, consumer); // 1 consumer
        statement.setTimestamp(2, processedAt); // 2 processed_at
        statement.setArray(3, ids); // 3 sorted event ids
    }

    @Override
    public String fence(String prefix) {
        String table = quote(prefix + "fence");
        return "INSERT INTO " + table + " AS f (resource, token, updated_at) VALUES (?, ?, ?)"
                + " ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = EXCLUDED.updated_at"
                + " WHERE f.token < EXCLUDED.token";
    }

    // The lock query's plan is costed per row with its two sub-selects: with a large batch size
    // it can pass jit_above_cost, and compiling it costs more than the query runs.
    @Override
    public String outboxBatchBegin() {
        return "SET LOCAL jit = off";
    }

    // The default's rule, with the key's head and the row's predecessor each read as the first
    // entry of the key in the (msg_key, id) index on pending and dead rows (one lookup each way).
    // Filters, then locks: a row refused (its key's head dead or waiting for a retry) is probed,
    // not locked. Locking first (36e6b317) locked every row the scan passed: behind a blocked hot
    // key, 100,000 rows and 5.4 MB of WAL per poll, against 27 kB filtering first (measured on
    // PostgreSQL 15: 1-2 s either way, as every passed row is probed); with key runs the scan
    // passes few rows otherwise, so what locking first saved (a probe per row other relays hold)
    // no longer pays for that.
    // The predecessor is read outside the locking sub-select, for the rows it locked only: in the
    // select list of the scan it was read for every row the scan passed, the rows other relays
    // hold included (skipped by the lock after it), and with four relays each passing the three
    // batches the others hold, that was half the statement's buffers (relay suite's drain: 43.7k
    // against 23.4k buffers for a batch of 1,000; RelayProbe). The outer ORDER BY keeps the order
    // locked (a sort of at most a batch).
    @Override
    public String outboxLockBatch(String prefix) {
        String table = quote(prefix + "outbox");
        return "SELECT o.id, o.event_id, o.destination, o.msg_key, o.payload, o.headers, o.idempotency_key,"
                + " o.attempts, o.created_at, (SELECT p.id FROM " + table + " p WHERE p.msg_key = o.msg_key"
                + " AND p.status IN ('pending', 'dead') AND p.id < o.id ORDER BY p.id DESC LIMIT 1) AS pred"
                + " FROM (SELECT l.id, l.event_id, l.destination, l.msg_key, l.payload, l.headers,"
                + " l.idempotency_key, l.attempts, l.created_at, l.available_at FROM " + table + " l"
                + " WHERE l.status = 'pending' AND l.available_at <= ? AND l.destination LIKE ?"
                + " AND (l.msg_key IS NULL OR (SELECT h.status = 'pending' AND h.available_at <= l.available_at"
                + " AND h.destination LIKE ? FROM " + table + " h WHERE h.msg_key = l.msg_key"
                + " AND h.status IN ('pending', 'dead') ORDER BY h.id LIMIT 1))"
                // The order of the V7 index on (available_at, id): the scan stops at the first row
                // available later, so rows waiting for a retry are never read.
                + " ORDER BY l.available_at, l.id LIMIT ? FOR UPDATE SKIP LOCKED) o"
                + " ORDER BY o.available_at, o.id";
    }

    // pgjdbc splits a string of statements and sends them with one Sync: one round trip. An empty
    // relay poll (every relay a commit's NOTIFY wakes but the one that takes its rows) made three, now
    // two; a claim or claim check carries the COMMIT. Only pgjdbc (behind a pool or proxy whose
    // metadata names it, as HikariCP's does): another driver of the PostgreSQL wire protocol
    // (pgjdbc-ng, a vendor's) may refuse a prepared string of several statements, and then gets them
    // one by one.
    @Override
    public boolean statementsTogether(Connection connection) throws SQLException {
        return PGJDBC.equals(connection.getMetaData().getDriverName());
    }

    // org.postgresql.util.DriverInfo.DRIVER_NAME, read here without a compile dependency on pgjdbc
    private static final String PGJDBC = "PostgreSQL JDBC Driver";

    // A rollback to a savepoint ends the subtransaction that took the lock query's row locks, so
    // they are released; this takes back those of the rows the batch keeps. Re-checked: between the
    // two statements another relay may have sent one (no longer pending), failed it (available
    // later) or locked it (skipped).
    @Override
    public String outboxRelock(String prefix) {
        return "SELECT id FROM " + quote(prefix + "outbox")
                + " WHERE id = ANY(?::bigint[]) AND status = 'pending' AND available_at <= ? FOR UPDATE SKIP LOCKED";
    }

    // The lock query gives each row's predecessor (a backward index scan from the row, one entry).
    // The default's form (0, then this statement) read 1.5x the buffers here and was no faster on a
    // 100,000-row backlog (docs/benchmarks.md, "One predecessor path for both databases?").
    @Override
    public String outboxRunRows(String prefix, int keys) {
        return null;
    }

    // One statement for a transaction's rows: WITH ORDINALITY ... ORDER BY n assigns the ids in the
    // order the handler added them, so a key's rows keep their order.
    @Override
    public String outboxInsertAll(String prefix) {
        return "INSERT INTO " + quote(prefix + "outbox")
                + " (event_id, destination, msg_key, payload, headers, idempotency_key, available_at, created_at)"
                + " SELECT t.e, t.d, t.k, t.p, t.h, t.i, ?, ? FROM unnest(?::varchar[], ?::varchar[], ?::varchar[],"
                + " ?::bytea[], ?::text[], ?::varchar[]) WITH ORDINALITY AS t(e, d, k, p, h, i, n) ORDER BY t.n";
    }

    // The mark is planned at each execution: the driver prepares it on the server, where a generic
    // plan is cached after five executions and kept until the table's statistics change. Planned on
    // a new outbox of a few pages, that plan scans the table for the ids (a hash join, the empty
    // delete too) and kept doing so as the table grew to every row sent, until autovacuum's first
    // ANALYZE: 375 against 18-27 µs of server time per message at an offered load (RelayProbe;
    // OutboxMarkPlanTest). A custom plan sees the table's size and the array's length. The lock
    // query keeps its generic plan: its partial indexes serve it at any size.
    @Override
    public String outboxMarkBegin() {
        return "SET LOCAL plan_cache_mode = force_custom_plan";
    }

    // One statement for a whole relay batch: sent rows deleted (when the relay keeps no history)
    // and every other row marked, whichever its outcome. Times arrive as microseconds since the
    // epoch: exact, and free of the driver's time zone handling of timestamp arrays.
    @Override
    public String outboxMarkAll(String prefix) {
        String table = quote(prefix + "outbox");
        return "WITH gone AS (DELETE FROM " + table
                + " WHERE id = ANY(?::bigint[])) UPDATE " + table + " o"
                + " SET status = m.status, attempts = o.attempts + 1,"
                + " sent_at = CASE WHEN m.status = 'sent' THEN m.at ELSE o.sent_at END,"
                + " available_at = CASE WHEN m.status = 'pending' THEN m.at ELSE o.available_at END,"
                + " last_error = m.error, response_status = m.rstatus, response = m.response"
                + " FROM (SELECT u.id, u.status, timestamptz 'epoch' + u.micros * interval '1 microsecond' AS at,"
                + " u.error, u.rstatus, u.response FROM unnest(?::bigint[], ?::varchar[], ?::bigint[], ?::text[],"
                + " ?::int[], ?::text[]) AS u(id, status, micros, error, rstatus, response)) m WHERE o.id = m.id";
    }

    @Override
    public String pruneInbox(String prefix) {
        return chunkedDelete(prefix + "inbox", "processed_at < ?", "consumer", "event_id");
    }

    // What every pruner's chunk is: up to a chunk (the last bind) of the rows matching `where`, found by their key.
    // SKIP LOCKED: a chunk never waits on rows a live transaction is touching (a claim, a relay batch, a key's
    // request, a stream's move), and the row lock re-reads each row it takes as last committed, so a row changed
    // since the chunk's snapshot is deleted only if it still matches.
    private String chunkedDelete(String table, String where, String... key) {
        String quoted = quote(table);
        StringBuilder sql = new StringBuilder("DELETE FROM ")
                .append(quoted)
                .append(" t USING (SELECT ")
                .append(String.join(", ", key))
                .append(" FROM ")
                .append(quoted)
                .append(" WHERE ")
                .append(where)
                .append(" LIMIT ? FOR UPDATE SKIP LOCKED) old WHERE ");
        for (int i = 0; i < key.length; i++) {
            sql.append(i == 0 ? "" : " AND ")
                    .append("t.")
                    .append(key[i])
                    .append(" = old.")
                    .append(key[i]);
        }
        return sql.toString();
    }

    // ctid is the row's physical position. A TID range scan (PostgreSQL 14+) from the previous
    // chunk's last position reads only blocks no earlier chunk has read, where the statement above
    // (and a BRIN on processed_at) starts from the first old block every time and wades through
    // all the dead tuples the earlier chunks left: each chunk got slower as the run went on. The
    // TID scan of the delete then finds each row by its position, with no primary key lookup.
    // max(tid) is PostgreSQL 14+ too; older servers use pruneInbox. The delete checks the cutoff
    // again because a ctid is only unique within one table: on an inbox partitioned by hand (see
    // the README) a position names a row in every partition. There a walk is safe but may leave
    // rows of later partitions for the next run; such an inbox is meant to drop whole partitions.
    @Override
    public String pruneInboxWalking(String prefix, int serverMajorVersion) {
        if (serverMajorVersion < 14) {
            return null;
        }
        String table = quote(prefix + "inbox");
        return "WITH c AS (SELECT ?::timestamptz AS cutoff), d AS (DELETE FROM " + table
                + " WHERE processed_at < (SELECT cutoff FROM c) AND ctid = ANY(ARRAY(SELECT ctid FROM " + table
                + " WHERE processed_at < (SELECT cutoff FROM c) AND ctid > COALESCE(?::tid, '(0,0)') LIMIT ?"
                + " FOR UPDATE SKIP LOCKED)) RETURNING ctid) SELECT count(*), max(ctid)::text FROM d";
    }

    // ON CONFLICT ... DO UPDATE ... WHERE: one statement takes the row lock, checks that the lease
    // is free and increments the token, so two rivals can never both acquire one expiry.
    @Override
    public String leaseAcquire(String prefix) {
        return "INSERT INTO " + quote(prefix + "lease") + " AS l (name, owner, token, expires_at) VALUES (?, ?, 1, ?)"
                + " ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, token = l.token + 1,"
                + " expires_at = EXCLUDED.expires_at WHERE l.owner IS NULL OR l.expires_at <= ? RETURNING token";
    }

    // As the claim's: the SELECT form carries the lock timeout, set before the insert can wait for
    // the key's row (ON CONFLICT waits for a transaction that inserted or updated it). Not put back:
    // the key's transaction is its own, and nothing after the insert in it waits.
    @Override
    public String keyInsert(String prefix, Duration lockWait) {
        return "INSERT INTO " + quote(prefix + "idempotency_key")
                + " (scope, idem_key, fingerprint, state, fencing_token, locked_until, created_at, updated_at)"
                + " SELECT ?, ?, ?, 'processing', 1, ?, ?, ? WHERE " + lockTimeout(lockWait) + ON_CONFLICT;
    }

    // The condition is evaluated once, before the scan hands a row to the lock or the update. It lasts
    // to the transaction's end: the keys run these in transactions of their own, or as the last write
    // of a request's (KeyTransaction), whose later statements wait for nothing (the row is theirs by then).
    @Override
    public String withLockWait(Duration wait, String filtered, String tail) {
        return wait == null ? filtered + tail : filtered + " AND " + lockTimeout(wait) + tail;
    }

    @Override
    public String pruneKeys(String prefix) {
        return chunkedDelete(
                prefix + "idempotency_key",
                "created_at < ? AND (state <> 'processing' OR locked_until < ?)",
                "scope",
                "idem_key");
    }

    @Override
    public String pruneOutbox(String prefix) {
        return chunkedDelete(prefix + "outbox", "status = 'sent' AND sent_at < ?", "id");
    }

    // SKIP LOCKED: a chunk passes the row of a stream a claim transaction is moving (not old once it commits), and
    // takes a row moved since the chunk's snapshot as moved: not deleted. No index on moved_at, on purpose: a move sets
    // position and moved_at and touches no indexed column, so
    // it is a HOT update (no index write); an index on moved_at would make every move a non-HOT update, the price
    // paid on every ordered run to save a scan of a table of one row per stream, once per chunk.
    @Override
    public String pruneStreamPositions(String prefix) {
        return chunkedDelete(prefix + "stream_position", "moved_at < ?", "consumer", "stream");
    }

    // The V4 triggers send pg_notify on this channel once per insert statement and when a dead row is replayed.
    @Override
    public String outboxListen(String prefix) {
        return "LISTEN " + quote(prefix + "outbox");
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
    public String lockMigrations(Duration wait) {
        // pg_advisory_xact_lock blocks until granted and returns void: one row of 1 once it is held.
        return "SELECT 1 FROM pg_advisory_xact_lock(hashtext(?))";
    }

    @Override
    public String unlockMigrations() {
        return null;
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
                + " VALUES (?, ?, ?, ?) ON CONFLICT (consumer_group, topic, partition_no)"
                + " DO UPDATE SET next_offset = EXCLUDED.next_offset";
    }

    @Override
    public String streamPositionAdvance(String prefix) {
        return "UPDATE " + quote(prefix + "stream_position") + " SET position = ?, moved_at = " + PROCESSED_AT
                + " WHERE consumer = ? AND stream = ? AND position < ?";
    }

    @Override
    public String streamPositionInsert(String prefix) {
        return "INSERT INTO " + quote(prefix + "stream_position") + " (consumer, stream, position, moved_at)"
                + " VALUES (?, ?, ?, " + PROCESSED_AT + ") ON CONFLICT (consumer, stream) DO NOTHING";
    }
}
