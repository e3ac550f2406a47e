package dev.once.testkit.broker;

import java.util.Optional;

/**
 * One process of a broker adapter's state machine ({@link BrokerWorld}): its client, engine and
 * consumer, which the world's supervisor replaces when it died. Not thread-safe beyond what each
 * method says.
 */
public interface BrokerProcess {

    /** Dies at its next commit, before it acknowledges what it committed (the ack gap); any thread. */
    void armCrash();

    /** Whether it died (the armed crash) or stopped on its own: the supervisor replaces it. */
    boolean dead();

    /** Why it stopped, when it stopped on its own (the supervisor's entry in the move log). */
    default Optional<Throwable> failure() {
        return Optional.empty();
    }

    /** Stops it and lets go of its client; idempotent. */
    void close();
}
