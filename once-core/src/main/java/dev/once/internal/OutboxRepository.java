package dev.once.internal;

import dev.once.jdbc.Dialect;
import dev.once.outbox.DeadMessage;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxStats;
import dev.once.outbox.Receipt;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * Every read and write of the outbox table by the relay and the admin, on a connection whose
 * transaction the caller runs. The statements come from the {@link Dialect}; this class binds them
 * and reads their rows. Thread-safe. Not API.
 */
public final class OutboxRepository {

    /** Longest recorded error, in characters. */
    static final int MAX_ERROR = 4000;

    /** The savepoint before the lock query, where {@link Dialect#outboxRelock} is given. */
    private static final String LOCK_SAVEPOINT = "once_lock";

    private final String insertSql;
    private final String insertAllSql;
    private final String batchBeginSql;
    private final String lockSql;
    private final String lockPendingSql;
    private final String relockSql;
    private final String markSql;
    private final String markAllSql;
    private final String markBeginSql;
    private final String deleteSql;
    private final String statsSql;
    private final String nextAvailableSql;
    private final String listDeadSql;
    private final String replaySql;
    private final String discardSql;
    private final Dialect dialect;
    private final String prefix;
    // Asked of the first batch's connection and kept, as the consumers ask: one relay, one DataSource.
    private final StatementsTogether multiStatement;

    public OutboxRepository(Dialect dialect, String prefix) {
        this.insertSql = dialect.outboxInsert(prefix);
        this.insertAllSql = dialect.outboxInsertAll(prefix);
        this.batchBeginSql = dialect.outboxBatchBegin();
        this.lockSql = dialect.outboxLockBatch(prefix);
        this.lockPendingSql = dialect.outboxLockPending(prefix);
        this.relockSql = dialect.outboxRelock(prefix);
        this.markSql = dialect.outboxMark(prefix);
        this.markAllSql = dialect.outboxMarkAll(prefix);
        this.markBeginSql = dialect.outboxMarkBegin();
        this.deleteSql = dialect.outboxDelete(prefix);
        this.statsSql = dialect.outboxStats(prefix);
        this.nextAvailableSql = dialect.outboxNextAvailable(prefix);
        this.listDeadSql = dialect.outboxListDead(prefix);
        this.replaySql = dialect.outboxReplay(prefix);
        this.discardSql = dialect.outboxDiscard(prefix);
        this.dialect = dialect;
        this.prefix = prefix;
        this.multiStatement = new StatementsTogether(dialect);
    }

    /** A row to write: what a handler added, its headers encoded. */
    public record NewRow(
            String eventId, String destination, String key, byte[] payload, String headers, String idempotencyKey) {}

    /**
     * Writes rows in one statement (PostgreSQL: one insert over arrays; else one JDBC batch, which
     * MariaDB's driver sends as one bulk round trip), ids in the order given, available now.
     */
    public void insert(Connection c, List<NewRow> rows, Instant now) throws SQLException {
        Timestamp at = Timestamp.from(now);
        if (insertAllSql != null) {
            int n = rows.size();
            String[] eventIds = new String[n];
            String[] destinations = new String[n];
            String[] keys = new String[n];
            byte[][] payloads = new byte[n][];
            String[] headers = new String[n];
            String[] idempotencyKeys = new String[n];
            for (int i = 0; i < n; i++) {
                NewRow r = rows.get(i);
                eventIds[i] = r.eventId();
                destinations[i] = r.destination();
                keys[i] = r.key();
                payloads[i] = r.payload();
                headers[i] = r.headers();
                idempotencyKeys[i] = r.idempotencyKey();
            }
            try (PreparedStatement ps = c.prepareStatement(insertAllSql)) {
                ps.setTimestamp(1, at); // 1 available_at
                ps.setTimestamp(2, at); // 2 created_at
                ps.setArray(3, c.createArrayOf("varchar", eventIds)); // 3 event ids
                ps.setArray(4, c.createArrayOf("varchar", destinations)); // 4 destinations
                ps.setArray(5, c.createArrayOf("varchar", keys)); // 5 keys
                ps.setArray(6, c.createArrayOf("bytea", payloads)); // 6 payloads
                ps.setArray(7, c.createArrayOf("text", headers)); // 7 headers
                ps.setArray(8, c.createArrayOf("varchar", idempotencyKeys)); // 8 idempotency keys
                ps.executeUpdate();
            }
            return;
        }
        try (PreparedStatement ps = c.prepareStatement(insertSql)) {
            for (NewRow r : rows) {
                ps.setString(1, r.eventId()); // 1 event_id
                ps.setString(2, r.destination()); // 2 destination
                ps.setString(3, r.key()); // 3 msg_key
                ps.setBytes(4, r.payload()); // 4 payload
                ps.setString(5, r.headers()); // 5 headers
                ps.setString(6, r.idempotencyKey()); // 6 idempotency_key
                ps.setTimestamp(7, at); // 7 available_at
                ps.setTimestamp(8, at); // 8 created_at
                ps.addBatch();
            }
            ps.executeBatch();
        }
    }

