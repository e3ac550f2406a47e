package dev.once.internal;

import dev.once.Delivery;
import dev.once.Inbox;
import dev.once.jdbc.Dialect;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Clock;
import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The claims of an engine whose {@link dev.once.MismatchPolicy} keeps payload fingerprints: the
 * {@link Inbox} claims with a fingerprint column written, and the read of the fingerprints stored
 * by earlier claims, which runs only for duplicates. Thread-safe. Not API.
 */
final class FingerprintedClaims {

    private final Dialect dialect;
    private final String prefix;
    private final Duration lockTimeout;
    private final Clock clock;
    private final String claimSql;
    private final LockTimeoutRestore restore;
    private final Map<Integer, String> claimBatchSql = new ConcurrentHashMap<>();
    private final Map<Integer, String> storedSql = new ConcurrentHashMap<>();

    FingerprintedClaims(Inbox inbox, Clock clock, StatementsTogether together) {
        this.dialect = inbox.dialect();
        this.prefix = inbox.tablePrefix();
        this.lockTimeout = inbox.lockTimeout().orElse(null);
        this.clock = clock;
        this.claimSql = dialect.claimWithFingerprint(prefix, lockTimeout);
        this.restore = new LockTimeoutRestore(dialect, lockTimeout, together);
    }

    /**
     * The first 8 bytes of the payload's SHA-256, or null for an empty payload (nothing to compare:
     * an adapter that hands over no body). 64 bits: a reused id goes unnoticed with odds of 2^-64.
     */
    static Long of(Delivery d) {
        byte[] payload = d.payload();
        if (payload.length == 0) {
            return null;
        }
        try {
            return ByteBuffer.wrap(MessageDigest.getInstance("SHA-256").digest(payload))
                    .getLong();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java platform has SHA-256", e);
        }
    }

    /** A fingerprint as it is logged: 16 hex digits, the digest's first 8 bytes in order. */
    static String hex(long fingerprint) {
        return String.format("%016x", fingerprint);
    }

    /** {@link Inbox#claim}, keeping {@code fingerprint} (null: none) with the claim. */
    boolean claim(Connection c, String consumer, String eventId, Long fingerprint) throws SQLException {
        boolean claimed;
        try (PreparedStatement ps = c.prepareStatement(restore.claim(c, claimSql))) {
            ps.setString(1, consumer); // 1 consumer
            ps.setString(2, eventId); // 2 event_id
            dialect.bindProcessedAt(ps, 3, clock.instant()); // 3 processed_at
            ps.setObject(4, fingerprint, Types.BIGINT); // 4 payload_fingerprint
            ps.execute(); // the first result is the insert's count; the lock timeout's restore may follow
            claimed = ps.getUpdateCount() == 1;
        }
        restore.afterClaim(c);
        return claimed;
    }

    /**
     * {@link Inbox#claimAll}, keeping each id's fingerprint: ids in sorted order and chunks, so
     * overlapping batches lock in one order.
     *
     * @param fingerprints the ids to claim, each with its fingerprint or null
     */
    Set<String> claimAll(Connection c, String consumer, Map<String, Long> fingerprints) throws SQLException {
        String[] ids = fingerprints.keySet().toArray(new String[0]);
        Arrays.sort(ids);
        Set<String> claimed = new HashSet<>(ids.length * 2);
        if (!dialect.supportsBatchClaim()) {
            for (String id : ids) {
                if (claim(c, consumer, id, fingerprints.get(id))) {
                    claimed.add(id);
                }
            }
            return claimed;
        }
        Timestamp now = Timestamp.from(clock.instant());
        int chunk = dialect.maxBatchClaimSize();
        for (int from = 0; from < ids.length; from += chunk) {
            String[] part = Arrays.copyOfRange(ids, from, Math.min(ids.length, from + chunk));
            Long[] prints = new Long[part.length];
            for (int i = 0; i < part.length; i++) {
                prints[i] = fingerprints.get(part[i]);
            }
            String sql = claimBatchSql.computeIfAbsent(
                    part.length, n -> dialect.claimBatchWithFingerprints(prefix, lockTimeout, n));
            try (PreparedStatement ps = c.prepareStatement(restore.claim(c, sql))) {
                dialect.bindBatchClaimWithFingerprints(ps, consumer, now, part, prints);
                ps.execute(); // the first result is the claimed ids; the lock timeout's restore may follow
                try (ResultSet rs = ps.getResultSet()) {
                    while (rs.next()) {
                        claimed.add(rs.getString(1));
                    }
                }
            }
            restore.afterClaim(c);
        }
        return claimed;
    }

    /**
     * The fingerprints earlier claims of {@code ids} stored, in one statement per chunk; an id
     * whose claim kept none (or is gone) is absent. Run only for ids a claim found taken.
     */
    Map<String, Long> stored(Connection c, String consumer, Collection<String> ids) throws SQLException {
        String[] all = ids.toArray(new String[0]);
        Map<String, Long> stored = new HashMap<>();
        int chunk = dialect.maxBatchClaimSize();
        for (int from = 0; from < all.length; from += chunk) {
            String[] part = from == 0 && all.length <= chunk
                    ? all
                    : Arrays.copyOfRange(all, from, Math.min(all.length, from + chunk));
            String sql = storedSql.computeIfAbsent(part.length, n -> dialect.storedFingerprints(prefix, n));
            try (PreparedStatement ps = c.prepareStatement(sql)) {
                dialect.bindStoredFingerprints(ps, consumer, part);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        long fingerprint = rs.getLong(2);
                        if (!rs.wasNull()) {
                            stored.put(rs.getString(1), fingerprint);
                        }
                    }
                }
            }
        }
        return stored;
    }
}
