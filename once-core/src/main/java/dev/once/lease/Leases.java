package dev.once.lease;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.internal.JdbcTarget;
import dev.once.jdbc.JdbcBuilder;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Objects;
import java.util.Optional;

/**
 * Leases with fencing tokens on the {@code once_lease} table: a lock with an expiry, so a crashed
 * holder never keeps it forever, and a token that grows with every acquisition, so a holder that
 * was paused past its expiry can be told apart from its successor.
 *
 * <pre>{@code
 * Leases leases = Leases.builder().dataSource(ds).build();
 * Optional<Lease> lease = leases.acquire("nightly-settlement", "worker-7", Duration.ofSeconds(30));
 * lease.ifPresent(l -> {
 *     ... every protected write: Fence.check(connection, "settlement", l.token()) ...
 *     leases.release(l);
 * });
 * }</pre>
 *
 * <p>An expired lease does not stop its holder: a paused process resumes unaware. What protects the
 * data is the token checked by the resource ({@link Fence#check}); renew well before the expiry
 * to keep the lease and stop working when a renewal fails. Expiry is judged by this object's
 * clock against the stored expiry, so every instance sharing a lease must use clocks that agree
 * (the system clock, or in tests the same injected clock).
 *
 * <p>Immutable and thread-safe. Every call is one short transaction of its own, on a connection that
 * must arrive in auto-commit: one that does not belongs to someone else's transaction (a
 * transaction-aware proxy) and is refused ({@link OnceException}) rather than switched, which would
 * commit that transaction. PostgreSQL and MariaDB (Galera included: a conflicting acquisition on
 * another node fails certification at commit and is tried again); expiries are kept to the
 * microsecond, what both store.
 */
public final class Leases {

    /** Longest accepted time to live: past a day a lease is a configuration mistake, not a lock. */
    public static final Duration MAX_TTL = Duration.ofDays(1);
    /** Longest accepted lease name and owner, in characters (the column size). */
    public static final int MAX_NAME_LENGTH = 255;

    // Certification refuses all but one of the acquisitions racing on different Galera nodes; the
    // loser's next attempt reads the winner's row and is refused, so a third conflict is unlikely.
    private static final int ACQUIRE_ATTEMPTS = 3;

    private final JdbcTarget target;
    private final Clock clock;
    private final String acquireSql;
    private final String renewSql;
    private final String releaseSql;

