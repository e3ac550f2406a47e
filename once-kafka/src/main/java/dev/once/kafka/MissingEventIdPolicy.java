package dev.once.kafka;

/**
 * What the runner does with a record whose event id cannot be found. Such a record is never
 * deduplicated on its offset or its payload: either would let a replayed copy through or drop a
 * second, equal event. Every one is counted ({@code once.kafka.missing_id}).
 */
public enum MissingEventIdPolicy {
    /**
     * Stop the runner thread that met it: offsets before it are committed, it and everything after
     * it in its partition stay uncommitted, and {@link KafkaConsumerRunner#failure()} says why. The
     * default, because a producer that forgets the id is a bug to fix, not traffic to drop.
     */
    FAIL,
    /** Log it at WARN with topic, partition and offset, count it, and commit past it: its effect is lost. */
    SKIP_AND_LOG,
    /** Send it to the dead-letter topic with its headers and the reason, then commit past it. */
    DEAD_LETTER
}
