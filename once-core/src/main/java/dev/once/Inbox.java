package dev.once;

import dev.once.internal.Chunks;
import dev.once.internal.LockTimeoutRestore;
import dev.once.internal.Names;
import dev.once.internal.StatementsTogether;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.TablePrefix;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The claim, as a primitive usable inside any transaction the caller already manages (plain
 * JDBC, Spring's {@code @Transactional}, jOOQ). {@link IdempotentConsumer} is built on it.
 *
 * <pre>{@code
 * if (inbox.claim(connection, "billing", event.id())) {
 *     // first time: apply the effect on the same connection, then commit
 * }   // else an earlier delivery committed it: do nothing, acknowledge
 * }</pre>
 *
 * <p>The claim is one atomic insert under the primary key {@code (consumer, event_id)}. A
 * concurrent claim of the same id waits for the first transaction to end and then reports
 * false; if it waits longer than the lock timeout (this inbox's, or else the session's own
 * {@code lock_timeout}) the driver throws the dialect's lock-timeout error ({@link Dialect#isLockTimeout}). A lock
 * timeout of the inbox's own is put back after the claim ({@link Dialect#restoreLockTimeout}), in the claim's round trip
 * where the first connection's driver takes several statements in one string ({@link Dialect#statementsTogether}),
 * else in one of its own: give an inbox connections of one driver. Immutable and thread-safe; the connection must not be in
 * auto-commit mode, or the claim commits on its own and the effect is no longer atomic with it.
 */
public final class Inbox {

    private final Dialect dialect;
    private final String prefix;
    private final Duration lockTimeout;
    private final Clock clock;
    private final String claimSql;
    private final LockTimeoutRestore restore;
    // Batch claim statements by batch size (one entry on PostgreSQL, whose statement binds an array).
    private final Map<Integer, String> claimBatchSql = new ConcurrentHashMap<>();
    // The last consumer name that passed validation: a consumer claims under one name, so the regex
    // runs once rather than on every claim (it was a Matcher and a regex match per event). A race
    // only repeats a validation; Strings are safely published.
    private volatile String validatedConsumer;

    private Inbox(Dialect dialect, String prefix, Duration lockTimeout, Clock clock) {
        this.dialect = dialect;
        this.prefix = prefix;
        this.lockTimeout = lockTimeout;
        this.clock = clock;
        this.claimSql = dialect.claim(prefix, lockTimeout);
        this.restore = new LockTimeoutRestore(dialect, lockTimeout, new StatementsTogether(dialect));
    }

    /** An inbox on the default prefix, with no lock timeout of its own. */
    public static Inbox of(Dialect dialect) {
        return of(dialect, TablePrefix.DEFAULT, null, Clock.systemUTC());
    }

    /**
     * @param lockTimeout how long a claim waits for a concurrent duplicate, or null to leave it to
     *                    the session's {@code lock_timeout}
     * @throws InvalidConfigurationException for a bad prefix or a lock timeout outside 1 ms to 1 hour
     */
    public static Inbox of(Dialect dialect, String prefix, Duration lockTimeout, Clock clock) {
        Objects.requireNonNull(dialect, "dialect");
        Objects.requireNonNull(clock, "clock");
        return new Inbox(dialect, TablePrefix.validate(prefix), validLockTimeout(lockTimeout), clock);
    }

    static Duration validLockTimeout(Duration lockTimeout) {
        if (lockTimeout == null) {
            return null;
        }
        if (lockTimeout.toMillis() < 1 || lockTimeout.compareTo(Duration.ofHours(1)) > 0) {
            throw new InvalidConfigurationException("lockTimeout must be between 1ms and 1h, but was " + lockTimeout
                    + ": it bounds how long a concurrent duplicate waits before it is reported IN_PROGRESS");
        }
        return lockTimeout;
    }

    private void validConsumer(String consumer) {
        if (consumer == null || !consumer.equals(validatedConsumer)) {
            validatedConsumer = Names.consumer(consumer);
        }
    }

    public Dialect dialect() {
        return dialect;
    }

    public String tablePrefix() {
        return prefix;
    }

    /** This inbox's lock timeout; empty when the session's {@code lock_timeout} applies. */
    public Optional<Duration> lockTimeout() {
        return Optional.ofNullable(lockTimeout);
    }

    /**
     * Claims {@code eventId} for {@code consumer} in the caller's transaction.
     *
     * @return true if this transaction claimed it (apply the effect), false if an earlier
     *         committed transaction did (skip, acknowledge)
     * @throws SQLException the driver's error; a lock timeout means a concurrent duplicate is still running
     */
    public boolean claim(Connection connection, String consumer, String eventId) throws SQLException {
        validConsumer(consumer);
        Delivery.validEventId(eventId);
        boolean claimed;
        try (PreparedStatement ps = connection.prepareStatement(restore.claim(connection, claimSql))) {
            ps.setString(1, consumer); // 1 consumer
            ps.setString(2, eventId); // 2 event_id
            dialect.bindProcessedAt(ps, 3, clock.instant()); // 3 processed_at
            ps.execute(); // the first result is the insert's count; the lock timeout's restore may follow
            claimed = ps.getUpdateCount() == 1;
        }
        restore.afterClaim(connection);
        return claimed;
    }

    /**
     * Which of {@code eventIds} are claimed for {@code consumer} as {@code connection} sees the inbox: claims
     * committed, and its own transaction's; a claim another transaction holds and has not committed is not
     * visible. One statement; for telling a copy from a failure after the fact, not for claiming.
     */
    public Set<String> claimedAmong(Connection connection, String consumer, Collection<String> eventIds)
            throws SQLException {
        Set<String> found = new HashSet<>();
        if (eventIds.isEmpty()) {
            return found;
        }
        try (PreparedStatement ps = connection.prepareStatement(dialect.inboxClaimedAmong(prefix, eventIds.size()))) {
            ps.setString(1, consumer); // 1 consumer
            int i = 2;
            for (String id : eventIds) {
                ps.setString(i++, id); // 2..n+1 event ids
            }
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    found.add(rs.getString(1));
                }
            }
        }
        return found;
    }

    private String claimBatchSql(int size) {
        return claimBatchSql.computeIfAbsent(size, n -> dialect.claimBatch(prefix, lockTimeout, n));
    }

    /**
     * Claims many ids in the caller's transaction. Duplicates in the input count once. Ids are
     * claimed in sorted order, so two transactions claiming overlapping sets cannot deadlock.
     *
     * @return the ids this transaction claimed; the others were claimed by earlier transactions
     */
    public Set<String> claimAll(Connection connection, String consumer, Collection<String> eventIds)
            throws SQLException {
        validConsumer(consumer);
        TreeSet<String> sorted = new TreeSet<>();
        for (String id : eventIds) {
            sorted.add(Delivery.validEventId(id));
        }
        if (sorted.isEmpty()) {
            return Set.of();
        }
        if (!dialect.supportsBatchClaim()) {
            Set<String> claimed = new HashSet<>();
            for (String id : sorted) {
                if (claim(connection, consumer, id)) {
                    claimed.add(id);
                }
            }
            return claimed;
        }
        Set<String> claimed = new HashSet<>(sorted.size() * 2);
        String[] ids = sorted.toArray(new String[0]);
        Timestamp now = Timestamp.from(clock.instant());
        // Chunks in ascending order keep the one global lock order of a single statement.
        for (String[] part : Chunks.of(ids, dialect.maxBatchClaimSize())) {
            try (PreparedStatement ps =
                    connection.prepareStatement(restore.claim(connection, claimBatchSql(part.length)))) {
                dialect.bindBatchClaim(ps, consumer, now, part);
                ps.execute(); // the first result is the claimed ids; the lock timeout's restore may follow
                try (ResultSet rs = ps.getResultSet()) {
                    while (rs.next()) {
                        claimed.add(rs.getString(1));
                    }
                }
            }
            restore.afterClaim(connection);
        }
        return claimed;
    }
}
