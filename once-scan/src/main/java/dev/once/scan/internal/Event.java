package dev.once.scan.internal;

import dev.once.scan.Blast;
import dev.once.scan.Location;
import dev.once.scan.Step;
import java.util.List;

/**
 * Something the traced flow of an entry point does, in execution order ({@code seq}).
 *
 * @param tx    id of the database transaction open at this point, null when none is
 * @param keyed an external effect that carries an idempotency key or a stable event id
 */
record Event(
        Kind kind,
        int seq,
        Location location,
        List<Step> path,
        Blast blast,
        Category category,
        String what,
        Integer tx,
        Location txLocation,
        boolean keyed,
        String member) {

    enum Kind {
        EFFECT,
        ACK,
        CLAIM,
        ONCE,
        GUARD,
        CHECK,
        REMOTE,
        SLOW,
        SELF_INVOCATION,
        EOS,
        OUTBOX,
        WEAK
    }

    /** Where an effect lands: the consumer's database, a remote system, a broker, a cache. */
    enum Category {
        DATABASE,
        EXTERNAL,
        PUBLISH,
        CACHE
    }
}
