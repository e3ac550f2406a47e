package dev.once.internal;

import dev.once.Delivery;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.jdbc.Dialect;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The engine's own transactions: it begins, claims, runs the handler, checks the claim and commits,
 * so it may retry a transient conflict, split a batch that rolled back ({@link Bisection}) and stop
 * an in-order run at its first failure. The outcomes are final when returned. Not API.
 */
final class OwnedMode {

    // The engine's log category, as before the engine was split into rooms: users may have configured it.
    private static final Logger log = LoggerFactory.getLogger(DefaultIdempotentConsumer.class);

    private final Transactions transactions;
    private final Dialect dialect;
    private final RetryPolicy conflictRetries;
    private final ClaimRun claimRun;
    private final ClaimCheck check;
    private final String consumer;
    /**
     * The cheaper first try of a batch transaction's claim; null where the dialect has none, or
     * with fingerprints (the claim must also read the stored ones, which only the full claim does).
     */
    private final AllNewClaims allNewClaims;
    /** {@link dev.once.ClaimTiming#AT_COMMIT}'s single deliveries; null when the claim comes before the handler. */
    private final CommitClaim commitClaim;

    OwnedMode(
            Transactions transactions,
            Dialect dialect,
            RetryPolicy conflictRetries,
            ClaimRun claimRun,
            ClaimCheck check,
            String consumer,
            AllNewClaims allNewClaims,
            CommitClaim commitClaim) {
        this.transactions = transactions;
        this.dialect = dialect;
        this.conflictRetries = conflictRetries;
        this.claimRun = claimRun;
        this.check = check;
        this.consumer = consumer;
        this.allNewClaims = allNewClaims;
        this.commitClaim = commitClaim;
    }

    /** One delivery in a transaction of its own, retried on a transient conflict. */
    Outcome process(Delivery delivery) {
        if (claimRun.claimHeldOnThread(null, delivery)) {
            return claimRun.heldOnThread(delivery, delivery);
        }
        return withConflictRetries(delivery.eventId(), () -> processOnce(delivery));
    }

    /** The outcomes by id of a batch's first occurrences, split until a failing delivery stands alone. */
    Map<String, Outcome> batch(List<Delivery> firsts, BatchFingerprints prints) {
        Map<String, Outcome> held = claimRun.heldOnThread(null, firsts);
        if (held != null) {
            return held;
        }
        return Bisection.bisect(firsts, part -> batchOnce(part, prints, null));
    }

    /**
     * As {@link #batch}, but nothing after the first delivery not acknowledged takes effect: those are held back.
     * With {@code fence} (else null) each transaction also moves its stream's position.
     */
    Map<String, Outcome> inOrder(List<Delivery> ordered, BatchFingerprints prints, PositionFence fence) {
        Map<String, Outcome> held = claimRun.heldOnThread(null, ordered);
        if (held != null) {
            return held;
        }
        Map<String, Outcome> byId = new HashMap<>();
        int acknowledged = Bisection.prefix(ordered, byId, part -> batchOnce(part, prints, fence));
        if (acknowledged < ordered.size()) {
            Outcome stop = byId.get(ordered.get(acknowledged).eventId());
            for (Delivery d : ordered.subList(acknowledged + 1, ordered.size())) {
                byId.put(d.eventId(), FailedOutcomes.heldBack(d, stop));
            }
        }
        return byId;
    }