    private Leases(JdbcTarget target) {
        this.target = target;
        this.clock = target.clock();
        this.acquireSql = target.dialect().leaseAcquire(target.tablePrefix());
        this.renewSql = target.dialect().leaseRenew(target.tablePrefix());
        this.releaseSql = target.dialect().leaseRelease(target.tablePrefix());
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The clock that stamps expiries. */
    public Clock clock() {
        return clock;
    }

    /**
     * Acquires {@code name} for {@code owner} if nobody holds it (never taken, released, or expired),
     * with a token one larger than the previous acquisition's.
     *
     * @return the lease, or empty when another owner (or this owner, earlier) holds it unexpired
     * @throws InvalidConfigurationException for a blank or too long name or owner, or a ttl outside 1 ms
     *         to {@link #MAX_TTL}
     * @throws OnceException if the database fails; whether the lease was taken is then unknown, and
     *         it lapses by itself after {@code ttl}
     */
    public Optional<Lease> acquire(String name, String owner, Duration ttl) {
        validName("lease name", name);
        validName("lease owner", owner);
        validTtl(ttl);
        SQLException last = null;
        // A deadlock, or on Galera a certification conflict with a rival's acquisition on another
        // node, rolled the whole transaction back: nothing was acquired, and trying again decides it.
        for (int attempt = 0; attempt < ACQUIRE_ATTEMPTS; attempt++) {
            Instant now = microseconds(clock.instant());
            Instant expiresAt = microseconds(now.plus(ttl));
            try {
                return target.inTransaction(c -> {
                    try (PreparedStatement ps = c.prepareStatement(acquireSql)) {
                        ps.setString(1, name); // 1 name
                        ps.setString(2, owner); // 2 owner
                        ps.setTimestamp(3, Timestamp.from(expiresAt)); // 3 expires_at
                        ps.setTimestamp(4, Timestamp.from(now)); // 4 now
                        try (ResultSet rs = ps.executeQuery()) {
                            long token = rs.next() ? rs.getLong(1) : 0; // no row or NULL: held
                            return token > 0
                                    ? Optional.of(new Lease(name, owner, token, expiresAt))
                                    : Optional.<Lease>empty();
                        }
                    }
                });
            } catch (SQLException e) {
                if (!target.dialect().isTransientConflict(e)) {
                    throw new OnceException(
                            "acquiring lease '" + name + "' for '" + owner + "' failed: " + e.getMessage(), e);
                }
                last = e;
            }
        }
        throw new OnceException(
                "acquiring lease '" + name + "' for '" + owner + "' failed " + ACQUIRE_ATTEMPTS
                        + " times on a transient conflict: " + last.getMessage(),
                last);
    }

    /**
     * Extends {@code lease} to now plus {@code ttl}, if it is still held with its token (nobody has
     * acquired it since, even if it expired meanwhile).
     *
     * @return the renewed lease (same token), or empty when it was released or taken over: stop
     *         the protected work
     */
    public Optional<Lease> renew(Lease lease, Duration ttl) {
        Objects.requireNonNull(lease, "lease");
        validTtl(ttl);
        Instant expiresAt = microseconds(clock.instant().plus(ttl));
        try {
            return target.inTransaction(c -> {
                try (PreparedStatement ps = c.prepareStatement(renewSql)) {
                    ps.setTimestamp(1, Timestamp.from(expiresAt)); // 1 expires_at
                    ps.setString(2, lease.name()); // 2 name
                    ps.setLong(3, lease.token()); // 3 token
                    ps.setString(4, lease.owner()); // 4 owner
                    return ps.executeUpdate() == 1
                            ? Optional.of(new Lease(lease.name(), lease.owner(), lease.token(), expiresAt))
                            : Optional.<Lease>empty();
                }
            });
        } catch (SQLException e) {
            throw new OnceException(
                    "renewing lease '" + lease.name() + "' (token " + lease.token() + ") failed: " + e.getMessage(), e);
        }
    }

    /**
     * Frees {@code lease} so the next {@link #acquire} need not wait for the expiry. The token is kept,
     * so the next holder's is still larger.
     *
     * @return true if it was released, false if it had already been taken over or released
     */
    public boolean release(Lease lease) {
        Objects.requireNonNull(lease, "lease");
        try {
            return target.inTransaction(c -> {
                try (PreparedStatement ps = c.prepareStatement(releaseSql)) {
                    ps.setString(1, lease.name()); // 1 name
                    ps.setLong(2, lease.token()); // 2 token
                    ps.setString(3, lease.owner()); // 3 owner
                    return ps.executeUpdate() == 1;
                }
            });
        } catch (SQLException e) {
            throw new OnceException(
                    "releasing lease '" + lease.name() + "' (token " + lease.token() + ") failed: " + e.getMessage(),
                    e);
        }
    }

    // What both databases keep (PostgreSQL rounds to it, MariaDB's datetime(6) truncates): cut here,
    // an expiry and the instant compared with it are the same in the database as in the Lease, whose
    // expiredAt then agrees with whether a rival can acquire it.
    private static Instant microseconds(Instant instant) {
        return instant.truncatedTo(ChronoUnit.MICROS);
    }

    private static void validName(String what, String value) {
        if (value == null || value.isBlank() || value.length() > MAX_NAME_LENGTH) {
            throw new InvalidConfigurationException(what + " must be 1 to " + MAX_NAME_LENGTH
                    + " non-blank characters, but was " + (value == null ? "null" : "'" + value + "'"));
        }
    }

    private static void validTtl(Duration ttl) {
        if (ttl == null || ttl.toMillis() < 1 || ttl.compareTo(MAX_TTL) > 0) {
            throw new InvalidConfigurationException("lease ttl must be between 1ms and " + MAX_TTL + ", but was " + ttl
                    + ": a lease outlives its holder's longest pause, and past a day it is not a lock");
        }
    }

    /** Builds {@link Leases}; {@code dataSource} is required. Not thread-safe. */
    public static final class Builder extends JdbcBuilder<Builder> {

        private Builder() {}

        @Override
        protected Builder self() {
            return this;
        }

        /**
         * @throws InvalidConfigurationException if the data source is missing or the dialect cannot be
         *         detected
         */
        public Leases build() {
            return new Leases(JdbcTarget.of(settings()));
        }
    }
}
