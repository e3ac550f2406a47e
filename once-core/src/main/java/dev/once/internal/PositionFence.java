package dev.once.internal;

import dev.once.Delivery;
import dev.once.Inbox;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.PermanentFailureException;
import dev.once.StreamPositions;
import dev.once.jdbc.Dialect;
import dev.once.tx.JoinedTransaction;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Clock;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * An ordered run's {@link StreamPositions}, kept in the database: the transaction that applies deliveries of
 * the run moves the stream's stored position forward to the last of them, and refuses when the stream is
 * already at or past the first. It moves after the claim and before the handler: a refused run never runs its
 * handler (what a handler does outside the transaction no rollback undoes), and the position's row lock, held from
 * the move to the commit, makes two transactions of one stream take turns before their handlers: the second sees
 * the first's position as committed. Not API.
 */
final class PositionFence {

    /** An insert race lost twice in a row cannot happen with the row then present; bounded all the same. */
    private static final int MAX_TRIES = 3;

    private final Dialect dialect;
    private final String prefix;
    private final String consumer;
    private final String stream;
    private final Map<String, BigInteger> positions; // by event id, its first delivery's
    private final Clock clock;

    PositionFence(Inbox inbox, String consumer, List<Delivery> deliveries, StreamPositions positions, Clock clock) {
        if (positions.positions().size() != deliveries.size()) {
            throw new IllegalArgumentException(positions.positions().size() + " positions of stream '"
                    + positions.stream() + "' for " + deliveries.size() + " deliveries: expected one per delivery");
        }
        this.dialect = inbox.dialect();
        this.prefix = inbox.tablePrefix();
        this.consumer = consumer;
        this.clock = clock;
        this.stream = positions.stream();
        this.positions = new HashMap<>(deliveries.size() * 4 / 3 + 1);
        for (int i = 0; i < deliveries.size(); i++) {
            this.positions.putIfAbsent(
                    deliveries.get(i).eventId(), positions.positions().get(i));
        }
    }

    /**
     * Why this run must not start in the transaction {@code mine} (the caller's; null: one of the engine's own):
     * another transaction of this thread, open but not the one running now (suspended by Spring's REQUIRES_NEW or
     * NOT_SUPPORTED, or the caller's around an engine of its own transactions), holds the stream's row lock
     * ({@link ClaimsOnThread}), which it keeps until it ends (or, on PostgreSQL, rolls back to a savepoint set
     * before it took it), and it cannot do either before this thread returns: the move would wait for ever (PostgreSQL) or until
     * {@code innodb_lock_wait_timeout} (MariaDB).
     *
     * @return null when the run may start; else the message of the failure to throw
     */
    String lockedOnThread(JoinedTransaction mine) {
        if (!ClaimsOnThread.streamHeldByAnother(mine, prefix, consumer, stream)) {
            return null;
        }
        return "processInOrder of stream '" + stream + "' of consumer '" + consumer + "' while another transaction"
                + " of this thread, open and not the one this call runs in (Spring's REQUIRES_NEW or NOT_SUPPORTED"
                + " inside it, or an engine of its own transactions called in it?), ran the stream and holds its"
                + " position's row lock until it ends, which it cannot before this call returns: the run would wait"
                + " for ever. Nothing ran. Run the stream's deliveries in that transaction, or after it ends";
    }

    /**
     * Moves the stream to the last of {@code claimed} in the caller's transaction {@code tx}, as {@link
     * #advance(Connection, List)} does, noting the stream's row lock the transaction holds from now ({@link
     * ClaimsOnThread}).
     */
    Outcome advance(Transaction tx, List<Delivery> claimed) throws SQLException {
        // moved or refused, the row is locked (PostgreSQL reads a stored position FOR UPDATE; MariaDB's INSERT ...
        // ON DUPLICATE KEY UPDATE locks the row it leaves as it was); noted first, in case the statement fails. A
        // rollback to a savepoint releases it on PostgreSQL, not on MariaDB (the dialect with the one statement) when
        // the row existed: there it is kept to the end, conservative where this move inserted the row
        ClaimsOnThread.lockedStream(
                tx.joinedTransaction(), prefix, consumer, stream, dialect.streamPositionMove(prefix) == null);
        return advance(tx.connection(), claimed);
    }