    /** What becomes of one row at the end of its batch. */
    public sealed interface Mark permits Sent, Retry, Dead {
        long id();
    }

    /** Sent: marked {@code sent} with the receipt, or deleted. */
    public record Sent(long id, Instant sentAt, Receipt receipt) implements Mark {}

    /** Failed, to be tried again from {@code availableAt}. */
    public record Retry(long id, Instant availableAt, String error, Receipt receipt) implements Mark {}

    /** Given up on: {@code dead}. */
    public record Dead(long id, String error, Receipt receipt) implements Mark {}

    /** A pending row locked by {@link #lockPending}: its attempts so far and when it is available. */
    public record Pending(long id, int attempts, Instant availableAt) {}

    /**
     * Locks the next sendable rows (see {@link Dialect#outboxLockBatch}), skipping rows others hold;
     * the first statement of the batch's transaction (see {@link Dialect#outboxBatchBegin}). Returns
     * the rows without a key and each key's run: its head and the rows after it, each the key's
     * next pending or dead row after the one before, up to the first gap; in the order locked. A
     * row after a gap is unreturned, so untouched by the batch, and released where the dialect can
     * ({@link Dialect#outboxRelock}), else it stays locked until the batch ends.
     */
    public List<OutboxMessage> lockBatch(Connection c, Instant now, String destinationPattern, int limit)
            throws SQLException {
        return lock(c, now, destinationPattern, limit, false).rows();
    }

    /** What {@link #lockBatchOrNextAvailable} locked, or when it locked nothing, when the next row falls due. */
    public record Locked(List<OutboxMessage> rows, Optional<Instant> nextAvailable) {}

    /**
     * {@link #lockBatch}, and when it returns no row, {@link #nextAvailable} after {@code now} (the lock query's
     * moment: a row is either available by then or counted as falling due after it), in the same transaction: in
     * the lock query's round trip where the driver takes several statements in one string ({@link
     * Dialect#statementsTogether}; run then whatever the lock query finds, one index probe), else after it.
     */
    public Locked lockBatchOrNextAvailable(Connection c, Instant now, String destinationPattern, int limit)
            throws SQLException {
        return lock(c, now, destinationPattern, limit, true);
    }

