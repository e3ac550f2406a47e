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
 * @param handedOff where the work was handed to another thread (an executor, a reactive
 *     {@code subscribe()}) that the handler does not wait for; null when it runs in the handler
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
        String member,
        Location handedOff) {

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
        WEAK,
        /** Work handed to another thread, not waited for: {@code executor.submit}, {@code runAsync}, {@code subscribe()}. */
        ASYNC,
        /** The handler waits for handed-off work ({@code get()}, {@code join()}, {@code await()} with its result checked). */
        WAIT
    }

    /** Where an effect lands: the consumer's database, a remote system, a broker, a cache. */
    enum Category {
        DATABASE,
        EXTERNAL,
        PUBLISH,
        CACHE
    }
}
