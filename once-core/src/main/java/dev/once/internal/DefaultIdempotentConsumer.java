package dev.once.internal;

import dev.once.BatchHandler;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.HandlerMisuseException;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.MismatchPolicy;
import dev.once.OutboxHeaders;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.OutcomeListener;
import dev.once.PayloadMismatchException;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.StaleFencingTokenException;
import dev.once.jdbc.Dialect;
import dev.once.tx.JoinedTransaction;
import io.micrometer.core.instrument.MeterRegistry;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

/**
 * The engine behind {@link IdempotentConsumer}. Not API. See {@link IdempotentConsumer} for the
 * rule it keeps; every transaction it runs goes through {@link Transactions}.
 */
public final class DefaultIdempotentConsumer implements IdempotentConsumer {

    private static final Logger log = LoggerFactory.getLogger(DefaultIdempotentConsumer.class);

    static final String MDC_CONSUMER = "once.consumer";
    static final String MDC_MESSAGE_ID = "once.event_id";
    static final String MDC_ATTEMPT = "once.attempt";
    static final String MDC_REDELIVERED = "once.redelivered";
    static final String MDC_OUTCOME = "once.outcome";

    private final Transactions transactions;
    private final String consumer;
    private final Handler handler;
    private final BatchHandler batchHandler;
    private final Inbox inbox;
    private final Dialect dialect;
    private final RetryPolicy conflictRetries;
    private final Predicate<Throwable> permanentFailure;
    private final OnceMetrics metrics;
    private final Clock clock;
    private final OutcomeListener listener;
    private final String verifySql;
    private final String verifyAndCommitSql;
    private final MismatchPolicy mismatchPolicy;
    private final OutboxHeaders outboxHeaders;
    // Immutable SQL of the outbox, built once: every claim transaction gets a buffer over it.
    private final OutboxRepository outboxRepository;
    // What ClaimWatch looks for in a handler's SQL, lower-cased once rather than per claim transaction.
    private final String inboxTable;
    // Null when the policy is OFF: the claims are then the inbox's own, with no fingerprint column.
    private final FingerprintedClaims fingerprints;
    /** The cheaper first try of an owned batch transaction's claim; null where the dialect has none. */
    private final AllNewClaims allNewClaims;

    /** Exactly one of {@code handler} and {@code batchHandler} is set; the other is null. */
    public DefaultIdempotentConsumer(
            Transactions transactions,
            String consumer,
            Handler handler,
            BatchHandler batchHandler,
            Inbox inbox,
            RetryPolicy conflictRetries,
            Predicate<Throwable> permanentFailure,
            MeterRegistry registry,
            Clock clock,
            OutcomeListener listener,
            MismatchPolicy mismatchPolicy,
            OutboxHeaders outboxHeaders) {
        this.transactions = transactions;
        this.consumer = consumer;
        this.handler = handler;
        this.batchHandler = batchHandler;
        this.inbox = inbox;
        this.dialect = inbox.dialect();
        this.conflictRetries = conflictRetries;
        this.permanentFailure = permanentFailure;
        this.metrics = new OnceMetrics(registry, consumer);
        this.clock = clock;
        this.listener = listener;
        this.verifySql = dialect.verifyClaim(inbox.tablePrefix());
        this.verifyAndCommitSql = dialect.verifyClaimAndCommit(inbox.tablePrefix());
        this.mismatchPolicy = mismatchPolicy;
        this.outboxHeaders = outboxHeaders;
        this.outboxRepository = new OutboxRepository(dialect, inbox.tablePrefix());
        this.inboxTable = ClaimWatch.inboxTable(inbox.tablePrefix());
        this.fingerprints = mismatchPolicy == MismatchPolicy.OFF ? null : new FingerprintedClaims(inbox, clock);
        this.allNewClaims = AllNewClaims.of(inbox, clock);
    }

    @Override
    public String consumer() {
        return consumer;
    }

    @Override
    public Inbox inbox() {
        return inbox;
    }

    @Override
    public Outcome process(Delivery delivery) {
        Objects.requireNonNull(delivery, "delivery");
        metrics.received(delivery);
        putMdc(delivery);
        try {
            if (transactions.joins()) {
                return processJoined(delivery);
            }
            Outcome outcome = withConflictRetries(delivery.eventId(), () -> processOnce(delivery));
            MDC.put(MDC_OUTCOME, outcome.tag());
            log.debug("processed {}", delivery.eventId());
            return report(delivery, outcome);
        } finally {
            clearMdc();
        }
    }

