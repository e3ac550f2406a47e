package dev.once.internal;

import dev.once.Delivery;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryableException;
import dev.once.tx.TransactionHandle;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A transaction the caller opened (Spring, {@code ManualTransactions}): the claim and the handler
 * run on the caller's connection in one attempt and one transaction, never split, and each outcome
 * is reported when the caller's transaction ends: an
 * applied one becomes a retryable failure if the caller rolls back, and a claim the check left to
 * the caller's commit ({@link ClaimCheck}) found lost is reported as that failure. Not API.
 */
final class JoinedMode {

    private static final String COPY_OF_EARLIER = "of a delivery applied before it in the same transaction";

    private final Transactions transactions;
    private final ClaimRun claimRun;
    private final ClaimCheck check;
    private final Settlement settlement;
    // ClaimTiming.AT_COMMIT's single deliveries in dedicated transactions; null when the claim comes first.
    private final CommitClaim atCommit;

    JoinedMode(
            Transactions transactions,
            ClaimRun claimRun,
            ClaimCheck check,
            Settlement settlement,
            CommitClaim atCommit) {
        this.transactions = transactions;
        this.claimRun = claimRun;
        this.check = check;
        this.settlement = settlement;
        this.atCommit = atCommit;
    }

    /**
     * Joined: one attempt on the caller's transaction (a deadlock there aborts the caller's work too,
     * so it is not retried here); the outcome is reported when the caller's transaction ends.
     */
    Outcome process(Delivery d) {
        JoinedCall call = new JoinedCall(d);
        try {
            transactions.inTransaction(call);
        } catch (SQLException e) {
            // No transaction could be joined: nothing ran, nothing is pending.
            return settlement.report(d, FailedOutcomes.databaseFailure(d.eventId(), e));
        }
        return call.provisional;
    }

    /**
     * One delivery's work in the caller's transaction and its report when that ends: one object per
     * delivery, where a lambda for each, and an array for the result, were three.
     */
    private final class JoinedCall extends Provisional implements Transactions.Work<Outcome> {
        private final Delivery d;
        private Transaction tx;
        private Outcome provisional;
        // a duplicate of a claim this transaction took itself: it does not stand if the transaction rolls back
        private boolean copyOfOwnClaim;
        // the claim waited for the caller's commit (ClaimTiming.AT_COMMIT, a dedicated transaction)
        private boolean claimAtCommit;

        JoinedCall(Delivery d) {
            this.d = d;
        }

        @Override
        public Outcome run(Transaction tx) {
            this.tx = tx;
            try {
                boolean held = claimRun.claimHeldOnThread(tx.joinedTransaction(), d);
                claimAtCommit = !held && atCommit != null;
                provisional = held
                        ? claimRun.heldOnThread(d, d)
                        : claimAtCommit
                                ? atCommit.handleThenClaimAtCallerCommit(tx, d)
                                : claimRun.claimAndHandle(tx, d);
            } catch (SQLException e) {
                tx.setRollbackOnly();
                provisional = FailedOutcomes.databaseFailure(d.eventId(), e);
            }
            copyOfOwnClaim = provisional.status() == Status.DUPLICATE
                    && claimRun.claimHeldBy(tx.joinedTransaction(), d.eventId());
            tx.afterCompletion(this);
            return provisional;
        }

        @Override
        public void completed(boolean committed) {
            report(d, provisional, committed);
        }

        @Override
        Outcome atEnd(Delivery d, Outcome provisional, boolean committed) {
            Outcome last = tx.lostAtCommit() != null ? tx.lostAtCommit() : provisional;
            // with the claim at commit, a delivery that did not commit is a copy's duplicate when the inbox says so
            return claimAtCommit && !committed ? atCommit.afterCallerRollback(d.eventId(), last) : last;
        }

        @Override
        String copyOfOwnClaim(Delivery d) {
            return copyOfOwnClaim ? COPY_OF_EARLIER : null;
        }
    }

