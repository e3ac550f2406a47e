package dev.once.internal;

import dev.once.BatchHandler;
import dev.once.ClaimHeldOnThreadException;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.HandlerMisuseException;
import dev.once.Inbox;
import dev.once.OutboxHeaders;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryableException;
import dev.once.StaleFencingTokenException;
import dev.once.jdbc.Dialect;
import dev.once.tx.JoinedTransaction;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

/**
 * The work inside one claim transaction, whoever owns it: claim the ids, run the handler (or the
 * batch handler) over the claimed ones on the guarded connection, write their outbox rows, and say
 * what failed. What a failure does to the transaction (retry, split, report at the caller's commit)
 * is the mode's: {@link OwnedMode}, {@link JoinedMode}. Not API.
 */
final class ClaimRun {

    // The engine's log category, as before the engine was split into rooms: users may have configured it.
    private static final Logger log = LoggerFactory.getLogger(DefaultIdempotentConsumer.class);

    private final String consumer;
    private final Handler handler;
    private final BatchHandler batchHandler;
    private final Inbox inbox;
    private final Dialect dialect;
    private final Predicate<Throwable> permanentFailure;
    private final OnceMetrics metrics;
    private final Clock clock;
    // What every claim transaction's watch shares, built once: the outbox's SQL, the inbox's name lower-cased
    // for the guard, the SQL found harmless.
    private final ClaimWatch.Consumer watchConsumer;
    // Null when the policy is OFF: the claims are then the inbox's own, with no fingerprint column.
    private final FingerprintedClaims fingerprints;
    private final Settlement settlement;
    private final ClaimCheck check;
    // The plain-insert claim of an owned transaction (see AllNewClaims); null where the dialect has
    // none, or with fingerprints (a duplicate's stored fingerprint is read in the same transaction).
    private final AllNewClaims allNewClaims;
    // Whether a delivery that may take the plain insert takes it, or the ON CONFLICT claim (a likely copy).
    private final CopyHint copyHint;
    // Joined transactions begun for one call and holding nothing else (TransactionProvider.dedicated):
    // the claim is their first statement too, and rolling one back after a duplicate undoes nobody's work.
    private final boolean dedicated;

    /** Exactly one of {@code handler} and {@code batchHandler} is set; the other is null. */
    ClaimRun(
            String consumer,
            Handler handler,
            BatchHandler batchHandler,
            Inbox inbox,
            Predicate<Throwable> permanentFailure,
            OnceMetrics metrics,
            Clock clock,
            OutboxHeaders outboxHeaders,
            FingerprintedClaims fingerprints,
            Settlement settlement,
            ClaimCheck check,
            AllNewClaims allNewClaims,
            boolean dedicated) {
        this.consumer = consumer;
        this.handler = handler;
        this.batchHandler = batchHandler;
        this.inbox = inbox;
        this.dialect = inbox.dialect();
        this.permanentFailure = permanentFailure;
        this.metrics = metrics;
        this.clock = clock;
        this.watchConsumer = new ClaimWatch.Consumer(
                dialect,
                ClaimWatch.inboxTable(inbox.tablePrefix()),
                new HarmlessSql(),
                new OutboxRepository(dialect, inbox.tablePrefix()),
                clock,
                outboxHeaders);
        this.fingerprints = fingerprints;
        this.settlement = settlement;
        this.check = check;
        this.allNewClaims = fingerprints == null ? allNewClaims : null;
        this.copyHint = this.allNewClaims == null ? null : new CopyHint();
        this.dedicated = dedicated;
    }

