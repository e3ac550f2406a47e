package dev.once.outbox;

import dev.once.OnceException;
import dev.once.StaleFencingTokenException;
import dev.once.internal.JdbcTarget;
import dev.once.lease.Fence;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import java.lang.management.ManagementFactory;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The exclusive mode of a relay: the lease it sends under, acquired, renewed and released here, and
 * the fence every batch passes before it commits. Thread-safe.
 *
 * <p>The lease is renewed once half its time to live has passed, before each send of a batch, not
 * only when a batch starts: a batch that takes longer than the lease (many rows, a slow provider)
 * would otherwise lapse midway, be taken over by a standby and fenced at commit, and two relays
 * would take turns re-sending the same rows.
 */
final class RelayLease {

    private static final Logger log = LoggerFactory.getLogger(RelayLease.class);

    private final String relay;
    private final String name;
    private final String owner;
    private final Duration ttl;
    private final Leases leases;
    private final JdbcTarget target;
    private final AtomicReference<Lease> held = new AtomicReference<>();

    RelayLease(String relay, String name, Duration ttl, JdbcTarget target) {
        this.relay = relay;
        this.name = name;
        this.ttl = ttl;
        this.target = target;
        this.owner = relay + "@" + ManagementFactory.getRuntimeMXBean().getName() + "/"
                + UUID.randomUUID().toString().substring(0, 8);
        this.leases = Leases.builder()
                .dataSource(target.dataSource())
                .dialect(target.dialect())
                .tablePrefix(target.tablePrefix())
                .clock(target.clock())
                .build();
    }

    String name() {
        return name;
    }

    Lease held() {
        return held.get();
    }

    /** The lease to send under: held (renewed past half its time to live), or newly acquired; null if another holds it. */
    Lease current() {
        Lease lease = held.get();
        if (lease != null) {
            Lease kept = keep(lease);
            if (kept != null) {
                return kept;
            }
        }
        Lease acquired = leases.acquire(name, owner, ttl).orElse(null);
        if (acquired == null) {
            // Refused: another relay holds the lease, or this relay's own other thread acquired it
            // since this one looked (an acquire is refused to its own owner too). Clearing here
            // would drop that thread's lease, and this relay would send nothing until it lapsed.
            return held.get();
        }
        if (!takeOver(acquired)) {
            // Paused between the acquire and the fence past the lease's expiry: a newer holder
            // (another relay, or this relay's other thread) already passed the fence. A held token
            // older than this one is lost as well.
            log.warn(
                    "relay {} acquired lease '{}' with token {}, but a newer token passed the fence first",
                    relay,
                    name,
                    acquired.token());
            return held.updateAndGet(h -> h != null && h.token() < acquired.token() ? null : h);
        }
        log.info("relay {} acquired lease '{}' with token {}", relay, name, acquired.token());
        // Not a plain set: this relay's other thread may have acquired a newer token meanwhile.
        return held.accumulateAndGet(acquired, RelayLease::newer);
    }

    /**
     * {@code lease} still held, renewed if half its time to live has passed; null when another relay
     * acquired it since (this relay must stop sending).
     */
    Lease keep(Lease lease) {
        Instant now = target.clock().instant();
        if (now.isBefore(lease.expiresAt().minus(ttl.dividedBy(2)))) {
            return lease;
        }
        Lease renewed = leases.renew(lease, ttl).orElse(null);
        if (renewed == null) {
            log.warn("relay {} lost its lease '{}' (token {}): another relay acquired it", relay, name, lease.token());
            forget(lease);
            return null;
        }
        // Kept if still held: a released lease (close) is not taken back by a batch still running.
        held.updateAndGet(h -> h == null ? null : newer(h, renewed));
        return renewed;
    }

    /** Last before a batch commits: throws if a newer token passed the fence, so the batch rolls back. */
    void fence(Connection c, Lease lease) throws SQLException {
        Fence.check(c, target.dialect(), target.tablePrefix(), resource(), lease.token(), target.clock());
    }

    /** The batch sent under {@code lease} was fenced or lost its lease: forget it. */
    void lost(Lease lease) {
        forget(lease);
    }

    // By token, not by object: the held lease may be a renewal of the one a batch started with (a
    // later expiry, the same token), which is lost as well; a newer token is this relay's own later
    // acquisition and stays.
    private void forget(Lease lease) {
        held.updateAndGet(h -> h != null && h.token() == lease.token() ? null : h);
    }

    // Of two leases of this relay, the newer: the larger token, or the same token renewed later.
    private static Lease newer(Lease a, Lease b) {
        if (a == null) {
            return b;
        }
        if (a.token() != b.token()) {
            return a.token() > b.token() ? a : b;
        }
        return a.expiresAt().isBefore(b.expiresAt()) ? b : a;
    }

    /** Releases the lease if held, so a standby need not wait for its expiry. Never throws. */
    void release() {
        Lease lease = held.getAndSet(null);
        if (lease != null) {
            try {
                leases.release(lease);
            } catch (RuntimeException e) {
                log.debug("releasing lease '{}' failed; it lapses after its ttl", name, e);
            }
        }
    }

    // Records the new token at the fence at once, not at this relay's first batch: from here on the
    // previous holder's batches are rejected even while this relay has nothing to send. False when a
    // newer token passed the fence first.
    private boolean takeOver(Lease acquired) {
        try {
            target.inTransaction(c -> {
                fence(c, acquired);
                return null;
            });
            return true;
        } catch (StaleFencingTokenException e) {
            return false;
        } catch (SQLException e) {
            throw new OnceException(
                    "relay " + relay + ": recording lease token " + acquired.token() + " of '" + name
                            + "' at the fence failed: " + e.getMessage(),
                    e);
        }
    }

    private String resource() {
        return "outbox-relay:" + name;
    }
}
