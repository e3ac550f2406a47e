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
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Every read and write of the outbox table by the relay and the admin, on a connection whose
 * transaction the caller runs. The statements come from the {@link Dialect}; this class binds them
 * and reads their rows. Stateless and thread-safe. Not API.
 */
public final class OutboxRepository {

    /** Longest recorded error, in characters. */
    static final int MAX_ERROR = 4000;

    private final String insertSql;
    private final String insertAllSql;
    private final String lockSql;
    private final String lockPendingSql;
    private final String sentSql;
    private final String deleteSql;
    private final String retrySql;
    private final String deadSql;
    private final String statsSql;
    private final String listDeadSql;
    private final String replaySql;
    private final String discardSql;

    public OutboxRepository(Dialect dialect, String prefix) {
        this.insertSql = dialect.outboxInsert(prefix);
        this.insertAllSql = dialect.outboxInsertAll(prefix);
        this.lockSql = dialect.outboxLockBatch(prefix);
        this.lockPendingSql = dialect.outboxLockPending(prefix);
        this.sentSql = dialect.outboxMarkSent(prefix);
        this.deleteSql = dialect.outboxDelete(prefix);
        this.retrySql = dialect.outboxRetry(prefix);
        this.deadSql = dialect.outboxDead(prefix);
        this.statsSql = dialect.outboxStats(prefix);
        this.listDeadSql = dialect.outboxListDead(prefix);
        this.replaySql = dialect.outboxReplay(prefix);
        this.discardSql = dialect.outboxDiscard(prefix);
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

    /** Locks the next sendable rows (see {@link Dialect#outboxLockBatch}), skipping rows others hold. */
    public List<OutboxMessage> lockBatch(Connection c, Instant now, String destinationPattern, int limit)
            throws SQLException {
        List<OutboxMessage> rows = new ArrayList<>();
        try (PreparedStatement ps = c.prepareStatement(lockSql)) {
            ps.setTimestamp(1, Timestamp.from(now)); // 1 now: rows available by then
            ps.setString(2, destinationPattern); // 2 destination LIKE pattern
            ps.setInt(3, limit); // 3 limit
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    rows.add(message(rs));
                }
            }
        }
        return rows;
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
     * Records the end of each row's attempt; every mark counts one attempt.
     *
     * @param deleteSent true to delete sent rows rather than mark them
     */
    public void mark(Connection c, List<? extends Mark> marks, boolean deleteSent) throws SQLException {
        try (PreparedStatement ok = c.prepareStatement(deleteSent ? deleteSql : sentSql);
                PreparedStatement retry = c.prepareStatement(retrySql);
                PreparedStatement dead = c.prepareStatement(deadSql)) {
            int sent = 0;
            int retried = 0;
            int died = 0;
            for (Mark m : marks) {
                if (m instanceof Sent s) {
                    if (deleteSent) {
                        ok.setLong(1, s.id()); // 1 id
                    } else {
                        ok.setTimestamp(1, Timestamp.from(s.sentAt())); // 1 sent_at
                        setReceipt(ok, 2, s.receipt()); // 2 status, 3 response
                        ok.setLong(4, s.id()); // 4 id
                    }
                    ok.addBatch();
                    sent++;
                } else if (m instanceof Retry r) {
                    retry.setTimestamp(1, Timestamp.from(r.availableAt())); // 1 available_at
                    retry.setString(2, truncate(r.error())); // 2 last_error
                    setReceipt(retry, 3, r.receipt()); // 3 status, 4 response
                    retry.setLong(5, r.id()); // 5 id
                    retry.addBatch();
                    retried++;
                } else if (m instanceof Dead d) {
                    dead.setString(1, truncate(d.error())); // 1 last_error
                    setReceipt(dead, 2, d.receipt()); // 2 status, 3 response
                    dead.setLong(4, d.id()); // 4 id
                    dead.addBatch();
                    died++;
                }
            }
            if (sent > 0) {
                ok.executeBatch();
            }
            if (retried > 0) {
                retry.executeBatch();
            }
            if (died > 0) {
                dead.executeBatch();
            }
        }
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

    // The column order of Dialect.outboxLockBatch.
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

    private static void setReceipt(PreparedStatement ps, int index, Receipt receipt) throws SQLException {
        if (receipt == null) {
            ps.setNull(index, Types.INTEGER);
            ps.setNull(index + 1, Types.VARCHAR);
        } else {
            ps.setInt(index, receipt.status());
            ps.setString(index + 1, receipt.body());
        }
    }

    private static String truncate(String s) {
        return s == null || s.length() <= MAX_ERROR ? s : s.substring(0, MAX_ERROR);
    }
}