    @Override
    public List<Outcome> processBatch(List<Delivery> deliveries) {
        Objects.requireNonNull(deliveries, "deliveries");
        if (deliveries.size() <= 1) {
            return deliveries.stream().map(this::process).toList();
        }
        // First occurrence wins; later copies in the same batch mirror its outcome.
        Map<String, Delivery> firsts = new LinkedHashMap<>();
        for (Delivery d : deliveries) {
            metrics.received(Objects.requireNonNull(d, "delivery in batch"));
            firsts.putIfAbsent(d.eventId(), d);
        }
        BatchFingerprints prints = fingerprints == null ? null : new BatchFingerprints(deliveries);
        if (transactions.joins()) {
            return batchJoined(deliveries, new ArrayList<>(firsts.values()), prints);
        }
        MDC.put(MDC_CONSUMER, consumer);
        Map<String, Outcome> byId = new HashMap<>();
        try {
            Bisection.bisect(new ArrayList<>(firsts.values()), byId, part -> batchOnce(part, prints));
        } finally {
            clearMdc();
        }
        return settleAndReport(deliveries, byId, prints);
    }

    @Override
    public List<Outcome> processInOrder(List<Delivery> deliveries) {
        Objects.requireNonNull(deliveries, "deliveries");
        if (deliveries.size() <= 1 || transactions.joins()) {
            // One delivery, or one joined transaction: all of it commits or none, never out of order.
            return processBatch(deliveries);
        }
        Map<String, Delivery> firsts = new LinkedHashMap<>();
        for (Delivery d : deliveries) {
            metrics.received(Objects.requireNonNull(d, "delivery in batch"));
            firsts.putIfAbsent(d.eventId(), d);
        }
        BatchFingerprints prints = fingerprints == null ? null : new BatchFingerprints(deliveries);
        MDC.put(MDC_CONSUMER, consumer);
        Map<String, Outcome> byId = new HashMap<>();
        try {
            List<Delivery> ordered = new ArrayList<>(firsts.values());
            int acknowledged = Bisection.prefix(ordered, byId, part -> batchOnce(part, prints));
            if (acknowledged < ordered.size()) {
                Outcome stop = byId.get(ordered.get(acknowledged).eventId());
                for (Delivery d : ordered.subList(acknowledged + 1, ordered.size())) {
                    byId.put(d.eventId(), FailedOutcomes.heldBack(d, stop));
                }
            }
        } finally {
            clearMdc();
        }
        return settleAndReport(deliveries, byId, prints);
    }

    /** Every delivery's outcome (copies take their first's), each reported to meters and listener. */
    private List<Outcome> settleAndReport(
            List<Delivery> deliveries, Map<String, Outcome> byId, BatchFingerprints prints) {
        List<Outcome> outcomes = settle(deliveries, byId, prints);
        for (int i = 0; i < deliveries.size(); i++) {
            report(deliveries.get(i), outcomes.get(i));
        }
        return outcomes;
    }