    /**
     * Moves the stream to the last of {@code claimed} (in run order) on
     * {@code c}, before the handler runs; the row lock it takes is held until the transaction ends.
     *
     * @return null when it moved; else the outcome of the first of {@code claimed} the stream has already
     *     reached (nothing moved; the transaction must not commit)
     */
    Outcome advance(Connection c, List<Delivery> claimed) throws SQLException {
        BigInteger first = positions.get(claimed.get(0).eventId());
        BigInteger last = positions.get(claimed.get(claimed.size() - 1).eventId());
        String move = dialect.streamPositionMove(prefix);
        if (move != null) {
            BigInteger refusedAt = move(c, move, last, first);
            return refusedAt == null ? null : firstBehind(claimed, refusedAt);
        }
        for (int tries = 1; tries <= MAX_TRIES; tries++) {
            if (update(c, last, first) == 1) {
                return null;
            }
            BigInteger stored = stored(c);
            if (stored == null) {
                if (insert(c, last)) {
                    return null;
                }
            } else if (stored.compareTo(first) >= 0) {
                return firstBehind(claimed, stored);
            }
            // a concurrent transaction stored the stream's first position meanwhile: move it again
        }
        throw new SQLException("the position of stream '" + stream + "' of consumer '" + consumer
                + "' kept changing under " + MAX_TRIES + " tries to move it");
    }

    /** The outcome of the first of {@code claimed} at or behind the stream's {@code stored} position. */
    private Outcome firstBehind(List<Delivery> claimed, BigInteger stored) {
        for (Delivery d : claimed) {
            if (positions.get(d.eventId()).compareTo(stored) <= 0) {
                return behind(d, stored);
            }
        }
        throw new IllegalStateException("stream '" + stream + "' of consumer '" + consumer + "' refused at position "
                + stored + ", ahead of every position of the run");
    }

    /**
     * The dialect's one statement that stores or moves the stream, or leaves it as it is ({@link
     * Dialect#streamPositionMove}).
     *
     * @return null when it stored or moved the stream; else the stream's stored position, at or past {@code first}
     */
    private BigInteger move(Connection c, String sql, BigInteger last, BigInteger first) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setString(1, consumer); // 1: consumer
            ps.setString(2, stream); // 2: stream
            ps.setBigDecimal(3, new BigDecimal(last)); // 3: new position
            dialect.bindProcessedAt(ps, 4, clock.instant()); // 4: now
            ps.setBigDecimal(5, new BigDecimal(first)); // 5: the transaction's first position
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    throw new SQLException(
                            "the move of stream '" + stream + "' of consumer '" + consumer + "' answered no row");
                }
                return rs.getInt(1) == 1 ? null : rs.getBigDecimal(2).toBigIntegerExact();
            }
        }
    }

    private int update(Connection c, BigInteger last, BigInteger first) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(dialect.streamPositionAdvance(prefix))) {
            ps.setBigDecimal(1, new BigDecimal(last)); // 1: new position
            dialect.bindProcessedAt(ps, 2, clock.instant()); // 2: now
            ps.setString(3, consumer); // 3: consumer
            ps.setString(4, stream); // 4: stream
            ps.setBigDecimal(5, new BigDecimal(first)); // 5: the transaction's first position
            return ps.executeUpdate();
        }
    }

    private BigInteger stored(Connection c) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(dialect.streamPositionSelect(prefix))) {
            ps.setString(1, consumer); // 1: consumer
            ps.setString(2, stream); // 2: stream
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getBigDecimal(1).toBigIntegerExact() : null;
            }
        }
    }

    private boolean insert(Connection c, BigInteger position) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(dialect.streamPositionInsert(prefix))) {
            ps.setString(1, consumer); // 1: consumer
            ps.setString(2, stream); // 2: stream
            ps.setBigDecimal(3, new BigDecimal(position)); // 3: position
            dialect.bindProcessedAt(ps, 4, clock.instant()); // 4: now
            return ps.executeUpdate() == 1;
        }
    }

    private Outcome behind(Delivery d, BigInteger stored) {
        return new Outcome(
                d.eventId(),
                Status.FAILED_PERMANENT,
                new PermanentFailureException("event '" + d.eventId() + "' not applied: it is at position "
                        + positions.get(d.eventId()) + " of stream '" + stream + "', which consumer '" + consumer
                        + "' has already applied up to position " + stored
                        + ": the stream went on without it (the broker handed out later deliveries: an SQS FIFO queue"
                        + " moves a message to its dead-letter queue after maxReceiveCount receives, also while a"
                        + " process still works on it past its visibility timeout); applied now, it would follow"
                        + " them"));
    }
}