    private Locked lock(Connection c, Instant now, String destinationPattern, int limit, boolean next)
            throws SQLException {
        String begin = relockSql == null ? batchBeginSql : join(batchBeginSql, "SAVEPOINT " + LOCK_SAVEPOINT);
        // The batch's first statements go with the lock query, the rollback to its savepoint with the relock.
        boolean together = (begin != null || next) && multiStatement.allowed(c);
        if (begin != null && !together) {
            try (Statement s = c.createStatement()) {
                s.execute(begin);
            }
        }
        String sql = together ? join(begin, lockSql) : lockSql;
        List<OutboxMessage> rows = new ArrayList<>();
        Map<Long, Long> preds = new HashMap<>();
        Optional<Instant> nextAvailable = Optional.empty();
        try (PreparedStatement ps = c.prepareStatement(together && next ? join(sql, nextAvailableSql) : sql)) {
            ps.setTimestamp(1, Timestamp.from(now)); // 1 now: rows available by then
            ps.setString(2, destinationPattern); // 2 destination LIKE pattern
            ps.setString(3, destinationPattern); // 3 the same, for the key's head
            ps.setInt(4, limit); // 4 limit
            if (together && next) {
                ps.setTimestamp(5, Timestamp.from(now)); // 5 the next-due read's moment: the lock query's
                ps.setString(6, destinationPattern); // 6 its destination LIKE pattern
            }
            try (ResultSet rs = rowsOf(ps)) {
                while (rs.next()) {
                    OutboxMessage m = message(rs);
                    rows.add(m);
                    long pred = rs.getLong(10);
                    if (!rs.wasNull()) {
                        preds.put(m.id(), pred);
                    }
                }
            }
            if (together && next) {
                if (!ps.getMoreResults()) {
                    throw new SQLException("the outbox next-due query returned no rows result: " + ps);
                }
                try (ResultSet rs = ps.getResultSet()) {
                    nextAvailable = nextAvailable(rs);
                }
            }
        }
        if (preds.containsValue(0L)) {
            readPredecessors(c, rows, preds);
        }
        List<OutboxMessage> kept = runs(rows, preds);
        if (kept.size() != rows.size() && relockSql != null) {
            kept = relock(c, kept, preds, now, together);
        }
        if (!next || !kept.isEmpty()) {
            return new Locked(kept, Optional.empty());
        }
        return new Locked(kept, together ? nextAvailable : nextAvailable(c, now, destinationPattern));
    }

    private static String join(String first, String second) {
        return first == null ? second : first + "; " + second;
    }

    // The result set of a prepared string whose last statement is a query, after the update counts
    // of the statements before it (statementsTogether).
    private static ResultSet rowsOf(PreparedStatement ps) throws SQLException {
        boolean rows = ps.execute();
        while (!rows) {
            if (ps.getUpdateCount() == -1) {
                throw new SQLException("the outbox lock query returned no rows result: " + ps);
            }
            rows = ps.getMoreResults();
        }
        return ps.getResultSet();
    }

    // The lock query locked rows the batch does not send (a key's rows after a gap: typically their
    // key's head is in another relay's batch). Held to this batch's end, they were skipped by the
    // relay that sent their key's head and looked again after its commit, so they waited for this
    // batch's sends too, unrelated to theirs. Released here, and the kept rows locked again; a kept
    // row lost in between (sent, failed or locked by another relay meanwhile) ends its key's run.
    private List<OutboxMessage> relock(
            Connection c, List<OutboxMessage> kept, Map<Long, Long> preds, Instant now, boolean together)
            throws SQLException {
        String rollback = "ROLLBACK TO SAVEPOINT " + LOCK_SAVEPOINT;
        if (kept.isEmpty() || !together) {
            try (Statement s = c.createStatement()) {
                s.execute(rollback);
            }
        }
        if (kept.isEmpty()) {
            return kept;
        }
        Set<Long> locked = new HashSet<>();
        try (PreparedStatement ps = c.prepareStatement(together ? join(rollback, relockSql) : relockSql)) {
            ps.setArray(
                    1,
                    c.createArrayOf(
                            "bigint", kept.stream().map(OutboxMessage::id).toArray())); // 1 ids
            ps.setTimestamp(2, Timestamp.from(now)); // 2 now
            try (ResultSet rs = rowsOf(ps)) {
                while (rs.next()) {
                    locked.add(rs.getLong(1));
                }
            }
        }
        if (locked.size() == kept.size()) {
            return kept;
        }
        return runs(kept.stream().filter(m -> locked.contains(m.id())).toList(), preds);
    }

