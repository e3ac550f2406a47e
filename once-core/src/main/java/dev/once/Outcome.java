package dev.once;

import java.util.Objects;

/**
 * What processing one delivery came to, known only after the transaction ended. Immutable.
 *
 * <p>The caller acknowledges exactly when {@link #shouldAcknowledge()} is true; it leaves the message
 * for redelivery when {@link #retryable()}; it dead-letters when the status is
 * {@link Status#FAILED_PERMANENT}.
 *
 * @param eventId the event id
 * @param status    what happened
 * @param failure   the cause for the two failed statuses and {@link Status#IN_PROGRESS}; null otherwise
 */
public record Outcome(String eventId, Status status, Throwable failure) {

    /** The possible results of processing one delivery. */
    public enum Status {
        /** Claimed and the handler's effect committed: acknowledge. */
        APPLIED,
        /** The event id was already claimed by an earlier, committed delivery: nothing done, acknowledge. */
        DUPLICATE,
        /**
         * Another delivery of the same event holds the claim and has not finished: do not acknowledge; it is
         * redelivered. Its failure says why: the claim's lock wait timed out, or a transaction of the calling thread,
         * open and suspended, holds the claim ({@link ClaimHeldOnThreadException}: nothing was tried, waiting would
         * never end).
         */
        IN_PROGRESS,
        /** Failed, rolled back, unclaimed, may succeed later: do not acknowledge; redeliver with backoff. */
        FAILED_RETRYABLE,
        /**
         * Failed, rolled back, unclaimed, will never succeed: dead-letter it, then acknowledge. Also a
         * duplicate whose payload differs from the applied one's under
         * {@link MismatchPolicy#FAIL_PERMANENT} ({@link PayloadMismatchException}): nothing of it ran.
         */
        FAILED_PERMANENT
    }

    public Outcome {
        Objects.requireNonNull(eventId, "eventId");
        Objects.requireNonNull(status, "status");
    }

    public static Outcome applied(String eventId) {
        return new Outcome(eventId, Status.APPLIED, null);
    }

    public static Outcome duplicate(String eventId) {
        return new Outcome(eventId, Status.DUPLICATE, null);
    }

    /** True when the message may be acknowledged: its effect is durably applied, now or before. */
    public boolean shouldAcknowledge() {
        return status == Status.APPLIED || status == Status.DUPLICATE;
    }

    /** True when the message should be left for redelivery. */
    public boolean retryable() {
        return status == Status.IN_PROGRESS || status == Status.FAILED_RETRYABLE;
    }

    /** The lower-case tag used in metrics and logs: {@code applied}, {@code duplicate}, … */
    public String tag() {
        return TAGS[status.ordinal()];
    }

    // Computed once: the engine tags every outcome it reports (the MDC), once per event.
    private static final String[] TAGS = java.util.Arrays.stream(Status.values())
            .map(s -> s.name().toLowerCase(java.util.Locale.ROOT))
            .toArray(String[]::new);
}
