package dev.once.internal;

import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.Inbox;
import dev.once.OnceException;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialect;
import dev.once.tx.JoinedTransaction;
import java.sql.Connection;
import java.sql.PreparedStatement;
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
 *
 * <p>In a joined transaction its integration began for this one delivery
 * ({@link dev.once.tx.TransactionProvider#dedicated()}), the claim is the transaction's last check
 * before the integration's commit, and the claim there tells a taken id by itself. A delivery that
 * did not commit otherwise (its handler failed, perhaps on a copy's work) is read for in the inbox once
 * its transaction has ended, on the provider's transactions apart from it ({@link
 * dev.once.tx.TransactionProvider#afterRollback}: the integration may still hold its connection), before
 * it is reported; the integration reads the inbox too before it settles the message. Not API.
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
    private final Inbox inbox;
    // Joined (dedicated): null where the dialect cannot, and the builder refuses the setting.
    private final String joinedClaimSql;
    private final String joinedClaimAndCommitSql;
    private final StatementsTogether together;
    // A dedicated joined transaction's provider's transactions apart from it, for the read after its rollback; or null
    private final Transactions afterRollback;

    CommitClaim(
            Transactions transactions,
            ClaimRun claimRun,
            Inbox inbox,
            String consumer,
            Clock clock,
            StatementsTogether together) {
        this.transactions = transactions;
        this.claimRun = claimRun;
        this.dialect = inbox.dialect();
        this.consumer = consumer;
        this.clock = clock;
        this.claimSql = dialect.claimAtCommit(inbox.tablePrefix());
        this.claimAndCommitSql = dialect.claimAtCommitAndCommit(inbox.tablePrefix());
        this.inbox = inbox;
        this.joinedClaimSql = dialect.claimAtJoinedCommit(inbox.tablePrefix());
        this.joinedClaimAndCommitSql = dialect.claimAtJoinedCommitAndCommit(inbox.tablePrefix());
        this.together = together;
        this.afterRollback = transactions.joins() ? transactions.afterRollback() : null;
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
        ClaimRun.Failure failure = claimRun.apply(tx, d, watch);
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
        boolean fold = claimAndCommitSql != null && tx.commitFoldable() && together.allowed(c);
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

    /**
     * A dedicated joined transaction: the handler now, and the claim registered as the transaction's last
     * check before the integration's commit, carrying the COMMIT when nothing else is due then. A taken
     * id fails that statement, the commit rolls everything back and the outcome reported when the
     * transaction ends is a DUPLICATE; a statement the handler's code failed and went on from aborts the
     * claim (PostgreSQL), which is then that failure.
     */
    Outcome handleThenClaimAtCallerCommit(Transaction tx, Delivery d) {
        JoinedTransaction joined = tx.joinedTransaction();
        if (joined == null || !joined.checksBeforeCommit()) {
            throw new IllegalStateException("the transaction provider says its transactions are dedicated, but this"
                    + " one runs no checks before its commit: a claim at commit could not be made");
        }
        Connection c = tx.connection();
        ClaimRun.Failure failure = claimRun.apply(tx, d, claimRun.watch(c));
        if (failure != null) {
            tx.setRollbackOnly();
            return claimRun.failed(d, failure.cause());
        }
        joined.checkBeforeCommit(commit -> claimAtCallerCommit(tx, c, d.eventId(), commit));
        return Outcome.applied(d.eventId());
    }

    private boolean claimAtCallerCommit(Transaction tx, Connection c, String eventId, boolean commit)
            throws SQLException {
        boolean fold = commit && together.allowed(c);
        try (PreparedStatement ps = c.prepareStatement(fold ? joinedClaimAndCommitSql : joinedClaimSql)) {
            ps.setString(1, consumer);
            ps.setString(2, eventId);
            dialect.bindProcessedAt(ps, 3, clock.instant());
            ps.execute();
        } catch (SQLException e) {
            if (dialect.isClaimMissing(e)) {
                tx.lostAtCommit(Outcome.duplicate(eventId));
                throw new OnceException("event '" + eventId + "' was committed first by another delivery of consumer '"
                        + consumer + "': this one rolls back with everything its handler wrote");
            }
            if (dialect.isAbortedTransaction(e)) {
                Outcome aborted = FailedOutcomes.abortedUnderTheHandler(eventId, e);
                tx.lostAtCommit(aborted);
                throw (RuntimeException) aborted.failure();
            }
            throw e;
        }
        return fold;
    }

    /**
     * What a delivery of {@link #handleThenClaimAtCallerCommit} comes to when its transaction did not commit, read
     * once the transaction has ended, before it is reported: a DUPLICATE when the inbox, read apart from the
     * integration's connection, holds the claim (a copy committed the event: a handler that failed on its work, a
     * statement of the handler's own that failed, a body that asked for redelivery), else {@code outcome} as it
     * was. A DUPLICATE the claim's statement found is one already. Without a provider for the read, or when the
     * read fails, {@code outcome}: the integration reads the inbox itself before it settles the message.
     */
    Outcome afterCallerRollback(String eventId, Outcome outcome) {
        if (afterRollback == null || outcome.status() == Status.DUPLICATE) {
            return outcome;
        }
        try {
            boolean claimed =
                    afterRollback.inTransaction(tx -> !inbox.claimedAmong(tx.connection(), consumer, List.of(eventId))
                            .isEmpty());
            return claimed ? Outcome.duplicate(eventId) : outcome;
        } catch (SQLException e) {
            return outcome;
        }
    }

    private boolean claimed(String eventId) throws SQLException {
        return transactions.inTransaction(tx ->
                !inbox.claimedAmong(tx.connection(), consumer, List.of(eventId)).isEmpty());
    }
}