    /**
     * The outcome of every delivery of a batch from those of the first occurrences: a later copy of
     * an applied event is a duplicate of it, a copy of a failed one fails alike. With fingerprints,
     * each duplicate is compared with the payload that was applied: the first occurrence's when this
     * batch applied it, the inbox's when an earlier transaction did. Counts and logs each mismatch
     * once, so it runs once per batch, after any bisection.
     */
    private List<Outcome> settle(List<Delivery> deliveries, Map<String, Outcome> byId, BatchFingerprints prints) {
        List<Outcome> outcomes = new ArrayList<>(deliveries.size());
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < deliveries.size(); i++) {
            Delivery d = deliveries.get(i);
            Outcome first = byId.get(d.eventId());
            boolean copy = !seen.add(d.eventId());
            Status status = first.status();
            if (status == Status.APPLIED && !copy || status != Status.APPLIED && status != Status.DUPLICATE) {
                outcomes.add(first);
            } else if (prints == null) {
                outcomes.add(Outcome.duplicate(d.eventId()));
            } else {
                Long applied =
                        status == Status.APPLIED ? prints.firsts.get(d.eventId()) : prints.stored.get(d.eventId());
                outcomes.add(duplicateOf(d, prints.delivered[i], applied));
            }
        }
        return outcomes;
    }

    /**
     * The fingerprints of one batch: each delivery's, in order, and each id's first occurrence's;
     * once claimed, those the inbox holds for the ids earlier transactions claimed.
     */
    private static final class BatchFingerprints {
        final Long[] delivered;
        final Map<String, Long> firsts = new HashMap<>();
        final Set<String> withPayload = new HashSet<>();
        final Map<String, Long> stored = new HashMap<>();

        BatchFingerprints(List<Delivery> deliveries) {
            delivered = new Long[deliveries.size()];
            for (int i = 0; i < delivered.length; i++) {
                Delivery d = deliveries.get(i);
                delivered[i] = FingerprintedClaims.of(d);
                if (!firsts.containsKey(d.eventId())) {
                    firsts.put(d.eventId(), delivered[i]);
                }
                if (delivered[i] != null) {
                    withPayload.add(d.eventId());
                }
            }
        }
    }

    /**
     * Claims the ids of {@code batch} (first occurrences). With fingerprints, the claim keeps them,
     * and the ones stored for the ids found claimed are read in one more statement, only when there
     * are such ids with a payload to compare.
     */
    private Set<String> claimAll(Connection c, List<Delivery> batch, BatchFingerprints prints) throws SQLException {
        if (prints == null) {
            return inbox.claimAll(
                    c, consumer, batch.stream().map(Delivery::eventId).toList());
        }
        Map<String, Long> mine = new HashMap<>();
        for (Delivery d : batch) {
            mine.put(d.eventId(), prints.firsts.get(d.eventId()));
        }
        Set<String> claimed = fingerprints.claimAll(c, consumer, mine);
        List<String> taken = new ArrayList<>();
        for (Delivery d : batch) {
            if (!claimed.contains(d.eventId()) && prints.withPayload.contains(d.eventId())) {
                taken.add(d.eventId());
            }
        }
        if (!taken.isEmpty()) {
            prints.stored.putAll(fingerprints.stored(c, consumer, taken));
        }
        return claimed;
    }

    /**
     * A delivery of an event an earlier delivery applied: a plain duplicate, unless both payloads
     * have a fingerprint and they differ, a reused event id. That is counted and logged with both
     * fingerprints (never the payload, which may hold secrets), and under FAIL_PERMANENT reported
     * for dead-lettering. Nothing is applied either way.
     */
    private Outcome duplicateOf(Delivery d, Long delivered, Long applied) {
        if (delivered == null || applied == null || delivered.equals(applied)) {
            return Outcome.duplicate(d.eventId());
        }
        metrics.mismatched();
        String was = FingerprintedClaims.hex(applied);
        String is = FingerprintedClaims.hex(delivered);
        boolean fail = mismatchPolicy == MismatchPolicy.FAIL_PERMANENT;
        log.warn(
                "event '{}' (source '{}') was already applied with a different payload: stored fingerprint {},"
                        + " this delivery's {}; the producer reused the event id for another event; {}",
                d.eventId(),
                d.source(),
                was,
                is,
                fail ? "reported FAILED_PERMANENT for dead-lettering" : "acknowledged as a duplicate, not applied");
        return fail
                ? new Outcome(d.eventId(), Status.FAILED_PERMANENT, new PayloadMismatchException(d.eventId(), was, is))
                : Outcome.duplicate(d.eventId());
    }

    /** One batch transaction over {@code batch}: what {@link Bisection} splits on. */
    private BatchResult batchOnce(List<Delivery> batch, BatchFingerprints prints) {
        // Expect every id new (see AllNewClaims) until a unique violation says one was claimed before;
        // with fingerprints the claim must also read the stored ones, which only the full claim does.
        boolean expectNew = allNewClaims != null && prints == null;
        for (int attempt = 1; ; attempt++) {
            boolean allNew = expectNew;
            try {
                BatchResult result = transactions.inTransaction(tx -> {
                    Connection c = tx.connection();
                    Set<String> claimed;
                    try {
                        if (allNew) {
                            List<String> ids =
                                    batch.stream().map(Delivery::eventId).toList();
                            if (!allNewClaims.claimAll(c, consumer, ids)) {
                                tx.setRollbackOnly();
                                return null;
                            }
                            claimed = new HashSet<>(ids);
                        } else {
                            claimed = claimAll(c, batch, prints);
                        }
                    } catch (SQLException e) {
                        if (dialect.isLockTimeout(e)) {
                            tx.setRollbackOnly();
                            return BatchResult.split(d -> inProgress(d, e), -1);
                        }
                        throw e;
                    }
                    List<Delivery> mine = new ArrayList<>(claimed.size());
                    for (Delivery d : batch) {
                        if (claimed.contains(d.eventId())) {
                            mine.add(d);
                        }
                    }
                    ClaimWatch watch = watch(c);
                    Failure failure = apply(tx, mine, watch);
                    if (failure != null) {
                        tx.setRollbackOnly();
                        SQLException conflict = transientConflict(failure.cause());
                        if (conflict != null) {
                            throw conflict;
                        }
                        log.debug("batch of {} rolled back: {}", batch.size(), String.valueOf(failure.cause()));
                        int culprit = failure.delivery() == null ? -1 : batch.indexOf(failure.delivery());
                        return BatchResult.split(d -> failed(d, failure.cause()), culprit);
                    }
                    if (!mine.isEmpty()) {
                        Outcome lost = verifyClaim(tx, mine.get(0).eventId(), watch);
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
                    Map<String, Outcome> byId = new HashMap<>();
                    for (Delivery d : batch) {
                        byId.put(
                                d.eventId(),
                                claimed.contains(d.eventId())
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
                boolean conflict = transientConflict(e) != null;
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

    /** Why the handler rolled a transaction back, and the delivery it failed on when the per-event handler ran. */
    private record Failure(Throwable cause, Delivery delivery) {}

    /**
     * Runs the handler over the deliveries a transaction claimed: the batch handler once with all
     * of them, or the per-event handler for each in order; then writes the outbox rows they all
     * added in one statement (not timed as handler work). Returns null when all went well.
     */
    private Failure apply(Transaction tx, List<Delivery> claimed, ClaimWatch watch) {
        JoinedTransaction joined = tx.joinedTransaction();
        if (joined == null) {
            return apply(tx.connection(), claimed, watch);
        }
        // Savepoints the caller's integration sets on the raw connection while the handler runs (a
        // Spring NESTED step inside the handler) reach the buffer through the joined transaction.
        joined.addSavepointListener(watch.outbox());
        try {
            return apply(tx.connection(), claimed, watch);
        } finally {
            joined.removeSavepointListener(watch.outbox());
        }
    }

    private Failure apply(Connection c, List<Delivery> claimed, ClaimWatch watch) {
        if (claimed.isEmpty()) {
            return null;
        }
        OutboxBuffer outbox = watch.outbox();
        if (batchHandler != null) {
            DefaultBatchTx batchTx = new DefaultBatchTx(c, watch, inbox.tablePrefix(), consumer, claimed, clock);
            Throwable failure = timed(() -> batchHandler.handle(List.copyOf(claimed), batchTx));
            if (failure == null && batchTx.misuse() != null) {
                failure = refused(batchTx.misuse());
            }
            if (failure != null) {
                return new Failure(failure, claimed.size() == 1 ? claimed.get(0) : null);
            }
        } else {
            for (Delivery d : claimed) {
                if (!d.eventId().equals(MDC.get(MDC_MESSAGE_ID))) {
                    putMdc(d); // process() has put this delivery's already
                }
                DefaultTx handlerTx = new DefaultTx(c, watch, inbox.tablePrefix(), consumer, d, clock, metrics);
                Throwable failure = timed(() -> handler.handle(d, handlerTx));
                if (failure == null && handlerTx.misuse() != null) {
                    failure = refused(handlerTx.misuse());
                }
                if (failure != null) {
                    return new Failure(failure, d);
                }
            }
        }
        try {
            outbox.flush();
        } catch (SQLException e) {
            // The rows of all causes go in one statement, so a failure names no single delivery.
            return new Failure(e, claimed.size() == 1 ? claimed.get(0) : null);
        }
        return null;
    }

    /** What the handlers of one claim transaction on {@code c} leave for the engine: their outbox rows, and what they were seen doing. */
    private ClaimWatch watch(Connection c) {
        return new ClaimWatch(new OutboxBuffer(c, outboxRepository, clock, outboxHeaders), dialect, inboxTable);
    }

    private static HandlerMisuseException refused(String call) {
        return new HandlerMisuseException(
                "handler tried " + call + " and swallowed the refusal; the delivery is rolled back");
    }

    private Outcome inProgress(Delivery d, SQLException e) {
        return new Outcome(
                d.eventId(),
                Status.IN_PROGRESS,
                new RetryableException(
                        "event '"
                                + d.eventId() + "' is being processed by another delivery that has not committed"
                                + " within the lock timeout ("
                                + inbox.lockTimeout().map(Duration::toString).orElse("the session's lock_timeout")
                                + "); leave it unacknowledged",
                        e));
    }

    private interface Attempt {
        Outcome run() throws SQLException;
    }

    private Outcome withConflictRetries(String eventId, Attempt attempt) {
        for (int retry = 1; ; retry++) {
            try {
                return attempt.run();
            } catch (SQLException e) {
                if (transientConflict(e) != null && conflictRetries.allowsRetry(retry)) {
                    backoff(retry);
                    continue;
                }
                return FailedOutcomes.databaseFailure(eventId, e);
            }
        }
    }

    private Outcome processOnce(Delivery d) throws SQLException {
        return transactions.inTransaction(tx -> claimAndHandle(tx, d));
    }

    /** The claim and the handler on the transaction's connection; marks it rollback-only unless applied. */
    private Outcome claimAndHandle(Transaction tx, Delivery d) throws SQLException {
        Connection c = tx.connection();
        Long fingerprint = fingerprints == null ? null : FingerprintedClaims.of(d);
        boolean claimed;
        try {
            claimed = fingerprints == null
                    ? inbox.claim(c, consumer, d.eventId())
                    : fingerprints.claim(c, consumer, d.eventId(), fingerprint);
        } catch (SQLException e) {
            if (dialect.isLockTimeout(e)) {
                tx.setRollbackOnly();
                return inProgress(d, e);
            }
            throw e;
        }
        if (!claimed) {
            // Nothing was written; ending it either way is the same, and a joined caller's work stays
            // (a reused id reported FAILED_PERMANENT included: nothing of it ran).
            if (fingerprint == null) {
                return Outcome.duplicate(d.eventId());
            }
            Long applied =
                    fingerprints.stored(c, consumer, List.of(d.eventId())).get(d.eventId());
            return duplicateOf(d, fingerprint, applied);
        }
        ClaimWatch watch = watch(c);
        Failure failure = apply(tx, List.of(d), watch);
        if (failure != null) {
            tx.setRollbackOnly();
            SQLException conflict = transientConflict(failure.cause());
            if (conflict != null && !tx.joined()) {
                throw conflict;
            }
            return failed(d, failure.cause());
        }
        Outcome lost = verifyClaim(tx, d.eventId(), watch);
        if (lost != null) {
            tx.setRollbackOnly();
            return lost;
        }
        return Outcome.applied(d.eventId());
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
     * transaction is always checked: the caller's code may reach the same connection without the guard
     * (a Spring handler's JdbcTemplate). On PostgreSQL, when the engine's own handle ends the
     * transaction, the check rides in the commit's round trip and commits when it passes; a provider's
     * owned handle gets the check alone and commits after its own pre-commit work.
     *
     * @return null when the claim holds (and, folded, is committed), else the outcome to report
     */
    private Outcome verifyClaim(Transaction tx, String eventId, ClaimWatch watch) throws SQLException {
        if (watch.ended() != null) {
            return FailedOutcomes.rolledBackByDatabase(
                    eventId,
                    "the database rolled the transaction back (" + watch.ended().getMessage()
                            + ") and the handler went on (it caught the SQLException), its later statements"
                            + " running in a new transaction",
                    watch.ended());
        }
        if (watch.suspicion() == null && !tx.joined()) {
            return null;
        }
        JoinedTransaction joined = tx.joinedTransaction();
        if (joined != null && joined.checksBeforeCommit()) {
            Connection c = tx.connection();
            joined.checkBeforeCommit(commit -> checkAtCommit(tx, c, eventId, commit));
            return null;
        }
        return askClaim(tx.connection(), eventId, verifyAndCommitSql != null && tx.commitFoldable());
    }

    /**
     * The check left to the caller's commit ({@link JoinedTransaction#checkBeforeCommit}): asked there, the
     * caller's own work between the handler and the commit is covered too, and when the caller's commit
     * would send nothing but the COMMIT, the check carries it (on PostgreSQL; the driver's commit then
     * finds the transaction ended and sends nothing). A lost claim throws its outcome's failure, which
     * rolls the caller's transaction back, and the outcome is reported as that failure.
     */
    private boolean checkAtCommit(Transaction tx, Connection c, String eventId, boolean commit) throws SQLException {
        boolean fold = commit && verifyAndCommitSql != null;
        Outcome lost = askClaim(c, eventId, fold);
        if (lost != null) {
            tx.lostAtCommit(lost);
            throw (RuntimeException) lost.failure();
        }
        return fold;
    }

    /**
     * Asks the database whether the claim is still the open transaction's; folded, with the COMMIT in
     * the same round trip, which the server runs only when the check passes.
     *
     * @return null when the claim holds (and, folded, is committed), else the outcome to report
     */
    private Outcome askClaim(Connection c, String eventId, boolean fold) throws SQLException {
        int verdict;
        try (PreparedStatement ps = c.prepareStatement(fold ? verifyAndCommitSql : verifySql)) {
            ps.setString(1, consumer);
            ps.setString(2, eventId);
            if (fold) {
                ps.execute();
                return null;
            }
            try (ResultSet rs = ps.executeQuery()) {
                verdict = rs.next() ? rs.getInt(1) : 0;
            }
        } catch (SQLException e) {
            if (dialect.isAbortedTransaction(e)) {
                return FailedOutcomes.rolledBackByDatabase(
                        eventId,
                        "a statement of the handler failed and the handler went on"
                                + " (it caught the SQLException), so the database aborted the transaction",
                        e);
            }
            if (dialect.isClaimMissing(e)) {
                return misuse(
                        eventId,
                        "the claim is no longer part of the transaction being committed: the handler"
                                + " deleted it or ended the claim transaction behind the engine's back");
            }
            throw e;
        }
        return verdict == 1
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

    /**
     * Joined: one attempt on the caller's transaction (a deadlock there aborts the caller's work too,
     * so it is not retried here); the outcome is reported when the caller's transaction ends.
     */
    private Outcome processJoined(Delivery d) {
        Outcome[] result = new Outcome[1];
        try {
            transactions.inTransaction(tx -> {
                try {
                    result[0] = claimAndHandle(tx, d);
                } catch (SQLException e) {
                    tx.setRollbackOnly();
                    result[0] = FailedOutcomes.databaseFailure(d.eventId(), e);
                }
                Outcome provisional = result[0];
                tx.afterCompletion(committed ->
                        reportJoined(d, tx.lostAtCommit() != null ? tx.lostAtCommit() : provisional, committed));
                return provisional;
            });
        } catch (SQLException e) {
            // No transaction could be joined: nothing ran, nothing is pending.
            return report(d, FailedOutcomes.databaseFailure(d.eventId(), e));
        }
        return result[0];
    }

    private List<Outcome> batchJoined(List<Delivery> deliveries, List<Delivery> firsts, BatchFingerprints prints) {
        Map<String, Outcome> byId = new HashMap<>();
        List<List<Outcome>> settled = new ArrayList<>(1);
        try {
            transactions.inTransaction(tx -> {
                Set<String> claimed;
                try {
                    claimed = claimAll(tx.connection(), firsts, prints);
                } catch (SQLException e) {
                    tx.setRollbackOnly();
                    for (Delivery d : firsts) {
                        byId.put(d.eventId(), FailedOutcomes.databaseFailure(d.eventId(), e));
                    }
                    // Reported when the caller's transaction ends, like every joined outcome.
                    List<Outcome> failedAll = settle(deliveries, byId, prints);
                    settled.add(failedAll);
                    tx.afterCompletion(committed -> {
                        for (int i = 0; i < deliveries.size(); i++) {
                            report(deliveries.get(i), failedAll.get(i));
                        }
                    });
                    return null;
                }
                List<Delivery> mine = new ArrayList<>(claimed.size());
                for (Delivery d : firsts) {
                    if (claimed.contains(d.eventId())) {
                        mine.add(d);
                    } else {
                        byId.put(d.eventId(), Outcome.duplicate(d.eventId()));
                    }
                }
                ClaimWatch watch = watch(tx.connection());
                Failure failure = apply(tx, mine, watch);
                if (failure == null) {
                    for (Delivery d : mine) {
                        byId.put(d.eventId(), Outcome.applied(d.eventId()));
                    }
                } else {
                    tx.setRollbackOnly();
                    // Everything applied in this transaction rolls back with the failing delivery. A
                    // joined transaction cannot be split, so a batch handler's failure names no culprit.
                    Outcome failedOne = failure.delivery() == null ? null : failed(failure.delivery(), failure.cause());
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
                if (failure == null && !claimed.isEmpty()) {
                    String first = claimed.iterator().next();
                    Outcome lost;
                    try {
                        lost = verifyClaim(tx, first, watch);
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
                List<Outcome> outcomes = settle(deliveries, byId, prints);
                settled.add(outcomes);
                tx.afterCompletion(committed -> {
                    Outcome lostAtCommit = tx.lostAtCommit();
                    for (int i = 0; i < deliveries.size(); i++) {
                        Delivery d = deliveries.get(i);
                        reportJoined(
                                d,
                                lostAtCommit != null && claimed.contains(d.eventId())
                                        ? FailedOutcomes.notRun(d, lostAtCommit)
                                        : outcomes.get(i),
                                committed);
                    }
                });
                return null;
            });
        } catch (SQLException e) {
            List<Outcome> failed = new ArrayList<>(deliveries.size());
            for (Delivery d : deliveries) {
                failed.add(report(d, FailedOutcomes.databaseFailure(d.eventId(), e)));
            }
            return failed;
        } finally {
            clearMdc();
        }
        return settled.get(0);
    }

    private void reportJoined(Delivery d, Outcome provisional, boolean committed) {
        Outcome last = provisional;
        if (!committed && provisional.status() == Status.APPLIED) {
            last = new Outcome(
                    d.eventId(),
                    Status.FAILED_RETRYABLE,
                    new RetryableException("event '" + d.eventId()
                            + "' was applied in the caller's transaction, which rolled back: nothing of it stands"));
        }
        report(d, last);
    }

    private Outcome report(Delivery d, Outcome o) {
        metrics.outcome(o);
        if (listener != null) {
            try {
                listener.outcome(d, o);
            } catch (RuntimeException e) {
                log.warn("outcome listener failed for event '{}'", d.eventId(), e);
            }
        }
        return o;
    }

    /** The deadlock or serialization failure anywhere in the cause chain (jOOQ, Spring, Jdbi wrap them), or null. */
    private SQLException transientConflict(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof SQLException sql) {
                for (SQLException s = sql; s != null; s = s.getNextException()) {
                    if (dialect.isTransientConflict(s)) {
                        return s;
                    }
                }
            }
        }
        return null;
    }

    /** One call of the handler or the batch handler. */
    @FunctionalInterface
    private interface HandlerCall {
        void run() throws Exception;
    }

    private Throwable timed(HandlerCall call) {
        long start = System.nanoTime();
        try {
            call.run();
            return null;
        } catch (Exception e) {
            if (e instanceof StaleFencingTokenException) {
                metrics.fenceRejected();
            }
            return e;
        } finally {
            metrics.handlerDuration().record(System.nanoTime() - start, TimeUnit.NANOSECONDS);
        }
    }

    private Outcome failed(Delivery d, Throwable failure) {
        boolean permanent = failure instanceof HandlerMisuseException || permanentFailure.test(failure);
        if (permanent) {
            log.warn("event '{}' failed permanently, rolled back: {}", d.eventId(), failure.toString());
        } else {
            log.info("event '{}' failed, rolled back, will be redelivered: {}", d.eventId(), failure.toString());
        }
        return new Outcome(d.eventId(), permanent ? Status.FAILED_PERMANENT : Status.FAILED_RETRYABLE, failure);
    }

    private void backoff(int retry) {
        try {
            Thread.sleep(Math.max(1, conflictRetries.delay(retry).toMillis()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void putMdc(Delivery d) {
        MDC.put(MDC_CONSUMER, consumer);
        MDC.put(MDC_MESSAGE_ID, d.eventId());
        MDC.put(MDC_ATTEMPT, Integer.toString(d.attempt()));
        MDC.put(MDC_REDELIVERED, Boolean.toString(d.redelivered()));
    }

    private static final String[] MDC_KEYS = {MDC_CONSUMER, MDC_MESSAGE_ID, MDC_ATTEMPT, MDC_REDELIVERED, MDC_OUTCOME};

    private static void clearMdc() {
        for (String key : MDC_KEYS) {
            MDC.remove(key);
        }
    }
}
