package dev.once.internal;

import dev.once.HandlerMisuseException;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialect;
import dev.once.tx.JoinedTransaction;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The claim check after the handler: whether the claim is still the open transaction's, asked
 * only when it can have been lost, at once or (joined) left to the caller's commit, and folded into
 * the COMMIT where the commit is the COMMIT alone. Owned and joined mode alike. Not API.
 */
final class ClaimCheck {

    // The engine's log category, as before the engine was split into rooms: users may have configured it.
    private static final Logger log = LoggerFactory.getLogger(DefaultIdempotentConsumer.class);

    private final String consumer;
    private final Dialect dialect;
    private final String tablePrefix;
    private final String verifySql;
    private final String verifyAndCommitSql;
    private final StatementsTogether together;

    ClaimCheck(String consumer, Dialect dialect, String tablePrefix, StatementsTogether together) {
        this.consumer = consumer;
        this.dialect = dialect;
        this.tablePrefix = tablePrefix;
        this.verifySql = dialect.verifyClaim(tablePrefix);
        this.verifyAndCommitSql = dialect.verifyClaimAndCommit(tablePrefix);
        this.together = together;
    }

    /**
     * The check after the handler: the claim must still be this open transaction's, and the
     * transaction able to commit. The guarded connection refuses what would end the transaction
     * (commit, rollback, COMMIT as SQL, implicit commits, unwrap to the driver), but it cannot see
     * what the database did. What only the database can tell, each proved by a test:
     * <ul>
     *   <li>a statement failed and the handler went on (it caught the SQLException): on PostgreSQL the
     *       transaction is aborted, and COMMIT would answer ROLLBACK, unless the handler had rolled back
     *       to a savepoint of its own, after which all is well (TransactionGuardTest, and
     *       CallerTransactionScenarios' handlers that recover in their own savepoint);</li>
     *   <li>on MariaDB a deadlock rolled the whole transaction back and the handler's later statements ran
     *       in a new one, maybe after another delivery committed the same claim, which a count would
     *       then find: the guard sees the error ({@link Dialect#endsTransaction}) and no check is asked
     *       (TransactionGuardMariaDbTest, CallerTransactionMariaDbTest);</li>
     *   <li>the claim row itself deleted by a statement naming the inbox, or a procedure that ended the
     *       transaction (TransactionGuardTest);</li>
     *   <li>joined: a claim made inside the caller's savepoint (a subtransaction, whose xmin is not the
     *       top-level id) must pass, and a claim rolled back to a savepoint and committed meanwhile by
     *       someone else must not (CallerTransactionPostgresTest).</li>
     * </ul>
     * Each of these passes through the guard first (an SQLException on its way to the handler, SQL naming
     * the inbox, a procedure call), so an owned transaction in which the guard saw none of them needs no
     * check: the default path sends claim, handler statements and COMMIT, and nothing else. A joined
     * transaction is checked unless its integration confined the handler to the guarded connection
     * ({@link JoinedTransaction#confineHandlerTo}: the Spring listener in a transaction of its own binds it
     * where a body's JdbcTemplate looks): otherwise the caller's code may reach the same connection without
     * the guard. On PostgreSQL, when the engine's own handle ends the
     * transaction, the check rides in the commit's round trip and commits when it passes; a provider's
     * owned handle gets the check alone and commits after its own pre-commit work.
     *
     * <p>A batch transaction checks every claim it made, in one statement: a handler that deleted the
     * claim of its batch's third event lost that one only (TransactionGuardTest's batch cases).
     *
     * @param eventIds the ids this transaction claimed, distinct, at least one; an outcome names the first
     * @return null when the claims hold (and, folded, are committed), else the outcome to report
     */
    Outcome verifyClaim(Transaction tx, List<String> eventIds, ClaimWatch watch) throws SQLException {
        return verifyClaim(tx, eventIds.get(0), eventIds, watch);
    }

    /**
     * {@link #verifyClaim(Transaction, List, ClaimWatch)} for the one id a single delivery's transaction claimed:
     * its list is made only when the database is asked (a transaction per delivery, and most ask nothing).
     */
    Outcome verifyClaim(Transaction tx, String eventId, ClaimWatch watch) throws SQLException {
        return verifyClaim(tx, eventId, null, watch);
    }

    // eventIds: the ids, the first eventId; null for eventId alone (ids(...) makes its list when it is asked)
    private Outcome verifyClaim(Transaction tx, String eventId, List<String> eventIds, ClaimWatch watch)
            throws SQLException {
        if (watch.ended() != null) {
            return FailedOutcomes.endedUnderTheHandler(eventId, watch.ended());
        }
        if (watch.suspicion() == null && !tx.joined()) {
            return null;
        }
        JoinedTransaction joined = tx.joinedTransaction();
        if (joined != null && joined.checksBeforeCommit()) {
            if (joined.checksAfterHandler()) {
                // the caller hears a claim lost under the handler from the call itself; the check at the commit
                // then covers what the caller does on the connection after it
                Outcome lost = askClaim(tx.connection(), ids(eventId, eventIds), false);
                if (lost != null) {
                    return lost;
                }
            }
            // Confined (every statement of this handler passed its guard, which saw nothing) and nothing else
            // due before the commit: nothing between the claim and the COMMIT went unseen, as in an owned
            // transaction, so the check would cost a statement and catch nothing. Read now, after the handler:
            // the mark must name this handler's own connection.
            boolean sawAll = watch.suspicion() == null
                    && joined.handlerConfinedTo() instanceof GuardedConnection g
                    && g.watches(watch);
            // tx, not its connection, is captured: the same connection (a handle's is final), one capture fewer
            joined.checkBeforeCommit(
                    commit -> !(sawAll && commit) && checkAtCommit(tx, ids(eventId, eventIds), commit));
            return null;
        }
        return askClaim(tx.connection(), ids(eventId, eventIds), tx.commitFoldable());
    }