    /**
     * A batch in the caller's transaction: every outcome of {@code deliveries}, reported when it ends. With
     * {@code fence} (else null) the transaction also moves the run's stream position before the handlers run, or is
     * rolled back without running them when the stream has passed a delivery it claimed.
     *
     * @throws IllegalStateException with {@code fence}, when a transaction this thread suspended holds the
     *     stream's row lock (nothing ran, nothing is reported)
     */
    List<Outcome> batch(
            List<Delivery> deliveries, List<Delivery> firsts, BatchFingerprints prints, PositionFence fence) {
        Map<String, Outcome> byId = new HashMap<>();
        List<List<Outcome>> settled = new ArrayList<>(1);
        String[] locked = new String[1];
        try {
            transactions.inTransaction(tx -> {
                if (fence != null && (locked[0] = fence.lockedOnThread(tx.joinedTransaction())) != null) {
                    return null; // nothing written: the caller's transaction goes on as it was
                }
                Map<String, Outcome> held = claimRun.heldOnThread(tx.joinedTransaction(), firsts);
                if (held != null) {
                    settled.add(reportAtEnd(tx, deliveries, held, prints)); // nothing written: the caller goes on
                    return null;
                }
                Set<String> claimed;
                try {
                    claimed = claimRun.claimAll(tx.connection(), firsts, prints);
                } catch (SQLException e) {
                    tx.setRollbackOnly();
                    for (Delivery d : firsts) {
                        byId.put(d.eventId(), FailedOutcomes.databaseFailure(d.eventId(), e));
                    }
                    settled.add(reportAtEnd(tx, deliveries, byId, prints));
                    return null;
                }
                // copies of claims this transaction took before this batch: their duplicates fall with those claims
                Set<String> ownBefore = new HashSet<>();
                for (Delivery d : firsts) {
                    if (!claimed.contains(d.eventId()) && claimRun.claimHeldBy(tx.joinedTransaction(), d.eventId())) {
                        ownBefore.add(d.eventId());
                    }
                }
                claimRun.claimedIn(tx, claimed);
                List<Delivery> mine = new ArrayList<>(claimed.size());
                for (Delivery d : firsts) {
                    if (claimed.contains(d.eventId())) {
                        mine.add(d);
                    } else {
                        byId.put(d.eventId(), Outcome.duplicate(d.eventId()));
                    }
                }
                // The fence before the handler, as in the engine's own transactions (OwnedMode#batchOnce): a run the
                // stream has passed never runs its handler, and the caller's transaction holds the stream's row
                // lock from here to its end.
                Outcome behind = null;
                // the stream's position this transaction moved itself before this run, which may be what refuses it
                boolean ownMove = fence != null && !mine.isEmpty() && fence.heldBy(tx.joinedTransaction());
                if (fence != null && !mine.isEmpty()) {
                    try {
                        behind = fence.advance(tx, mine);
                    } catch (SQLException e) {
                        behind = FailedOutcomes.databaseFailure(mine.get(0).eventId(), e);
                    }
                }
                ClaimWatch watch = claimRun.watch(tx.connection());
                ClaimRun.Failure failure = behind == null ? claimRun.apply(tx, mine, watch) : null;
                if (behind != null) {
                    // a joined transaction cannot be split: all of it rolls back with the delivery refused
                    tx.setRollbackOnly();
                    for (Delivery d : mine) {
                        byId.put(
                                d.eventId(),
                                d.eventId().equals(behind.eventId()) ? behind : FailedOutcomes.notRun(d, behind));
                    }
                } else if (failure == null) {
                    for (Delivery d : mine) {
                        byId.put(d.eventId(), Outcome.applied(d.eventId()));
                    }
                } else {
                    tx.setRollbackOnly();
                    // Everything applied in this transaction rolls back with the failing delivery. A
                    // joined transaction cannot be split, so a batch handler's failure names no culprit.
                    Outcome failedOne =
                            failure.delivery() == null ? null : claimRun.failed(failure.delivery(), failure.cause());
                    for (Delivery d : mine) {
                        byId.put(
                                d.eventId(),
                                d == failure.delivery()
                                        ? failedOne
                                        : failedOne != null
                                                ? FailedOutcomes.notRun(d, failedOne)
                                                : FailedOutcomes.notRunInJoinedBatch(d, mine.size(), failure.cause()));
                    }
                }
                if (failure == null && behind == null && !claimed.isEmpty()) {
                    String first = claimed.iterator().next();
                    Outcome lost;
                    try {
                        lost = check.verifyClaim(tx, List.copyOf(claimed), watch);
                    } catch (SQLException e) {
                        lost = FailedOutcomes.databaseFailure(first, e);
                    }
                    if (lost != null) {
                        tx.setRollbackOnly();
                        for (Delivery d : firsts) {
                            if (claimed.contains(d.eventId())) {
                                byId.put(d.eventId(), FailedOutcomes.notRun(d, lost));
                            }
                        }
                    }
                }
                List<Outcome> outcomes = settlement.settle(deliveries, byId, prints);
                settled.add(outcomes);
                // a refusal by a position this transaction may have moved itself: it stands or falls with that move
                Outcome ownRefusal =
                        ownMove && behind != null && behind.status() == Status.FAILED_PERMANENT ? behind : null;
                tx.afterCompletion(new ProvisionalBatch(deliveries, outcomes) {
                    @Override
                    Outcome atEnd(Delivery d, Outcome provisional, boolean committed) {
                        Outcome last = tx.lostAtCommit() != null && claimed.contains(d.eventId())
                                ? FailedOutcomes.notRun(d, tx.lostAtCommit())
                                : provisional;
                        if (ownRefusal != null
                                && d.eventId().equals(ownRefusal.eventId())
                                && last.status() == Status.FAILED_PERMANENT) {
                            // whether the move that refused it stands is not known here (a rollback undoes it, and
                            // so may a rollback to a savepoint before it where the transaction then commits): not
                            // for good, lest it be dead-lettered unapplied; a redelivery meets the committed stream
                            last = refusedByOwnMove(d, ownRefusal, committed);
                        }
                        return last;
                    }

                    @Override
                    String copyOfOwnClaim(Delivery d) {
                        return claimed.contains(d.eventId())
                                ? "whose first occurrence in the batch was applied"
                                : ownBefore.contains(d.eventId()) ? COPY_OF_EARLIER : null;
                    }
                });
                return null;
            });
        } catch (SQLException e) {
            List<Outcome> failed = new ArrayList<>(deliveries.size());
            for (Delivery d : deliveries) {
                failed.add(settlement.report(d, FailedOutcomes.databaseFailure(d.eventId(), e)));
            }
            return failed;
        }
        if (locked[0] != null) {
            throw new IllegalStateException(locked[0]);
        }
        return settled.get(0);
    }

