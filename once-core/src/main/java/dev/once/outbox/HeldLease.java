package dev.once.outbox;

import dev.once.lease.Lease;

/** The lease one relay batch runs under, renewed as the batch goes on; its lease is null outside exclusive mode. */
final class HeldLease {
    private final RelayLease exclusive;
    private Lease lease;

    HeldLease(RelayLease exclusive, Lease lease) {
        this.exclusive = exclusive;
        this.lease = lease;
    }

    /** The lease as last renewed; null outside exclusive mode. */
    Lease lease() {
        return lease;
    }

    /** Renews the lease once half its time to live has passed; stops the batch if another relay took it. */
    void keep() {
        if (lease != null) {
            lease = exclusive.keep(lease);
            if (lease == null) {
                throw new Lost();
            }
        }
    }

    /** The lease was renewed before a send and another relay had acquired it: stop sending. */
    static final class Lost extends RuntimeException {
        Lost() {
            super(null, null, false, false);
        }
    }
}