    private static List<String> ids(String eventId, List<String> eventIds) {
        return eventIds != null ? eventIds : List.of(eventId);
    }

    /**
     * The check left to the caller's commit ({@link JoinedTransaction#checkBeforeCommit}): asked there, the
     * caller's own work between the handler and the commit is covered too, and when the caller's commit
     * would send nothing but the COMMIT, the check carries it (on PostgreSQL; the driver's commit then
     * finds the transaction ended and sends nothing). A lost claim throws its outcome's failure, which
     * rolls the caller's transaction back, and the outcome is reported as that failure.
     */
    private boolean checkAtCommit(Transaction tx, List<String> eventIds, boolean commit) throws SQLException {
        Connection c = tx.connection();
        Outcome lost = askClaim(c, eventIds, commit);
        if (lost != null) {
            tx.lostAtCommit(lost);
            throw (RuntimeException) lost.failure();
        }
        return folds(c, eventIds.size(), commit);
    }

    /**
     * Whether the check of {@code n} claims carries the COMMIT: the commit is the COMMIT alone, one statement can,
     * and the driver takes the check and the COMMIT in one string.
     */
    private boolean folds(Connection c, int n, boolean foldable) throws SQLException {
        return foldable && n <= dialect.maxBatchClaimSize() && checkSql(n, true) != null && together.allowed(c);
    }

    /** The check of {@code n} claims, with the COMMIT when {@code withCommit}; null where the dialect cannot fold it. */
    private String checkSql(int n, boolean withCommit) {
        if (n == 1) {
            return withCommit ? verifyAndCommitSql : verifySql;
        }
        return withCommit ? dialect.verifyClaimsAndCommit(tablePrefix, n) : dialect.verifyClaims(tablePrefix, n);
    }

    /**
     * Asks the database whether the claims are still the open transaction's; folded when {@code foldable}
     * and the dialect can, with the COMMIT in the same round trip, which the server runs only when the
     * check passes.
     *
     * @return null when the claims hold (and, folded, are committed), else the outcome to report
     */
    private Outcome askClaim(Connection c, List<String> eventIds, boolean foldable) throws SQLException {
        int chunk = dialect.maxBatchClaimSize();
        if (eventIds.size() > chunk) {
            // As the claim went (MariaDB: no array bind, IN lists of at most a claim statement's ids); the
            // COMMIT is then the caller's own, after the last chunk.
            for (int from = 0; from < eventIds.size(); from += chunk) {
                Outcome lost = askClaim(c, eventIds.subList(from, Math.min(eventIds.size(), from + chunk)), false);
                if (lost != null) {
                    return lost;
                }
            }
            return null;
        }
        String eventId = eventIds.get(0);
        boolean fold = folds(c, eventIds.size(), foldable);
        long verdict;
        try (PreparedStatement ps = c.prepareStatement(checkSql(eventIds.size(), fold))) {
            if (eventIds.size() == 1) {
                ps.setString(1, consumer);
                ps.setString(2, eventId);
            } else {
                dialect.bindVerifyClaims(ps, consumer, eventIds);
            }
            if (fold) {
                ps.execute();
                return null;
            }
            try (ResultSet rs = ps.executeQuery()) {
                verdict = rs.next() ? rs.getLong(1) : 0;
            }
        } catch (SQLException e) {
            if (dialect.isAbortedTransaction(e)) {
                return FailedOutcomes.abortedUnderTheHandler(eventId, e);
            }
            if (dialect.isClaimMissing(e)) {
                return misuse(
                        eventId,
                        "the claim is no longer part of the transaction being committed: the handler"
                                + " deleted it or ended the claim transaction behind the engine's back");
            }
            throw e;
        }
        return verdict == eventIds.size()
                ? null
                : FailedOutcomes.rolledBackByDatabase(
                        eventId,
                        "the claim is gone from the transaction: the"
                                + " database rolled it back (a deadlock the handler caught and went on from, its later statements"
                                + " running in a new transaction) or the handler deleted it",
                        null);
    }

    private Outcome misuse(String eventId, String why) {
        HandlerMisuseException e = new HandlerMisuseException("event '" + eventId + "' not applied: " + why);
        log.warn("{}", e.getMessage());
        return new Outcome(eventId, Status.FAILED_PERMANENT, e);
    }
}