    // Where the lock query gave a row's predecessor as 0 (see Dialect#outboxRunRows): reads the
    // key's pending and dead rows from its first row in the batch (its head, else the key has no
    // run) to its last, each row's predecessor the one before it among them.
    private void readPredecessors(Connection c, List<OutboxMessage> rows, Map<Long, Long> preds) throws SQLException {
        Map<String, long[]> ranges = new HashMap<>(); // key -> first id, last id in the batch
        for (OutboxMessage m : rows) {
            if (m.key() != null) {
                ranges.merge(m.key(), new long[] {m.id(), m.id()}, (a, b) ->
                        new long[] {Math.min(a[0], b[0]), Math.max(a[1], b[1])});
            }
        }
        ranges.entrySet().removeIf(e -> e.getValue()[0] == e.getValue()[1] || preds.get(e.getValue()[0]) != null);
        if (ranges.isEmpty()) {
            return;
        }
        Map<String, List<Long>> unsent = new HashMap<>();
        try (PreparedStatement ps = c.prepareStatement(dialect.outboxRunRows(prefix, ranges.size()))) {
            int i = 1;
            for (Map.Entry<String, long[]> e : ranges.entrySet()) {
                ps.setString(i++, e.getKey()); // key
                ps.setLong(i++, e.getValue()[0]); // above its head
                ps.setLong(i++, e.getValue()[1]); // up to its last row in the batch
            }
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    unsent.computeIfAbsent(rs.getString(1), k -> new ArrayList<>())
                            .add(rs.getLong(2));
                }
            }
        }
        for (Map.Entry<String, long[]> e : ranges.entrySet()) {
            List<Long> ids = unsent.getOrDefault(e.getKey(), new ArrayList<>());
            ids.sort(null);
            long before = e.getValue()[0];
            for (long id : ids) {
                if (preds.containsKey(id)) {
                    preds.put(id, before);
                }
                before = id;
            }
        }
    }

    // Walks each key in id order from its head; the first row whose predecessor is not the row
    // kept before it (held elsewhere, refused, past the limit) ends the key's run.
    private static List<OutboxMessage> runs(List<OutboxMessage> rows, Map<Long, Long> preds) {
        List<OutboxMessage> byId = new ArrayList<>(rows);
        byId.sort(Comparator.comparingLong(OutboxMessage::id));
        Map<String, Long> last = new HashMap<>();
        Set<String> ended = new HashSet<>();
        Set<Long> kept = new HashSet<>();
        for (OutboxMessage m : byId) {
            if (m.key() == null) {
                kept.add(m.id());
            } else if (!ended.contains(m.key()) && Objects.equals(preds.get(m.id()), last.get(m.key()))) {
                last.put(m.key(), m.id());
                kept.add(m.id());
            } else {
                ended.add(m.key());
            }
        }
        return kept.size() == rows.size()
                ? rows
                : rows.stream().filter(m -> kept.contains(m.id())).toList();
    }

    /** Locks one row if it is still pending and nobody else holds it; empty otherwise. */
    public Optional<Pending> lockPending(Connection c, long id) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(lockPendingSql)) {
            ps.setLong(1, id); // 1 id
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next()
                        ? Optional.of(
                                new Pending(id, rs.getInt(1), rs.getTimestamp(2).toInstant()))
                        : Optional.empty();
            }
        }
    }

    /**
     * Records the end of each row's attempt; every mark counts one attempt. One statement for the
     * whole list on PostgreSQL (arrays); one JDBC batch elsewhere, plus one for deletions.
     *
     * @param deleteSent true to delete sent rows rather than mark them
     */
    public void mark(Connection c, List<? extends Mark> marks, boolean deleteSent) throws SQLException {
        if (marks.isEmpty()) {
            return;
        }
        if (markAllSql != null) {
            markAll(c, marks, deleteSent);
            return;
        }
        int updates = 0;
        int deletes = 0;
        try (PreparedStatement mark = c.prepareStatement(markSql);
                PreparedStatement delete = c.prepareStatement(deleteSql)) {
            for (Mark m : marks) {
                if (m instanceof Sent && deleteSent) {
                    delete.setLong(1, m.id()); // 1 id
                    delete.addBatch();
                    deletes++;
                    continue;
                }
                mark.setString(1, status(m)); // 1 status
                mark.setTimestamp(2, m instanceof Sent s ? Timestamp.from(s.sentAt()) : null); // 2 sent_at
                mark.setTimestamp(3, m instanceof Retry r ? Timestamp.from(r.availableAt()) : null); // 3 available_at
                mark.setString(4, truncate(error(m))); // 4 last_error
                Receipt receipt = receipt(m);
                if (receipt == null) {
                    mark.setNull(5, Types.INTEGER); // 5 response_status
                    mark.setNull(6, Types.VARCHAR); // 6 response
                } else {
                    mark.setInt(5, receipt.status());
                    mark.setString(6, receipt.body());
                }
                mark.setLong(7, m.id()); // 7 id
                mark.addBatch();
                updates++;
            }
            if (updates > 0) {
                mark.executeBatch();
            }
            if (deletes > 0) {
                delete.executeBatch();
            }
        }
    }

    private void markAll(Connection c, List<? extends Mark> marks, boolean deleteSent) throws SQLException {
        List<Long> deleted = new ArrayList<>();
        List<Mark> updated = new ArrayList<>(marks.size());
        for (Mark m : marks) {
            if (m instanceof Sent && deleteSent) {
                deleted.add(m.id());
            } else {
                updated.add(m);
            }
        }
        int n = updated.size();
        Long[] ids = new Long[n];
        String[] statuses = new String[n];
        Long[] micros = new Long[n];
        String[] errors = new String[n];
        Integer[] statusCodes = new Integer[n];
        String[] responses = new String[n];
        for (int i = 0; i < n; i++) {
            Mark m = updated.get(i);
            ids[i] = m.id();
            statuses[i] = status(m);
            Instant at = m instanceof Sent s ? s.sentAt() : m instanceof Retry r ? r.availableAt() : null;
            micros[i] = at == null ? null : ChronoUnit.MICROS.between(Instant.EPOCH, at);
            errors[i] = truncate(error(m));
            Receipt receipt = receipt(m);
            statusCodes[i] = receipt == null ? null : receipt.status();
            responses[i] = receipt == null ? null : receipt.body();
        }
        boolean together = markBeginSql != null && multiStatement.allowed(c);
        if (markBeginSql != null && !together) {
            try (Statement s = c.createStatement()) {
                s.execute(markBeginSql);
            }
        }
        try (PreparedStatement ps = c.prepareStatement(together ? join(markBeginSql, markAllSql) : markAllSql)) {
            ps.setArray(1, c.createArrayOf("bigint", deleted.toArray())); // 1 ids to delete
            ps.setArray(2, c.createArrayOf("bigint", ids)); // 2 ids
            ps.setArray(3, c.createArrayOf("varchar", statuses)); // 3 statuses
            ps.setArray(4, c.createArrayOf("bigint", micros)); // 4 sent_at or available_at, µs since the epoch
            ps.setArray(5, c.createArrayOf("text", errors)); // 5 last_error
            ps.setArray(6, c.createArrayOf("int4", statusCodes)); // 6 response_status
            ps.setArray(7, c.createArrayOf("text", responses)); // 7 response
            ps.executeUpdate();
        }
    }

    private static String status(Mark m) {
        return m instanceof Sent ? "sent" : m instanceof Retry ? "pending" : "dead";
    }

    private static String error(Mark m) {
        return m instanceof Retry r ? r.error() : m instanceof Dead d ? d.error() : null;
    }

    private static Receipt receipt(Mark m) {
        return m instanceof Sent s ? s.receipt() : m instanceof Retry r ? r.receipt() : ((Dead) m).receipt();
    }

    /** Pending rows, the age of the oldest one at {@code now}, and dead rows. */
    public OutboxStats stats(Connection c, Instant now) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(statsSql);
                ResultSet rs = ps.executeQuery()) {
            rs.next();
            long pending = rs.getLong(1);
            Timestamp oldest = rs.getTimestamp(2);
            long dead = rs.getLong(3);
            Duration lag = oldest == null ? Duration.ZERO : Duration.between(oldest.toInstant(), now);
            return new OutboxStats(pending, lag.isNegative() ? Duration.ZERO : lag, dead);
        }
    }

    /** When the first pending row of the destinations matching {@code destinationPattern} falls due after {@code now}. */
    public Optional<Instant> nextAvailable(Connection c, Instant now, String destinationPattern) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(nextAvailableSql)) {
            ps.setTimestamp(1, Timestamp.from(now)); // 1 after this
            ps.setString(2, destinationPattern); // 2 destination LIKE pattern
            try (ResultSet rs = ps.executeQuery()) {
                return nextAvailable(rs);
            }
        }
    }

    private static Optional<Instant> nextAvailable(ResultSet rs) throws SQLException {
        return rs.next() ? Optional.of(rs.getTimestamp(1).toInstant()) : Optional.empty();
    }

    /** Dead rows with an id above {@code afterId}, in id order. */
    public List<DeadMessage> dead(Connection c, long afterId, int limit) throws SQLException {
        List<DeadMessage> result = new ArrayList<>();
        try (PreparedStatement ps = c.prepareStatement(listDeadSql)) {
            ps.setLong(1, afterId); // 1 after id
            ps.setInt(2, limit); // 2 limit
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    result.add(new DeadMessage(message(rs), rs.getString(10), rs.getInt(11)));
                }
            }
        }
        return result;
    }

    /** Dead rows back to pending, attempts reset, available at {@code now}; returns how many were dead. */
    public int replay(Connection c, Collection<Long> ids, Instant now) throws SQLException {
        int replayed = 0;
        try (PreparedStatement ps = c.prepareStatement(replaySql)) {
            for (long id : ids) {
                ps.setTimestamp(1, Timestamp.from(now)); // 1 available_at
                ps.setLong(2, id); // 2 id
                replayed += ps.executeUpdate();
            }
        }
        return replayed;
    }

    /** Deletes dead rows; returns how many were dead. */
    public int discard(Connection c, Collection<Long> ids) throws SQLException {
        int discarded = 0;
        try (PreparedStatement ps = c.prepareStatement(discardSql)) {
            for (long id : ids) {
                ps.setLong(1, id); // 1 id
                discarded += ps.executeUpdate();
            }
        }
        return discarded;
    }

    // The first nine columns of Dialect.outboxLockBatch.
    private static OutboxMessage message(ResultSet rs) throws SQLException {
        String eventId = rs.getString(2);
        Map<String, String> headers = HeaderCodec.decode(rs.getString(6));
        // The event id travels with every send, whoever wrote the row and whatever headers it gave.
        headers.put(OutboxMessage.EVENT_ID_HEADER, eventId);
        Timestamp created = rs.getTimestamp(9);
        return new OutboxMessage(
                rs.getLong(1),
                eventId,
                rs.getString(3),
                rs.getString(4),
                rs.getBytes(5),
                headers,
                rs.getString(7),
                rs.getInt(8),
                created == null ? null : created.toInstant());
    }

    private static String truncate(String s) {
        return s == null || s.length() <= MAX_ERROR ? s : s.substring(0, MAX_ERROR);
    }
}
