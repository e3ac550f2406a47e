package dev.once.internal;

import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.Inbox;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialect;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Clock;
import java.util.List;

/**
 * {@link ClaimTiming#AT_COMMIT}: one delivery in a transaction the engine owns, the handler first
 * and the claim, a plain insert, in the commit's round trip. What it rests on: the inbox's key lets
 * one transaction with the claim commit, and every effect the contract allows rolls back with a
 * transaction that did not. What it adds to make the outcome true: a delivery that did not commit
 * is a DUPLICATE only when a read of the inbox after the rollback finds the claim, never on the
 * strength of an error code (a deferred unique constraint of the handler's own tables answers the
 * COMMIT with the same 23505 as the inbox's key; a handler fails on the work a copy already did).
 * Not API.
 */
final class CommitClaim {

    private final Transactions transactions;
    private final ClaimRun claimRun;
    private final Dialect dialect;
    private final String consumer;
    private final Clock clock;
    private final String claimSql;
    // Null where the dialect cannot fold the COMMIT into the claim (MariaDB): the claim is then a
    // statement of its own and the handle's commit follows.
    private final String claimAndCommitSql;
    private final String claimedSql;

    CommitClaim(Transactions transactions, ClaimRun claimRun, Inbox inbox, String consumer, Clock clock) {
        this.transactions = transactions;
        this.claimRun = claimRun;
        this.dialect = inbox.dialect();
        this.consumer = consumer;
        this.clock = clock;
        this.claimSql = dialect.claimAtCommit(inbox.tablePrefix());
        this.claimAndCommitSql = dialect.claimAtCommitAndCommit(inbox.tablePrefix());
        this.claimedSql = dialect.inboxClaimedAmong(inbox.tablePrefix(), 1);
    }

    /**
     * The delivery's outcome, final; a deadlock or serialization failure is thrown, for the caller's
     * conflict retries (the next try finds the claim if a copy committed meanwhile).
     */
    Outcome process(Delivery d) throws SQLException {
        Outcome outcome;
        try {
            outcome = transactions.inTransaction(tx -> handleThenClaim(tx, d));
        } catch (SQLException e) {
            if (claimRun.transientConflict(e) != null) {
                throw e;
            }
            // A failed commit included: it may have committed, in which case the read below finds
            // this delivery's own claim, and a DUPLICATE (acknowledge) is then the truth as well.
            outcome = FailedOutcomes.databaseFailure(d.eventId(), e);
        }
        if (outcome.status() == Status.APPLIED) {
            return outcome;
        }
        if (claimed(d.eventId())) {
            return Outcome.duplicate(d.eventId());
        }
        return claimRun.logged(outcome);
    }

    private Outcome handleThenClaim(Transaction tx, Delivery d) throws SQLException {
        Connection c = tx.connection();
        ClaimWatch watch = claimRun.watch(c);
        ClaimRun.Failure failure = claimRun.apply(tx, List.of(d), watch);
        if (failure != null) {
            tx.setRollbackOnly();
            SQLException conflict = claimRun.transientConflict(failure.cause());
            if (conflict != null) {
                throw conflict;
            }
            return claimRun.failure(d, failure.cause());
        }
        if (watch.ended() != null) {
            // MariaDB: the deadlock rolled back what ran before it, and the claim would commit the rest.
            tx.setRollbackOnly();
            return FailedOutcomes.endedUnderTheHandler(d.eventId(), watch.ended());
        }
        boolean fold = claimAndCommitSql != null && tx.commitFoldable();
        try (PreparedStatement ps = c.prepareStatement(fold ? claimAndCommitSql : claimSql)) {
            ps.setString(1, consumer);
            ps.setString(2, d.eventId());
            dialect.bindProcessedAt(ps, 3, clock.instant());
            ps.execute();
        } catch (SQLException e) {
            tx.setRollbackOnly();
            if (claimRun.transientConflict(e) != null) {
                throw e;
            }
            if (dialect.isAbortedTransaction(e)) {
                return FailedOutcomes.abortedUnderTheHandler(d.eventId(), e);
            }
            // The inbox's key refusing a copy's claim lands here too: process() tells it by reading the inbox.
            return FailedOutcomes.databaseFailure(d.eventId(), e);
        }
        return Outcome.applied(d.eventId());
    }

    private boolean claimed(String eventId) throws SQLException {
        return transactions.inTransaction(tx -> {
            try (PreparedStatement ps = tx.connection().prepareStatement(claimedSql)) {
                ps.setString(1, consumer);
                ps.setString(2, eventId);
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next();
                }
            }
        });
    }
}
