package dev.once.jdbc;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.Collections;
import java.util.List;

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
     * holds the same id, or, when it is null, as long as the session's own {@code lock_timeout}
     * allows. Binds: 1 consumer, 2 message id, 3 processed_at ({@link #bindProcessedAt}). Executed with
     * {@code execute}; the update count is 1 when claimed, 0 when an earlier delivery committed it.
     * The timeout is a validated {@link Duration}, written into the statement as a number, and bounds
     * the claim only: the transaction's statements after it keep their own timeout, put back by
     * {@link #restoreLockTimeout} where the claim changed the session's.
     */
    String claim(String prefix, Duration lockTimeout);

    /**
     * Puts back the session's lock timeout after a claim given one of its own ({@link #claim}, {@link
     * #claimNew}, {@link #claimBatch}, {@link #claimBatchAllNew}, their fingerprinted forms), once the
     * claim succeeded; null where the claim's timeout ends with the claim by itself. Sent in one string
     * after the claim where {@link #statementsTogether} (no round trip of its own), else alone after it.
     */
    default String restoreLockTimeout() {
        return null;
    }

    /**
     * Binds a claim's processed_at ({@link #claim}, {@link #claimWithFingerprint}); once per claim, so
     * its cost on the client counts on the per-message path.
     */
    default void bindProcessedAt(PreparedStatement statement, int index, Instant processedAt) throws SQLException {
        statement.setTimestamp(index, Timestamp.from(processedAt));
    }

    /**
     * Run after the handler, before the commit: proves that the claim of one event id was made by
     * the transaction still open, so committing commits the claim with the effect. Binds: 1 consumer,
     * 2 event id. Answers one row: 1 when it holds, 0 when the claim is gone (the database rolled the
     * transaction back, a deadlock victim whose handler went on). Or fails:
     * {@link #isAbortedTransaction} when a failed statement aborted the transaction,
     * {@link #isClaimMissing} when the claim is not this transaction's.
     */
    String verifyClaim(String prefix);

    /**
     * {@link #verifyClaim} for the {@code n} distinct ids one batch transaction claimed: every one must
     * still be its own claim. Bound by {@link #bindVerifyClaims}. Answers one row: {@code n} when all
     * hold, less when a claim is gone; or fails as {@link #verifyClaim} does.
     */
    default String verifyClaims(String prefix, int n) {
        return "SELECT count(*) FROM " + quote(prefix + "inbox") + " WHERE consumer = ? AND event_id IN ("
                + String.join(", ", Collections.nCopies(n, "?")) + ")";
    }

    /** Binds {@link #verifyClaims}: the consumer and the ids. */
    default void bindVerifyClaims(PreparedStatement statement, String consumer, List<String> eventIds)
            throws SQLException {
        statement.setString(1, consumer);
        for (int i = 0; i < eventIds.size(); i++) {
            statement.setString(i + 2, eventIds.get(i));
        }
    }

    /** {@link #verifyClaims} followed by {@code COMMIT}, as {@link #verifyClaimAndCommit}; null where it cannot be. */
    default String verifyClaimsAndCommit(String prefix, int n) {
        return null;
    }

    /**
     * {@link #verifyClaim} followed by {@code COMMIT} in one statement string, so the check costs no
     * round trip of its own: the commit runs only when the check passed. Null where the database cannot
     * run both at once; sent only where {@link #statementsTogether}, else the check runs alone before the
     * commit.
     */
    default String verifyClaimAndCommit(String prefix) {
        return null;
    }

    /**
     * The database rolled the whole transaction back when it reported {@code e} (a deadlock victim on
     * MariaDB), and statements after it run in a new transaction: a claim made before is gone for
     * certain, whatever a later check reads (a copy another transaction committed meanwhile included).
     * False where an error leaves the transaction to be ended by its owner (PostgreSQL aborts it, and
     * the claim check finds that).
     */
    default boolean endsTransaction(SQLException e) {
        return false;
    }

    /** The transaction was aborted by an earlier failed statement; a commit would only roll it back. */
    default boolean isAbortedTransaction(SQLException e) {
        return false;
    }

    /** {@link #verifyClaim} found no claim made by the open transaction. */
    default boolean isClaimMissing(SQLException e) {
        return false;
    }

    /** True when many ids can be claimed by one statement that returns the claimed ones ({@link #claimBatch}). */
    boolean supportsBatchClaim();

    /** The most ids one {@link #claimBatch} statement takes; a larger batch is claimed in sorted chunks of it. */
    default int maxBatchClaimSize() {
        return Integer.MAX_VALUE;
    }

    /**
     * Claims {@code size} ids in one statement, in the order bound (callers sort them, so
     * overlapping batches take their locks in one order and cannot deadlock), returning the ids it
     * inserted as its one column. Bound by {@link #bindBatchClaim}. Executed with {@code execute};
     * its result is the claimed ids. A lock timeout is bounded and put back as {@link #claim}'s.
     */
    String claimBatch(String prefix, Duration lockTimeout, int size);

    /**
     * {@link #claimBatch} for ids expected to be new, as the first statement of a transaction the
     * engine owns: inserts every id or fails with a unique violation ({@link #isUniqueViolation}),
     * after which the engine rolls back and claims with {@link #claimBatch}. Bound like it; executed
     * with {@code execute}, returning no rows. Null where the dialect has none.
     */
    default String claimBatchAllNew(String prefix, Duration lockTimeout, int size) {
        return null;
    }

    /**
     * {@link #claim} for an id expected to be new, as the first statement of a transaction the engine
     * owns: a plain insert that fails with a unique violation ({@link #isUniqueViolation}) when the id
     * was claimed before, after which the engine rolls back (the transaction holds nothing else) and
     * reports a duplicate. A concurrent transaction holding the id makes it wait as {@link #claim}
     * does, up to the same lock timeout. Bound like {@link #claim}; executed with {@code execute}.
     * Null where the dialect has none, or where it would cost no less than {@link #claim}.
     */
    default String claimNew(String prefix, Duration lockTimeout) {
        return null;
    }

    /**
     * {@link #claimNew} for one consumer, its name written into the statement as a string literal: binds 1
     * event_id, 2 processed_at. The engine builds it once per consumer, and the driver then binds and encodes
     * two values per claim instead of three (the consumer's name was the same on every claim). {@code consumer}
     * has been validated (a consumer name); the literal is escaped all the same. Null where the dialect has
     * none: the engine then binds the consumer to {@link #claimNew}.
     */
    default String claimNewFor(String prefix, Duration lockTimeout, String consumer) {
        return null;
    }

    /**
     * The claim of one id as a plain insert (no {@code ON CONFLICT}, no {@code IGNORE}), for
     * {@link dev.once.ClaimTiming#AT_COMMIT}: sent after the handler, it fails on the inbox's key when
     * the id was claimed before, and the transaction rolls back. Binds: 1 consumer, 2 event_id,
     * 3 processed_at ({@link #bindProcessedAt}). Null where the dialect has none.
     */
    default String claimAtCommit(String prefix) {
        return null;
    }

    /**
     * {@link #claimAtCommit} followed by {@code COMMIT} in one statement string, bound the same way: one
     * round trip, and the server runs the COMMIT only when the insert succeeded. Null where it cannot be;
     * sent only where {@link #statementsTogether}.
     */
    default String claimAtCommitAndCommit(String prefix) {
        return null;
    }

    /**
     * The claim at commit of a transaction the caller's integration owns
     * ({@link dev.once.tx.TransactionProvider#dedicated()}), where no read of the inbox after the rollback
     * can be made by the engine: the insert must tell by itself that the id was claimed before. It waits
     * for a copy in progress as a plain insert does, and fails with {@link #isClaimMissing} when the id is
     * taken (so a COMMIT folded after it never runs), never with a unique violation, which a deferred
     * constraint of the handler's own tables raises at the COMMIT. Binds as {@link #claimAtCommit}. Null
     * where the dialect cannot keep it: on MariaDB a deadlock rolls the transaction back and statements
     * the handler runs outside the guarded connection go on in a new one, whose commit this claim would
     * make look whole.
     */
    default String claimAtJoinedCommit(String prefix) {
        return null;
    }

    /** {@link #claimAtJoinedCommit} followed by {@code COMMIT} in one statement string; null where it cannot be. */
    default String claimAtJoinedCommitAndCommit(String prefix) {
        return null;
    }

    /** A unique constraint refused a row: for {@link #claimBatchAllNew}, an id was claimed before. */
    default boolean isUniqueViolation(SQLException e) {
        return false;
    }

    /** Binds {@link #claimBatch}'s parameters: the consumer, the processed_at stamp and the sorted ids. */
    void bindBatchClaim(PreparedStatement statement, String consumer, Timestamp processedAt, String[] sortedIds)
            throws SQLException;

    /**
     * {@link #claim} that also keeps the payload's fingerprint ({@link dev.once.MismatchPolicy}
     * other than OFF). Binds: 1 consumer, 2 event id, 3 processed_at, 4 payload_fingerprint
     * (bigint, null for a delivery without payload). Executed and answered like {@link #claim}.
     */
    String claimWithFingerprint(String prefix, Duration lockTimeout);

    /**
     * {@link #claimBatch} that also keeps each id's payload fingerprint, bound by
     * {@link #bindBatchClaimWithFingerprints}; returns the ids it inserted, like {@link #claimBatch}.
     */
    String claimBatchWithFingerprints(String prefix, Duration lockTimeout, int size);

    /** Binds {@link #claimBatchWithFingerprints}: as {@link #bindBatchClaim}, plus a fingerprint (or null) per id. */
    void bindBatchClaimWithFingerprints(
            PreparedStatement statement,
            String consumer,
            Timestamp processedAt,
            String[] sortedIds,
            Long[] fingerprints)
            throws SQLException;

    /**
     * Reads the payload fingerprints of {@code size} ids a claim just found claimed by an earlier
     * transaction, bound by {@link #bindStoredFingerprints}. Columns: event_id, payload_fingerprint
     * (null for a claim made without one). It must see the committed claim the insert conflicted
     * with, even in a transaction whose snapshot is older (MariaDB's REPEATABLE READ). At most
     * {@link #maxBatchClaimSize} ids.
     */
    String storedFingerprints(String prefix, int size);

    /** Binds {@link #storedFingerprints}: the consumer and the ids. */
    void bindStoredFingerprints(PreparedStatement statement, String consumer, String[] ids) throws SQLException;

    /** Guarded transition on already-validated identifiers. Binds: 1 to, 2 id, 3 from. */
    default String transition(String table, String idColumn, String statusColumn) {
        return "UPDATE " + table + " SET " + statusColumn + " = ? WHERE " + idColumn + " = ? AND " + statusColumn
                + " = ?";
    }

    /**
     * Records a fencing token unless a newer one is already recorded, and keeps the newest.
     * Binds: 1 resource, 2 token, 3 updated_at. The row stays locked until the transaction ends,
     * so {@link #newestFence} read right after it is the truth for this transaction.
     */
    String fence(String prefix);

    /**
     * Reads the newest accepted token with a locking read, which sees the latest committed row
     * rather than the transaction's snapshot (REPEATABLE READ). Binds: 1 resource.
     */
    default String newestFence(String prefix) {
        return "SELECT token FROM " + quote(prefix + "fence") + " WHERE resource = ? FOR UPDATE";
    }

    /**
     * Inserts one outbox row (run as a JDBC batch where {@link #outboxInsertAll} is null). Binds:
     * 1 event_id, 2 destination, 3 msg_key, 4 payload, 5 headers, 6 idempotency_key, 7 available_at,
     * 8 created_at.
     */
    default String outboxInsert(String prefix) {
        return "INSERT INTO " + quote(prefix + "outbox")
                + " (event_id, destination, msg_key, payload, headers, idempotency_key, available_at, created_at)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    }

    /**
     * Inserts many outbox rows in one statement over arrays, ids in array order; null where the
     * dialect has no array binds. Binds: 1 available_at, 2 created_at, then arrays of 3 event_id,
     * 4 destination, 5 msg_key, 6 payload (bytea), 7 headers, 8 idempotency_key.
     */
    default String outboxInsertAll(String prefix) {
        return null;
    }

    /**
     * Deletes up to a chunk of inbox rows processed before a cutoff. Binds: 1 cutoff, 2 chunk size.
     * Bounded so that pruning a large backlog never holds locks or bloats one transaction.
     */
    String pruneInbox(String prefix);

    /**
     * Deletes up to a chunk of inbox rows processed before a cutoff that lie after a position in
     * the table's physical order, so that one run walks forward and never reads again the rows its
     * earlier chunks deleted (they stay in the table as dead tuples until vacuum). Binds: 1 cutoff,
     * 2 the position (text: null for the first chunk, then the previous chunk's), 3 chunk size.
     * Executed as a query: one row of the rows deleted and the position of the last one (null when
     * none). A run must start from null every time: a row that committed late with an old stamp
     * may lie behind any position an earlier run reached.
     *
     * @param serverMajorVersion the server's major version, from the driver's metadata
     * @return the statement, or null when this dialect or server version cannot walk (then
     *         {@link #pruneInbox} is the statement)
     */
    String pruneInboxWalking(String prefix, int serverMajorVersion);

    // ---- leases (dev.once.lease) -------------------------------------------------------------

    /**
     * Acquires a lease that is free (never taken, released, or expired by {@code now}), incrementing
     * its token, in one atomic statement; a lease held unexpired is refused, to its own owner too.
     * Executed as a query: one row whose first column is the new token when acquired; no row, or a
     * NULL token, when the lease is held. Binds: 1 name, 2 owner, 3 expires_at, 4 now.
     */
    String leaseAcquire(String prefix);

    /**
     * Extends a lease still held with the given token. Binds: 1 expires_at, 2 name, 3 token, 4 owner.
     * 1 row: renewed; 0: released or taken over since.
     */
    default String leaseRenew(String prefix) {
        return "UPDATE " + quote(prefix + "lease") + " SET expires_at = ? WHERE name = ? AND token = ? AND owner = ?";
    }

    /** Frees a lease held with the given token, keeping the token. Binds: 1 name, 2 token, 3 owner. */
    default String leaseRelease(String prefix) {
        return "UPDATE " + quote(prefix + "lease") + " SET owner = NULL, expires_at = NULL"
                + " WHERE name = ? AND token = ? AND owner = ?";
    }

    // ---- idempotency keys (dev.once.keys) ------------------------------------------------------

    /**
     * Inserts a new key in state {@code processing} with token 1, or nothing when the key exists,
     * waiting at most {@code lockWait} for a transaction that inserted, updated or locked the key
     * (then it fails with {@link #isLockTimeout}). Run in a transaction of its own: the bound may
     * outlast the statement to the transaction's end. Binds: 1 scope, 2 key, 3 fingerprint,
     * 4 locked_until, 5 created_at, 6 updated_at. 1 row: started.
     */
    String keyInsert(String prefix, Duration lockWait);

    /**
     * Reads and locks one key until the transaction ends, waiting at most {@code lockWait} for
     * another transaction's lock on it ({@link #isLockTimeout}), as {@link #keyInsert}. Binds: 1 scope,
     * 2 key. Columns: fingerprint, state, result_status, result, fencing_token, locked_until.
     */
    default String keySelectForUpdate(String prefix, Duration lockWait) {
        return withLockWait(
                lockWait,
                "SELECT fingerprint, state, result_status, result, fencing_token, locked_until FROM "
                        + quote(prefix + "idempotency_key") + " WHERE scope = ? AND idem_key = ?",
                " FOR UPDATE");
    }

    /**
     * The statement {@code filtered + tail}, its lock waits bounded by {@code wait}, or, when it is
     * null, left to the session's own timeout; the same mechanism as the claim's lock timeout
     * ({@link #claim}), except that nothing puts the session's value back: run it, as
     * {@link #keyInsert}, in a transaction of its own, or as a transaction's last write, where the
     * bound may last to the end.
     * {@code filtered} ends in the conditions of a WHERE clause, which a dialect may extend;
     * {@code tail} (a locking clause, or nothing) follows them.
     */
    String withLockWait(Duration wait, String filtered, String tail);

    /**
     * Takes over a key whose claim expired or whose last attempt failed retryably: state back to
     * {@code processing}, token incremented. Binds: 1 locked_until, 2 updated_at, 3 scope, 4 key,
     * 5 the token read under the lock.
     */
    default String keyRestart(String prefix) {
        return "UPDATE " + quote(prefix + "idempotency_key") + " SET state = 'processing',"
                + " fencing_token = fencing_token + 1, locked_until = ?, updated_at = ?, result_status = NULL,"
                + " result = NULL WHERE scope = ? AND idem_key = ? AND fencing_token = ?";
    }

    /**
     * Records the outcome of a claim, fenced: only the holder of the key's current claim, while the
     * key is still processing, moves it. A claim is its token and its {@code locked_until} together:
     * a key pruned after its claim lapsed and then claimed anew starts again at token 1, so the token
     * alone would let the pruned claim's stalled holder finish its successor's. {@code locked_until}
     * is kept after the finish, so that a refused finish can still tell "already finished" from
     * "claimed anew". Binds: 1 state, 2 result_status, 3 result, 4 updated_at, 5 scope, 6 key,
     * 7 token, 8 locked_until. 1 row: recorded; 0: not this claim's to finish (see {@link #keyToken}).
     * Waits at most {@code lockWait} for another transaction's lock on the key, as {@link #keyInsert},
     * or, when it is null (the caller's transaction), as long as the session's timeout allows.
     */
    default String keyFinish(String prefix, Duration lockWait) {
        return withLockWait(
                lockWait,
                "UPDATE " + quote(prefix + "idempotency_key") + " SET state = ?, result_status = ?, result = ?,"
                        + " updated_at = ? WHERE scope = ? AND idem_key = ? AND fencing_token = ? AND locked_until = ?"
                        + " AND state = 'processing'",
                "");
    }

    /** The current claim of a key, to explain a rejected finish. Binds: 1 scope, 2 key. Columns: fencing_token, locked_until. */
    default String keyToken(String prefix) {
        return "SELECT fencing_token, locked_until FROM " + quote(prefix + "idempotency_key")
                + " WHERE scope = ? AND idem_key = ?";
    }

    /**
     * Deletes up to a chunk of keys created before a cutoff, sparing claims still held.
     * Binds: 1 cutoff, 2 now, 3 chunk size.
     */
    String pruneKeys(String prefix);

    /**
     * Run first in each pruner chunk's transaction, before its delete ({@link #pruneInbox}, {@link #pruneKeys},
     * {@link #pruneOutbox}, {@link #pruneStreamPositions}), or null for nothing. MariaDB's sets READ COMMITTED for
     * that transaction: under REPEATABLE READ the delete's scan locks every index record it reads together with the
     * gap before it (next-key locks) and keeps the locks of the rows it does not delete, so that a new claim or a new
     * stream's first run inserting into a scanned gap, or a move of a stream the chunk keeps, waited for the chunk's
     * commit.
     */
    default String pruneChunkBegin() {
        return null;
    }

    // ---- outbox relay (dev.once.outbox) --------------------------------------------------------

    /**
     * Run first in a relay's batch transaction, before {@link #outboxLockBatch}, or null for nothing.
     * MariaDB's sets READ COMMITTED for that transaction: under REPEATABLE READ the lock query's
     * range scan takes gap locks, which SKIP LOCKED does not skip, so a relay's batch waited for the
     * batch another relay held (to the lock wait timeout) instead of passing its rows.
     */
    default String outboxBatchBegin() {
        return null;
    }

    /**
     * Locks the next sendable rows, oldest available first (available_at, then id), skipping rows
     * other relays hold: pending, available, matching a destination pattern, and of a key whose
     * head (its oldest pending or dead row) is pending, matches the pattern and comes no later in
     * that order (is available no later than the row). So a key's head and the rows right after it
     * go in one batch (a key run), a failed head blocks its own key and no other, and a dead one
     * blocks it until it is replayed (then sent first) or discarded. A head available later than
     * the rows behind it (it waits or waited for a retry) goes alone: the scan meets those rows
     * first, and a batch full of rows whose head it had not reached would send nothing.
     * The relay keeps of each key the run from its head on, each row's predecessor (the
     * {@code pred} column) the row before it in the batch; a row after a gap (its predecessor held
     * by another relay, not matching the pattern or past the limit) is untouched, and released
     * where {@link #outboxRelock} is given (else it stays locked until the batch ends).
     * Binds: 1 now, 2 destination LIKE pattern (escape character backslash), 3 the same pattern,
     * 4 limit. Columns: id, event_id, destination, msg_key, payload, headers, idempotency_key,
     * attempts, created_at, pred (the id of the key's newest pending or dead row older than this
     * one; null for the head or a row without a key; 0 where {@link #outboxRunRows} reads it).
     */
    default String outboxLockBatch(String prefix) {
        String table = quote(prefix + "outbox");
        // The key's head is its oldest pending row when no dead row is older: an ORDER BY id LIMIT 1
        // on the (msg_key, status, id) index reads one entry. A row's predecessor is not read here:
        // MariaDB reads a correlated "newest older row" from the key's end down (the whole backlog
        // for each row); see outboxRunRows.
        return "SELECT o.id, o.event_id, o.destination, o.msg_key, o.payload, o.headers, o.idempotency_key,"
                + " o.attempts, o.created_at, CASE WHEN o.msg_key IS NULL OR o.id = (SELECT f.id FROM " + table
                + " f WHERE f.msg_key = o.msg_key AND f.status = 'pending' ORDER BY f.id LIMIT 1) THEN NULL ELSE 0"
                + " END AS pred FROM " + table + " o"
                + " WHERE o.status = 'pending' AND o.available_at <= ? AND o.destination LIKE ?"
                + " AND (o.msg_key IS NULL OR EXISTS (SELECT 1 FROM " + table + " h"
                + " WHERE h.id = (SELECT f.id FROM " + table + " f WHERE f.msg_key = o.msg_key"
                + " AND f.status = 'pending' ORDER BY f.id LIMIT 1) AND h.available_at <= o.available_at"
                + " AND h.destination LIKE ? AND NOT EXISTS (SELECT 1 FROM " + table + " d"
                + " WHERE d.msg_key = o.msg_key AND d.status = 'dead' AND d.id < h.id)))"
                // The order of the V7 index on (available_at, id): the scan stops at the first row
                // available later, so rows waiting for a retry are never read.
                + " ORDER BY o.available_at, o.id LIMIT ? FOR UPDATE SKIP LOCKED";
    }

    /**
     * True when {@code connection}'s driver takes several statements in one prepared string and
     * sends them in one round trip (pgjdbc does; MariaDB Connector/J only with {@code
     * allowMultiQueries}; another driver of the same database may refuse such a string). Only then
     * does the relay send {@link #outboxBatchBegin} and its savepoint with the lock query, and the
     * rollback to that savepoint with {@link #outboxRelock}, one round trip each instead of two, and
     * after a batch that sent rows {@link #outboxNextAvailable} with the next lock query; does a
     * consumer send a claim or claim check with the {@code COMMIT} folded in ({@link
     * #claimAtCommitAndCommit}, {@link #claimAtJoinedCommitAndCommit}, {@link #verifyClaimAndCommit},
     * {@link #verifyClaimsAndCommit}); and does a claim carry {@link #restoreLockTimeout}. Asked by each
     * relay, consumer and inbox of its first connection and kept, as all its connections come from one
     * DataSource. It must not query the database.
     *
     * @throws SQLException if the connection's metadata cannot be read
     */
    default boolean statementsTogether(Connection connection) throws SQLException {
        return false;
    }

    /**
     * Locks again the rows a batch keeps of those {@link #outboxLockBatch} locked, after a rollback
     * to a savepoint taken before the lock query released them all; null where such a rollback does
     * not release row locks (InnoDB keeps the locks taken after a savepoint until the transaction
     * ends), and there a row after a gap stays locked, unsent, until the batch ends. Where it is
     * given, a row the batch does not send is not held by it: it is free for the relay that sends
     * its key next, which would otherwise skip it until this batch's sends are acknowledged.
     * Binds: 1 the ids (an array of bigint), 2 now. Columns: id, of the rows still pending,
     * available and free.
     */
    default String outboxRelock(String prefix) {
        return null;
    }

    /**
     * The pending and dead rows of {@code keys} keys, each in an id range: what the relay reads the
     * predecessors of a batch's key runs from where {@link #outboxLockBatch} gives them as 0; null
     * where it gives them itself. Binds per key: key, above id, up to id. Columns: msg_key, id.
     */
    default String outboxRunRows(String prefix, int keys) {
        StringBuilder sql = new StringBuilder("SELECT msg_key, id FROM ")
                .append(quote(prefix + "outbox"))
                .append(" WHERE status IN ('pending', 'dead') AND (");
        for (int i = 0; i < keys; i++) {
            sql.append(i == 0 ? "" : " OR ").append("(msg_key = ? AND id > ? AND id <= ?)");
        }
        return sql.append(")").toString();
    }

    /**
     * Locks one row if it is still pending and no other transaction holds it. Binds: 1 id.
     * Columns: attempts, available_at.
     */
    default String outboxLockPending(String prefix) {
        return "SELECT attempts, available_at FROM " + quote(prefix + "outbox")
                + " WHERE id = ? AND status = 'pending' FOR UPDATE SKIP LOCKED";
    }

    /**
     * Records the end of one row's attempt, whichever it was (run as one JDBC batch for a whole
     * relay batch where {@link #outboxMarkAll} is null); counts the attempt. Sent: status
     * {@code sent} with sent_at; retry: status {@code pending} with the next available_at; dead:
     * status {@code dead}. Binds: 1 status, 2 sent_at (null unless sent), 3 available_at (null
     * unless retried), 4 last_error (nullable), 5 response_status (nullable), 6 response (nullable), 7 id.
     */
    default String outboxMark(String prefix) {
        return "UPDATE " + quote(prefix + "outbox") + " SET status = ?, attempts = attempts + 1,"
                + " sent_at = COALESCE(?, sent_at), available_at = COALESCE(?, available_at), last_error = ?,"
                + " response_status = ?, response = ? WHERE id = ?";
    }

    /**
     * {@link #outboxMark} for a whole batch in one statement over arrays, with the deletion of sent
     * rows (relays keeping no history) in the same statement; null where the dialect has no array
     * binds. Binds: 1 ids to delete, then arrays of 2 id, 3 status, 4 time in microseconds since
     * the epoch (sent_at when sent, available_at when retried, ignored when dead), 5 last_error,
     * 6 response_status, 7 response.
     */
    default String outboxMarkAll(String prefix) {
        return null;
    }

    /**
     * A statement without binds the relay runs in the batch's transaction right before {@link
     * #outboxMarkAll}, with it in one string where {@link #statementsTogether} (PostgreSQL: the
     * mark planned at each execution); null for none.
     */
    default String outboxMarkBegin() {
        return null;
    }

    /** Deletes a sent row (relays configured to keep no history). Binds: 1 id. */
    default String outboxDelete(String prefix) {
        return "DELETE FROM " + quote(prefix + "outbox") + " WHERE id = ?";
    }

    /**
     * Lists dead rows from an id on. Binds: 1 after id, 2 limit. Columns: the first nine of
     * {@link #outboxLockBatch}, then last_error, response_status.
     */
    default String outboxListDead(String prefix) {
        return "SELECT id, event_id, destination, msg_key, payload, headers, idempotency_key, attempts, created_at,"
                + " last_error, response_status FROM " + quote(prefix + "outbox")
                + " WHERE status = 'dead' AND id > ? ORDER BY id LIMIT ?";
    }

    /** Sends a dead row again: pending, attempts reset. Binds: 1 available_at, 2 id. 1 row: replayed. */
    default String outboxReplay(String prefix) {
        return "UPDATE " + quote(prefix + "outbox") + " SET status = 'pending', attempts = 0, available_at = ?,"
                + " last_error = NULL WHERE id = ? AND status = 'dead'";
    }

    /** Deletes a dead row, which frees its key without sending it. Binds: 1 id. 1 row: discarded. */
    default String outboxDiscard(String prefix) {
        return "DELETE FROM " + quote(prefix + "outbox") + " WHERE id = ? AND status = 'dead'";
    }

    /**
     * The available_at of the pending row of a destination that falls due first after a moment, if any: when a
     * started relay must poll at the latest (nothing notifies it when a retry falls due). Binds: 1 the moment, 2
     * destination LIKE pattern. The order of the V7 index on (available_at, id): it reads from the moment on and
     * stops at the first row of the destination. Run in the transaction of a lock query that found nothing, with the
     * same moment; where {@link #statementsTogether}, in that query's string (one round trip), whatever it finds.
     */
    default String outboxNextAvailable(String prefix) {
        return "SELECT available_at FROM " + quote(prefix + "outbox")
                + " WHERE status = 'pending' AND available_at > ? AND destination LIKE ?"
                + " ORDER BY available_at, id LIMIT 1";
    }

    /** One row: pending count, created_at of the oldest pending row (null if none), dead count. */
    default String outboxStats(String prefix) {
        String table = quote(prefix + "outbox");
        return "SELECT (SELECT count(*) FROM " + table + " WHERE status = 'pending'),"
                + " (SELECT created_at FROM " + table + " WHERE status = 'pending' ORDER BY id LIMIT 1),"
                + " (SELECT count(*) FROM " + table + " WHERE status = 'dead')";
    }

    /**
     * Deletes up to a chunk of sent rows older than a cutoff. Binds: 1 cutoff, 2 chunk size.
     */
    String pruneOutbox(String prefix);

    /**
     * Subscribes the connection to wake-ups sent when outbox rows become pending, or null when the
     * dialect has none (relays then poll).
     */
    default String outboxListen(String prefix) {
        return null;
    }

    /**
     * True when the database reads SQL the MySQL way: backslash escapes in string literals,
     * {@code "..."} as a string, {@code #} starting a comment. The engine's guard needs it to find
     * where one statement of a handler's SQL ends.
     */
    default boolean mysqlLexing() {
        return false;
    }

    /**
     * SQL states, error codes: a statement waited longer than its lock timeout (the claim's for a
     * concurrent duplicate, an idempotency key's lock wait) or the session's.
     */
    boolean isLockTimeout(SQLException e);

    /** Deadlock or serialization failure: the whole transaction may be retried. */
    boolean isTransientConflict(SQLException e);

    /**
     * Serializes concurrent migrations of one prefix; released by {@link #unlockMigrations} or,
     * where that returns null, by the end of the transaction. Binds: 1 the lock name. Answers one
     * row whose first column is 1 when the lock was granted; anything else (0 when {@code wait} ran
     * out, NULL on an error) means it was not. A transaction lock may ignore {@code wait} and block
     * until the holder's transaction ends (bounded by the session's lock timeout).
     */
    String lockMigrations(Duration wait);

    /** Releases the migration lock, or null when the lock ends with the transaction. Binds: 1 the lock name. */
    String unlockMigrations();

    /** Counts the rows of the inbox, for the {@code once.inbox.rows} gauge the pruner keeps after each run. */
    String countInboxRows(String prefix);

    /**
     * The inbox's row count ({@code inbox_rows}) and oldest claim ({@code oldest_claim}, null when empty), in one scan,
     * for an operator's on-demand view (the Spring Boot Actuator endpoint), not for a scrape.
     */
    String inboxStats(String prefix);

    /**
     * Sets a partition's next Kafka offset (once-kafka, offsets in the claim transaction).
     * Binds: 1 consumer group, 2 topic, 3 partition, 4 next offset.
     */
    String kafkaOffsetUpsert(String prefix);

    /**
     * Which of {@code n} event ids have a claim this transaction can see: committed, or its own
     * (once-kafka: whether the records before one in its partition are settled; a claim another
     * transaction holds and has not committed is not seen). Binds: 1 consumer, 2..n+1 event ids.
     */
    default String inboxClaimedAmong(String prefix, int n) {
        return "SELECT event_id FROM " + quote(prefix + "inbox") + " WHERE consumer = ? AND event_id IN ("
                + String.join(", ", Collections.nCopies(n, "?")) + ")";
    }

    /**
     * Moves an ordered stream's stored position, as the fence of a run, in one statement: stores the stream at the
     * last position a transaction applied when it has no row yet, moves it there when it is behind the transaction's
     * first position, else leaves it as it is, holding the row's lock either way. Where a locking read or update of
     * a missing key locks the gap around it (InnoDB), so that the first runs of other new streams would wait on it or
     * deadlock, this replaces {@link #streamPositionAdvance}, {@link #streamPositionSelect} and {@link
     * #streamPositionInsert}; null where those lock no more than the key (PostgreSQL). Binds: 1 consumer, 2 stream,
     * 3 new position, 4 now ({@link #bindProcessedAt}), 5 the transaction's first position. Answers one row: 1 when
     * the row was stored or moved, else 0; the stream's position after the statement.
     */
    default String streamPositionMove(String prefix) {
        return null;
    }

    /**
     * Moves an ordered stream's stored position forward to the last position a transaction applied, unless the
     * stream is already at or past its first ({@link dev.once.StreamPositions}): one row updated when it moved.
     * Binds: 1 new position, 2 now ({@link #bindProcessedAt}), 3 consumer, 4 stream, 5 the transaction's first
     * position.
     */
    default String streamPositionAdvance(String prefix) {
        return "UPDATE " + quote(prefix + "stream_position")
                + " SET position = ?, moved_at = ? WHERE consumer = ? AND stream = ? AND position < ?";
    }

    /**
     * Stores a stream's first position, unless a concurrent transaction stored one first (then no row is
     * inserted and nothing fails). Binds: 1 consumer, 2 stream, 3 position, 4 now ({@link #bindProcessedAt}).
     */
    default String streamPositionInsert(String prefix) {
        return "INSERT INTO " + quote(prefix + "stream_position") + " (consumer, stream, position, moved_at)"
                + " VALUES (?, ?, ?, ?) ON CONFLICT (consumer, stream) DO NOTHING";
    }

    /**
     * A stream's stored position, locked, as committed now (a locking read sees past the transaction's snapshot).
     * Binds: 1 consumer, 2 stream.
     */
    default String streamPositionSelect(String prefix) {
        return "SELECT position FROM " + quote(prefix + "stream_position")
                + " WHERE consumer = ? AND stream = ? FOR UPDATE";
    }

    /**
     * Deletes up to a chunk of stream positions last moved before a cutoff ({@code moved_at}), for
     * {@link dev.once.retention.StreamPositionPruner}, never one a move is committing. Binds: 1 cutoff, 2 chunk size.
     */
    String pruneStreamPositions(String prefix);

    /** A consumer group's stored Kafka offsets: topic, partition_no, next_offset. Binds: 1 consumer group. */
    default String kafkaOffsetSelect(String prefix) {
        return "SELECT topic, partition_no, next_offset FROM " + quote(prefix + "kafka_offsets")
                + " WHERE consumer_group = ?";
    }
}