    /** Settles {@code deliveries} as {@code byId} says, reported when the caller's transaction ends, like every joined outcome. */
    private List<Outcome> reportAtEnd(
            Transaction tx, List<Delivery> deliveries, Map<String, Outcome> byId, BatchFingerprints prints) {
        List<Outcome> outcomes = settlement.settle(deliveries, byId, prints);
        tx.afterCompletion(new ProvisionalBatch(deliveries, outcomes));
        return outcomes;
    }

    /**
     * Outcomes the listener hears when the caller's transaction ends, not when the call returns: provisional until
     * then, each is decided when that end is known ({@link #completed}, through {@link #report}). First by the rule
     * of the path that recorded it ({@link #atEnd}), then by the rollback, whatever that rule: an applied outcome, or
     * a duplicate of a claim the transaction held ({@link #copyOfOwnClaim}), did not stand and is reported a
     * retryable failure.
     */
    private abstract class Provisional implements TransactionHandle.CompletionCallback {

        /** What {@code provisional} comes to now the caller's transaction has ended; as it is, unless the path says. */
        Outcome atEnd(Delivery d, Outcome provisional, boolean committed) {
            return provisional;
        }

        /** How a duplicate {@code d} copies a claim this transaction held (it falls with it), for the report; else null. */
        String copyOfOwnClaim(Delivery d) {
            return null;
        }

        /** Reports {@code d}'s {@code provisional} outcome as decided by the end of the caller's transaction. */
        final void report(Delivery d, Outcome provisional, boolean committed) {
            Outcome last = atEnd(d, provisional, committed);
            if (!committed && last.status() == Status.APPLIED) {
                last = undone(d, "");
            } else if (!committed && last.status() == Status.DUPLICATE) {
                // a copy of a delivery this transaction claimed: a duplicate of a claim that rolled back
                // with it, so nothing of the event stands and the copy must come again too
                String copy = copyOfOwnClaim(d);
                if (copy != null) {
                    last = undone(d, copy);
                }
            }
            settlement.report(d, last);
        }
    }

    /** A batch's outcomes, as settled in the caller's transaction. */
    private class ProvisionalBatch extends Provisional {
        private final List<Delivery> deliveries;
        private final List<Outcome> outcomes;

        ProvisionalBatch(List<Delivery> deliveries, List<Outcome> outcomes) {
            this.deliveries = deliveries;
            this.outcomes = outcomes;
        }

        @Override
        public final void completed(boolean committed) {
            for (int i = 0; i < deliveries.size(); i++) {
                report(deliveries.get(i), outcomes.get(i), committed);
            }
        }
    }

    private static Outcome refusedByOwnMove(Delivery d, Outcome refusal, boolean committed) {
        return new Outcome(
                d.eventId(),
                Status.FAILED_RETRYABLE,
                new RetryableException(
                        "event '" + d.eventId() + "' was refused by its stream's position in the caller's transaction,"
                                + " which an earlier run of that same transaction had moved "
                                + (committed
                                        ? "(the transaction committed, but a rollback to a savepoint may have undone"
                                                + " the move)"
                                        : "and which rolled back: the move does not stand")
                                + "; redeliver it: the committed stream decides",
                        refusal.failure()));
    }

    private static Outcome undone(Delivery d, String how) {
        return new Outcome(
                d.eventId(),
                Status.FAILED_RETRYABLE,
                new RetryableException("event '" + d.eventId() + "' was applied in the caller's transaction"
                        + (how.isEmpty() ? "" : " (a copy " + how + ")")
                        + ", which rolled back: nothing of it stands"));
    }
}
