package dev.once.lease;

import java.time.Instant;
import java.util.Objects;

/**
 * A lease held by one owner: a lock with an expiry and a fencing token. Immutable.
 *
 * <p>The token grows by one with every acquisition of {@code name}, so a later holder always has a
 * larger token than an earlier one. Pass it with every protected write ({@link Fence#check},
 * {@link dev.once.Tx#fence}); the resource then rejects the writes of a holder that was paused
 * past {@code expiresAt} while someone else acquired the lease.
 *
 * @param name      what is leased, 1 to 255 characters
 * @param owner     who holds it, 1 to 255 characters
 * @param token     the fencing token of this acquisition, 1 or more
 * @param expiresAt when the lease lapses unless renewed; by the clock of the {@link Leases} that issued it
 */
public record Lease(String name, String owner, long token, Instant expiresAt) {

    public Lease {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(owner, "owner");
        Objects.requireNonNull(expiresAt, "expiresAt");
        if (token < 1) {
            throw new IllegalArgumentException("token must be 1 or more, but was " + token);
        }
    }

    /** True when {@code now} is at or past the expiry: another owner may have acquired it since. */
    public boolean expiredAt(Instant now) {
        return !now.isBefore(expiresAt);
    }
}
