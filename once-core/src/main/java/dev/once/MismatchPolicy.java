package dev.once;

/**
 * What the engine does when an event id it already applied arrives again with a different
 * payload: a producer that reused an id for a new event (a counter reset, a copied id, a replayed
 * id space), whose second event dedupe would otherwise drop without a trace. Set with
 * {@link IdempotentConsumerBuilder#onMismatch}.
 *
 * <p>The check compares fingerprints: the first 8 bytes of the payload's SHA-256, kept in the
 * inbox row by the claim. A delivery with an empty payload has none and is never a mismatch, nor
 * is a duplicate of a claim made while the policy was {@link #OFF}. A fingerprint is not the
 * payload, but a low-entropy payload (a PIN, a yes/no) can be guessed back from it; logs carry it.
 */
public enum MismatchPolicy {
    /** No fingerprint is kept and nothing is compared: the claim writes what it always wrote. The default. */
    OFF,
    /**
     * The fingerprint is kept; a duplicate whose fingerprint differs is counted
     * ({@code once.duplicates.mismatched}), logged at WARN with both fingerprints (never the
     * payload) and reported {@link Outcome.Status#DUPLICATE} like any other duplicate.
     */
    COUNT,
    /**
     * As {@link #COUNT}, but the mismatching delivery is reported {@link Outcome.Status#FAILED_PERMANENT}
     * with a {@link PayloadMismatchException}, so the adapter dead-letters it by its rule and the
     * second event is kept for a person to look at. Nothing of it is applied either way.
     */
    FAIL_PERMANENT
}