    /** One batch transaction over {@code batch}: what {@link Bisection} splits on. */
    private BatchResult batchOnce(List<Delivery> batch, BatchFingerprints prints, PositionFence fence) {
        // Expect every id new (see AllNewClaims) until a unique violation says one was claimed before.
        boolean expectNew = allNewClaims != null;
        for (int attempt = 1; ; attempt++) {
            boolean allNew = expectNew;
            try {
                BatchResult result = transactions.inTransaction(tx -> {
                    Connection c = tx.connection();
                    // Null when every id of the batch was claimed (the plain insert went through): no set to look in.
                    Set<String> claimed;
                    try {
                        if (allNew) {
                            List<String> ids =
                                    batch.stream().map(Delivery::eventId).toList();
                            if (!allNewClaims.claimAll(c, ids)) {
                                tx.setRollbackOnly();
                                return null;
                            }
                            claimed = null;
                        } else {
                            claimed = claimRun.claimAll(c, batch, prints);
                        }
                    } catch (SQLException e) {
                        if (dialect.isLockTimeout(e)) {
                            tx.setRollbackOnly();
                            return BatchResult.split(d -> claimRun.inProgress(tx, d, e), -1);
                        }
                        throw e;
                    }
                    List<Delivery> mine = batch;
                    if (claimed != null) {
                        mine = new ArrayList<>(claimed.size());
                        for (Delivery d : batch) {
                            if (claimed.contains(d.eventId())) {
                                mine.add(d);
                            }
                        }
                    }
                    if (fence != null && !mine.isEmpty()) {
                        // Before the handler: what a handler does outside the transaction (a call, a record kept
                        // elsewhere) no rollback undoes, so a run the stream has passed must not run it; and the
                        // stream's row lock, held from here to the commit, makes two runs of one stream take turns
                        // before their handlers, not after.
                        Outcome behind = fence.advance(c, mine);
                        if (behind != null) {
                            tx.setRollbackOnly();
                            log.debug(
                                    "ordered run of {} rolled back: {}",
                                    batch.size(),
                                    behind.failure().getMessage());
                            return BatchResult.split(d -> behind, indexOf(batch, behind.eventId()));
                        }
                    }
                    ClaimWatch watch = claimRun.watch(c);
                    ClaimRun.Failure failure = claimRun.apply(tx, mine, watch);
                    if (failure != null) {
                        tx.setRollbackOnly();
                        SQLException conflict = claimRun.transientConflict(failure.cause());
                        if (conflict != null) {
                            throw conflict;
                        }
                        log.debug("batch of {} rolled back: {}", batch.size(), String.valueOf(failure.cause()));
                        int culprit = failure.delivery() == null ? -1 : batch.indexOf(failure.delivery());
                        return BatchResult.split(d -> claimRun.failed(d, failure.cause()), culprit);
                    }
                    if (!mine.isEmpty()) {
                        Outcome lost = check.verifyClaim(
                                tx, mine.stream().map(Delivery::eventId).toList(), watch);
                        if (lost != null) {
                            // Nothing of the batch stands; split, and the culprit fails alone.
                            tx.setRollbackOnly();
                            log.debug(
                                    "batch of {} rolled back: {}",
                                    batch.size(),
                                    lost.failure().getMessage());
                            return BatchResult.split(d -> new Outcome(d.eventId(), lost.status(), lost.failure()), -1);
                        }
                    }
                    Map<String, Outcome> byId = new HashMap<>(batch.size() * 4 / 3 + 1);
                    for (Delivery d : batch) {
                        byId.put(
                                d.eventId(),
                                claimed == null || claimed.contains(d.eventId())
                                        ? Outcome.applied(d.eventId())
                                        : Outcome.duplicate(d.eventId()));
                    }
                    return BatchResult.done(byId);
                });
                if (result != null) {
                    return result;
                }
                // Rolled back: an id was claimed before. Claim again with ON CONFLICT, not as a conflict retry.
                expectNew = false;
                attempt--;
            } catch (SQLException e) {
                boolean conflict = claimRun.transientConflict(e) != null;
                if (conflict && conflictRetries.allowsRetry(attempt)) {
                    backoff(attempt);
                    continue;
                }
                if (conflict) {
                    // Smaller transactions take fewer locks: split rather than fail the whole batch.
                    return BatchResult.split(d -> FailedOutcomes.databaseFailure(d.eventId(), e), -1);
                }
                Map<String, Outcome> failed = new HashMap<>();
                RetryableException cause = new RetryableException(
                        "batch of " + batch.size() + " rolled back, database error: " + e.getMessage(), e);
                for (Delivery d : batch) {
                    failed.put(d.eventId(), new Outcome(d.eventId(), Status.FAILED_RETRYABLE, cause));
                }
                return BatchResult.done(failed);
            }
        }
    }

    private static int indexOf(List<Delivery> batch, String eventId) {
        for (int i = 0; i < batch.size(); i++) {
            if (batch.get(i).eventId().equals(eventId)) {
                return i;
            }
        }
        throw new IllegalStateException("event '" + eventId + "' is not in its batch");
    }

    private interface Attempt {
        Outcome run() throws SQLException;
    }

    private Outcome withConflictRetries(String eventId, Attempt attempt) {
        for (int retry = 1; ; retry++) {
            try {
                return attempt.run();
            } catch (SQLException e) {
                if (claimRun.transientConflict(e) != null && conflictRetries.allowsRetry(retry)) {
                    backoff(retry);
                    continue;
                }
                return FailedOutcomes.databaseFailure(eventId, e);
            }
        }
    }

    private Outcome processOnce(Delivery d) throws SQLException {
        if (commitClaim != null) {
            return commitClaim.process(d);
        }
        return transactions.inTransaction(tx -> claimRun.claimAndHandle(tx, d));
    }

    private void backoff(int retry) {
        try {
            Thread.sleep(Math.max(1, conflictRetries.delay(retry).toMillis()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