    /** The claim and the handler on the transaction's connection; marks it rollback-only unless applied. */
    Outcome claimAndHandle(Transaction tx, Delivery d) throws SQLException {
        Connection c = tx.connection();
        Long fingerprint = fingerprints == null ? null : FingerprintedClaims.of(d);
        // In a transaction of its own the claim is the first statement, so it may be the plain insert
        // that fails on a copy claimed before; a caller's transaction must stay usable after a duplicate,
        // unless it was begun for this delivery alone (dedicated: Spring's @IdempotentListener begins one).
        // There the hint picks the form: the plain insert for an id expected new, ON CONFLICT for a likely copy.
        boolean alone = allNewClaims != null && (!tx.joined() || dedicated);
        boolean claimed;
        boolean plainInsert = false;
        try {
            if (alone && !copyHint.likelyCopy(d.eventId())) {
                plainInsert = true;
                claimed = allNewClaims.claim(c, d.eventId());
            } else {
                claimed = fingerprints == null
                        ? inbox.claim(c, consumer, d.eventId())
                        : fingerprints.claim(c, consumer, d.eventId(), fingerprint);
            }
        } catch (SQLException e) {
            if (dialect.isLockTimeout(e)) {
                tx.setRollbackOnly();
                return inProgress(tx, d, e);
            }
            throw e;
        }
        if (alone) {
            copyHint.claimed(d.eventId(), !claimed);
            if (!claimed && plainInsert) {
                tx.setRollbackOnly(); // the failed plain insert aborted it; it holds nothing else
                return Outcome.duplicate(d.eventId());
            }
            // A likely copy's ON CONFLICT claim that found the id taken wrote nothing and left the transaction
            // usable: it commits empty, on the path every fresh event's commit takes, where a rollback (an
            // exception through the caller's template, rollback-only marks on every bound resource, the
            // rollback path run once in twenty deliveries) cost the copy about twice the CPU of
            // processed_events' copy (SpringListenerProbe, docs/benchmarks.md). Same round trips either way.
        }
        if (claimed && tx.joined()) {
            ClaimsOnThread.claimed(tx.joinedTransaction(), inbox.tablePrefix(), consumer, d.eventId());
        }
        if (!claimed) {
            // Nothing was written; ending it either way is the same, and a joined caller's work stays
            // (a reused id reported FAILED_PERMANENT included: nothing of it ran).
            if (fingerprint == null) {
                return Outcome.duplicate(d.eventId());
            }
            Long applied =
                    fingerprints.stored(c, consumer, List.of(d.eventId())).get(d.eventId());
            return settlement.duplicateOf(d, fingerprint, applied);
        }
        ClaimWatch watch = watch(c);
        Failure failure = apply(tx, d, watch);
        if (failure != null) {
            tx.setRollbackOnly();
            SQLException conflict = transientConflict(failure.cause());
            if (conflict != null && !tx.joined()) {
                throw conflict;
            }
            return failed(d, failure.cause());
        }
        Outcome lost = check.verifyClaim(tx, d.eventId(), watch);
        if (lost != null) {
            tx.setRollbackOnly();
            return lost;
        }
        return Outcome.applied(d.eventId());
    }

