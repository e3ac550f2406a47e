package dev.once.internal;

import dev.once.Delivery;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryableException;
import java.sql.SQLException;

/**
 * The failed outcomes the engine writes itself, for deliveries whose handler did not decide: rolled
 * back by the database, with a batch, or held back behind an earlier delivery. Each message says
 * what happened to the event and what the caller can do.
 */
final class FailedOutcomes {

    private FailedOutcomes() {}

    static Outcome heldBack(Delivery d, Outcome first) {
        return new Outcome(
                d.eventId(),
                Status.FAILED_RETRYABLE,
                new RetryableException(
                        "held back: '" + first.eventId() + "' before it was not acknowledged (" + first.tag()
                                + "); ordered deliveries take effect in order",
                        first.failure()));
    }

    // Includes a failed commit: it may or may not have committed, so the message is left for
    // redelivery and the inbox absorbs it if it did.
    static Outcome databaseFailure(String eventId, SQLException e) {
        return new Outcome(
                eventId,
                Status.FAILED_RETRYABLE,
                new RetryableException(
                        "event '" + eventId + "' rolled back, database error (SQLState " + e.getSQLState() + "): "
                                + e.getMessage(),
                        e));
    }

    static Outcome rolledBackByDatabase(String eventId, String why, SQLException cause) {
        return new Outcome(
                eventId,
                Status.FAILED_RETRYABLE,
                new RetryableException(
                        "event '" + eventId + "' not applied: " + why
                                + "; nothing of it is committed and it will be redelivered",
                        cause));
    }

    /** The database rolled the whole transaction back (a MariaDB deadlock) and the handler caught it and went on. */
    static Outcome endedUnderTheHandler(String eventId, SQLException ended) {
        return rolledBackByDatabase(
                eventId,
                "the database rolled the transaction back (" + ended.getMessage()
                        + ") and the handler went on (it caught the SQLException), its later statements"
                        + " running in a new transaction",
                ended);
    }

    /** A statement failed, the handler caught it and went on, and the database aborted the transaction (PostgreSQL). */
    static Outcome abortedUnderTheHandler(String eventId, SQLException aborted) {
        return rolledBackByDatabase(
                eventId,
                "a statement of the handler failed and the handler went on"
                        + " (it caught the SQLException), so the database aborted the transaction",
                aborted);
    }

    static Outcome notRunInJoinedBatch(Delivery d, int size, Throwable cause) {
        return new Outcome(
                d.eventId(),
                Status.FAILED_RETRYABLE,
                new RetryableException(
                        "event '" + d.eventId()
                                + "' rolled back with its batch of " + size
                                + " in the caller's transaction, where the batch handler"
                                + " failed (" + cause
                                + "); a joined transaction cannot be bisected: redeliver the events in"
                                + " smaller batches to isolate the failing one",
                        cause));
    }

    static Outcome notRun(Delivery d, Outcome failed) {
        return new Outcome(
                d.eventId(),
                Status.FAILED_RETRYABLE,
                new RetryableException(
                        "event '" + d.eventId() + "' rolled back with its batch, in which '" + failed.eventId()
                                + "' failed",
                        failed.failure()));
    }
}