    /**
     * Claims the ids of {@code batch} (first occurrences). With fingerprints, the claim keeps them,
     * and the ones stored for the ids found claimed are read in one more statement, only when there
     * are such ids with a payload to compare.
     */
    Set<String> claimAll(Connection c, List<Delivery> batch, BatchFingerprints prints) throws SQLException {
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

    /** Why the handler rolled a transaction back, and the delivery it failed on when the per-event handler ran. */
    record Failure(Throwable cause, Delivery delivery) {}

    /**
     * Runs the handler over the deliveries a transaction claimed: the batch handler once with all
     * of them, or the per-event handler for each in order; then writes the outbox rows they all
     * added in one statement (not timed as handler work). Returns null when all went well.
     */
    Failure apply(Transaction tx, List<Delivery> claimed, ClaimWatch watch) {
        return apply(tx, claimed, null, watch);
    }

    /** {@link #apply(Transaction, List, ClaimWatch)} for one delivery, with no list made for it (a batch handler's aside). */
    Failure apply(Transaction tx, Delivery claimed, ClaimWatch watch) {
        return apply(tx, null, claimed, watch);
    }

    // Exactly one of claimed and one is set.
    private Failure apply(Transaction tx, List<Delivery> claimed, Delivery one, ClaimWatch watch) {
        JoinedTransaction joined = tx.joinedTransaction();
        if (joined == null) {
            return apply(tx.connection(), claimed, one, watch);
        }
        // Savepoints the caller's integration sets on the raw connection while the handler runs (a
        // Spring NESTED step inside the handler) reach the buffer through the joined transaction.
        joined.addSavepointListener(watch);
        watch.joined(joined);
        try {
            return apply(tx.connection(), claimed, one, watch);
        } finally {
            joined.removeSavepointListener(watch);
        }
    }

    private Failure apply(Connection c, List<Delivery> claimed, Delivery one, ClaimWatch watch) {
        if (one != null && batchHandler == null) {
            Failure failure = handle(c, one, watch);
            return failure != null ? failure : written(c, watch, one);
        }
        if (one != null) {
            claimed = List.of(one); // the batch handler takes a list
        }
        if (claimed.isEmpty()) {
            return null;
        }
        if (batchHandler != null) {
            DefaultBatchTx batchTx = new DefaultBatchTx(c, watch, inbox.tablePrefix(), consumer, claimed, clock);
            Throwable failure = timed(claimed, batchTx);
            if (failure == null && batchTx.misuse() != null) {
                failure = refused(batchTx.misuse());
            }
            if (failure != null) {
                return new Failure(failure, claimed.size() == 1 ? claimed.get(0) : null);
            }
        } else {
            for (int i = 0; i < claimed.size(); i++) { // indexed: no iterator per delivery
                Failure failure = handle(c, claimed.get(i), watch);
                if (failure != null) {
                    return failure;
                }
            }
        }
        return written(c, watch, claimed.size() == 1 ? claimed.get(0) : null);
    }

    /** The per-event handler's call with {@code d}; its failure, or null. */
    private Failure handle(Connection c, Delivery d, ClaimWatch watch) {
        if (!d.eventId().equals(MDC.get(DeliveryMdc.MDC_MESSAGE_ID))) {
            DeliveryMdc.put(consumer, d); // process() has put this delivery's already
        }
        DefaultTx handlerTx = new DefaultTx(c, watch, inbox.tablePrefix(), consumer, d, clock);
        Throwable failure = timed(d, handlerTx);
        if (failure == null && handlerTx.misuse() != null) {
            failure = refused(handlerTx.misuse());
        }
        return failure != null ? new Failure(failure, d) : null;
    }

    /**
     * After the handlers: their outbox rows written and the fences checked again; the failure, naming {@code alone}
     * (the transaction's one delivery, else null), or null.
     */
    private Failure written(Connection c, ClaimWatch watch, Delivery alone) {
        try {
            watch.flushOutbox();
        } catch (SQLException e) {
            // The rows of all causes go in one statement, so a failure names no single delivery.
            return new Failure(e, alone);
        }
        try {
            // Last before the commit, as the relay's: a check undone by a savepoint, or refused and caught,
            // must not let the handlers' writes commit after a newer holder's.
            watch.fenceAgain(c);
        } catch (StaleFencingTokenException e) {
            metrics.fenceRejected();
            return new Failure(e, alone);
        } catch (SQLException e) {
            return new Failure(watch.failed(e), alone);
        }
        return null;
    }

    /** What the handlers of one claim transaction on {@code c} leave for the engine: their outbox rows, and what they were seen doing. */
    ClaimWatch watch(Connection c) {
        return new ClaimWatch(watchConsumer, c);
    }

    private static HandlerMisuseException refused(String call) {
        return new HandlerMisuseException(
                "handler tried " + call + " and swallowed the refusal; the delivery is rolled back");
    }

    /** Notes the claims a joined transaction took, which it holds until it ends ({@link ClaimsOnThread}). */
    void claimedIn(Transaction tx, Collection<String> ids) {
        ClaimsOnThread.claimed(tx.joinedTransaction(), inbox.tablePrefix(), consumer, ids);
    }

    /** Whether the open transaction {@code mine} took {@code id}'s claim itself ({@link ClaimsOnThread#heldBy}). */
    boolean claimHeldBy(JoinedTransaction mine, String id) {
        return ClaimsOnThread.heldBy(mine, inbox.tablePrefix(), consumer, id);
    }

    /**
     * Whether another open transaction of this thread than {@code mine} (null: the engine's own) holds {@code d}'s
     * claim, which this call could only wait for ({@link ClaimsOnThread}).
     */
    boolean claimHeldOnThread(JoinedTransaction mine, Delivery d) {
        return ClaimsOnThread.heldByAnother(mine, inbox.tablePrefix(), consumer, d.eventId());
    }

    /**
     * IN_PROGRESS for every one of {@code deliveries} when another open transaction of this thread than {@code
     * mine} holds the claim of one of them, by id; else null. Nothing of them runs.
     */
    Map<String, Outcome> heldOnThread(JoinedTransaction mine, List<Delivery> deliveries) {
        Delivery held = ClaimsOnThread.heldByAnother(mine, inbox.tablePrefix(), consumer, deliveries);
        if (held == null) {
            return null;
        }
        Map<String, Outcome> byId = new HashMap<>(deliveries.size() * 4 / 3 + 1);
        for (Delivery d : deliveries) {
            byId.put(d.eventId(), heldOnThread(d, held));
        }
        return byId;
    }

    /** IN_PROGRESS for {@code d}, not run because this thread's suspended transaction holds {@code held}'s claim. */
    Outcome heldOnThread(Delivery d, Delivery held) {
        return new Outcome(
                d.eventId(),
                Status.IN_PROGRESS,
                new ClaimHeldOnThreadException(
                        "event '" + held.eventId() + "' of consumer '" + consumer + "' is claimed by"
                                + " another transaction of this thread, open and suspended (Spring's REQUIRES_NEW or"
                                + " NOT_SUPPORTED inside it?), which cannot end before this call returns: its claim would wait"
                                + " for ever. Nothing ran" + (d == held ? "" : " of the deliveries called with it")
                                + "; leave it unacknowledged: redelivered after that transaction ends, it is applied or a"
                                + " duplicate"));
    }

    /**
     * IN_PROGRESS for {@code d}, whose claim in {@code tx} waited past the lock timeout. The lock's holder is another
     * delivery of it that has not committed, or another transaction of this thread (a locking read of the inbox, a
     * gap lock on MariaDB), which ends only after this call returns; the message names this thread's open one when
     * once knows it (it claimed events of this consumer): redelivered there, the event would wait again.
     */
    Outcome inProgress(Transaction tx, Delivery d, SQLException e) {
        boolean ownBeside = ClaimsOnThread.openBeside(tx.joinedTransaction(), inbox.tablePrefix(), consumer);
        return new Outcome(
                d.eventId(),
                Status.IN_PROGRESS,
                new RetryableException(
                        "event '" + d.eventId() + "' of consumer '" + consumer + "' could not be claimed within the"
                                + " lock timeout ("
                                + inbox.lockTimeout().map(Duration::toString).orElse("the session's lock_timeout")
                                + "): a transaction that has not committed locks its claim, another delivery of it"
                                + " or another transaction of this thread"
                                + (ownBeside
                                        ? " (this thread has a transaction open that claimed events of consumer '"
                                                + consumer + "', suspended or on another connection: its locks end"
                                                + " only after this call returns)"
                                        : "")
                                + "; leave it unacknowledged",
                        e));
    }

    /** The deadlock or serialization failure anywhere in the cause chain (jOOQ, Spring, Jdbi wrap them), or null. */
    SQLException transientConflict(Throwable failure) {
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

    /**
     * One call of the handler with {@code d} and {@code tx}, timed; its failure, or null. The arguments are
     * passed as they are, not captured in a lambda per call (one per delivery).
     */
    private Throwable timed(Delivery d, DefaultTx tx) {
        long start = System.nanoTime();
        try {
            handler.handle(d, tx);
            return null;
        } catch (Exception e) {
            return handlerFailed(e);
        } finally {
            handlerTook(start);
        }
    }

    /** One call of the batch handler with {@code batch} and {@code tx}, timed; its failure, or null. */
    private Throwable timed(List<Delivery> batch, DefaultBatchTx tx) {
        long start = System.nanoTime();
        try {
            batchHandler.handle(List.copyOf(batch), tx);
            return null;
        } catch (Exception e) {
            return handlerFailed(e);
        } finally {
            handlerTook(start);
        }
    }

    private Exception handlerFailed(Exception e) {
        if (e instanceof StaleFencingTokenException) {
            metrics.fenceRejected();
        }
        return e;
    }

    private void handlerTook(long start) {
        metrics.handlerDuration().record(System.nanoTime() - start, TimeUnit.NANOSECONDS);
    }

    Outcome failed(Delivery d, Throwable failure) {
        return logged(failure(d, failure));
    }

    /** The outcome of a handler's {@code failure}, not yet logged: {@link CommitClaim} may still find it a duplicate. */
    Outcome failure(Delivery d, Throwable failure) {
        boolean permanent = failure instanceof HandlerMisuseException || permanentFailure.test(failure);
        return new Outcome(d.eventId(), permanent ? Status.FAILED_PERMANENT : Status.FAILED_RETRYABLE, failure);
    }

    Outcome logged(Outcome failed) {
        if (failed.status() == Status.FAILED_PERMANENT) {
            log.warn(
                    "event '{}' failed permanently, rolled back: {}",
                    failed.eventId(),
                    failed.failure().toString());
        } else {
            log.info(
                    "event '{}' failed, rolled back, will be redelivered: {}",
                    failed.eventId(),
                    failed.failure().toString());
        }
        return failed;
    }
}
