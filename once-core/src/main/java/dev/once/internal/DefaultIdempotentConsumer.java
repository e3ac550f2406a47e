package dev.once.internal;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.HandlerMisuseException;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.OutcomeListener;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.StaleFencingTokenException;
import dev.once.jdbc.Dialect;
import io.micrometer.core.instrument.MeterRegistry;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

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
    private final Inbox inbox;
    private final Dialect dialect;
    private final RetryPolicy conflictRetries;
    private final Predicate<Throwable> permanentFailure;
    private final OnceMetrics metrics;
    private final Clock clock;
    private final OutcomeListener listener;

    public DefaultIdempotentConsumer(Transactions transactions, String consumer, Handler handler, Inbox inbox,
                                     RetryPolicy conflictRetries, Predicate<Throwable> permanentFailure,
                                     MeterRegistry registry, Clock clock, OutcomeListener listener) {
        this.transactions = transactions;
        this.consumer = consumer;
        this.handler = handler;
        this.inbox = inbox;
        this.dialect = inbox.dialect();
        this.conflictRetries = conflictRetries;
        this.permanentFailure = permanentFailure;
        this.metrics = new OnceMetrics(registry, consumer);
        this.clock = clock;
        this.listener = listener;
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
        if (transactions.joins()) {
            return batchJoined(deliveries, new ArrayList<>(firsts.values()));
        }
        MDC.put(MDC_CONSUMER, consumer);
        Map<String, Outcome> byId;
        try {
            byId = batchOnce(new ArrayList<>(firsts.values()));
        } finally {
            clearMdc();
        }
        if (byId == null) {
            // A handler failed or a claim timed out: nothing of the batch was applied; go one by one
            // so the poison message fails alone and the rest apply.
            byId = new HashMap<>();
            for (Delivery d : firsts.values()) {
                byId.put(d.eventId(), processUncounted(d));
            }
        }
        List<Outcome> outcomes = new ArrayList<>(deliveries.size());
        Map<String, Boolean> seen = new HashMap<>();
        for (Delivery d : deliveries) {
            Outcome first = byId.get(d.eventId());
            boolean copy = seen.put(d.eventId(), Boolean.TRUE) != null;
            Outcome o = copy && first.status() == Status.APPLIED ? Outcome.duplicate(d.eventId()) : first;
            outcomes.add(report(d, o));
        }
        return outcomes;
    }

    private Outcome processUncounted(Delivery delivery) {
        putMdc(delivery);
        try {
            return withConflictRetries(delivery.eventId(), () -> processOnce(delivery));
        } finally {
            clearMdc();
        }
    }

    /** Returns outcomes by id, or null when the batch must be retried one delivery per transaction. */
    private Map<String, Outcome> batchOnce(List<Delivery> batch) {
        for (int attempt = 1; ; attempt++) {
            try {
                return transactions.inTransaction(tx -> {
                    Connection c = tx.connection();
                    Set<String> claimed;
                    try {
                        claimed = inbox.claimAll(c, consumer, batch.stream().map(Delivery::eventId).toList());
                    } catch (SQLException e) {
                        if (dialect.isLockTimeout(e)) {
                            tx.setRollbackOnly();
                            return null;
                        }
                        throw e;
                    }
                    for (Delivery d : batch) {
                        if (!claimed.contains(d.eventId())) {
                            continue;
                        }
                        putMdc(d);
                        DefaultTx handlerTx = new DefaultTx(c, dialect, inbox.tablePrefix(), consumer, d, clock,
                                metrics);
                        Throwable failure = runHandler(d, handlerTx);
                        if (failure != null || handlerTx.misuse() != null) {
                            tx.setRollbackOnly();
                            SQLException conflict = transientConflict(failure);
                            if (conflict != null) {
                                throw conflict;
                            }
                            log.debug("batch rolled back at {}: {}", d.eventId(), String.valueOf(failure));
                            return null;
                        }
                    }
                    Map<String, Outcome> byId = new HashMap<>();
                    for (Delivery d : batch) {
                        byId.put(d.eventId(), claimed.contains(d.eventId()) ? Outcome.applied(d.eventId())
                                : Outcome.duplicate(d.eventId()));
                    }
                    return byId;
                });
            } catch (SQLException e) {
                boolean conflict = transientConflict(e) != null;
                if (conflict && conflictRetries.allowsRetry(attempt)) {
                    backoff(attempt);
                    continue;
                }
                if (conflict) {
                    return null;
                }
                Map<String, Outcome> failed = new HashMap<>();
                RetryableException cause = new RetryableException("batch of " + batch.size()
                        + " rolled back, database error: " + e.getMessage(), e);
                for (Delivery d : batch) {
                    failed.put(d.eventId(), new Outcome(d.eventId(), Status.FAILED_RETRYABLE, cause));
                }
                return failed;
            }
        }
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
                return databaseFailure(eventId, e);
            }
        }
    }

    // Includes a failed commit: it may or may not have committed, so the message is left for
    // redelivery and the inbox absorbs it if it did.
    private static Outcome databaseFailure(String eventId, SQLException e) {
        return new Outcome(eventId, Status.FAILED_RETRYABLE, new RetryableException(
                "event '" + eventId + "' rolled back, database error (SQLState " + e.getSQLState() + "): "
                        + e.getMessage(), e));
    }

    private Outcome processOnce(Delivery d) throws SQLException {
        return transactions.inTransaction(tx -> claimAndHandle(tx, d));
    }

    /** The claim and the handler on the transaction's connection; marks it rollback-only unless applied. */
    private Outcome claimAndHandle(Transaction tx, Delivery d) throws SQLException {
        Connection c = tx.connection();
        boolean claimed;
        try {
            claimed = inbox.claim(c, consumer, d.eventId());
        } catch (SQLException e) {
            if (dialect.isLockTimeout(e)) {
                tx.setRollbackOnly();
                return new Outcome(d.eventId(), Status.IN_PROGRESS, new RetryableException("event '"
                        + d.eventId() + "' is being processed by another delivery that has not committed"
                        + " within the lock timeout (" + inbox.lockTimeout().map(Duration::toString)
                        .orElse("the session's lock_timeout") + "); leave it unacknowledged", e));
            }
            throw e;
        }
        if (!claimed) {
            // Nothing was written; ending it either way is the same, and a joined caller's work stays.
            return Outcome.duplicate(d.eventId());
        }
        DefaultTx handlerTx = new DefaultTx(c, dialect, inbox.tablePrefix(), consumer, d, clock, metrics);
        Throwable failure = runHandler(d, handlerTx);
        if (failure == null && handlerTx.misuse() != null) {
            failure = new HandlerMisuseException("handler called Connection." + handlerTx.misuse()
                    + "() and swallowed the refusal; the delivery is rolled back");
        }
        if (failure != null) {
            tx.setRollbackOnly();
            SQLException conflict = transientConflict(failure);
            if (conflict != null && !tx.joined()) {
                throw conflict;
            }
            return failed(d, failure);
        }
        return Outcome.applied(d.eventId());
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
                    result[0] = databaseFailure(d.eventId(), e);
                }
                Outcome provisional = result[0];
                tx.afterCompletion(committed -> reportJoined(d, provisional, committed));
                return provisional;
            });
        } catch (SQLException e) {
            // No transaction could be joined: nothing ran, nothing is pending.
            return report(d, databaseFailure(d.eventId(), e));
        }
        return result[0];
    }

    private List<Outcome> batchJoined(List<Delivery> deliveries, List<Delivery> firsts) {
        Map<String, Outcome> byId = new HashMap<>();
        try {
            transactions.inTransaction(tx -> {
                Set<String> claimed;
                try {
                    claimed = inbox.claimAll(tx.connection(), consumer, firsts.stream().map(Delivery::eventId)
                            .toList());
                } catch (SQLException e) {
                    tx.setRollbackOnly();
                    for (Delivery d : firsts) {
                        byId.put(d.eventId(), databaseFailure(d.eventId(), e));
                    }
                    return null;
                }
                Outcome failedOne = null;
                for (Delivery d : firsts) {
                    if (!claimed.contains(d.eventId())) {
                        byId.put(d.eventId(), Outcome.duplicate(d.eventId()));
                        continue;
                    }
                    if (failedOne != null) {
                        byId.put(d.eventId(), notRun(d, failedOne));
                        continue;
                    }
                    putMdc(d);
                    DefaultTx handlerTx = new DefaultTx(tx.connection(), dialect, inbox.tablePrefix(), consumer, d,
                            clock, metrics);
                    Throwable failure = runHandler(d, handlerTx);
                    if (failure == null && handlerTx.misuse() != null) {
                        failure = new HandlerMisuseException("handler called Connection." + handlerTx.misuse()
                                + "() and swallowed the refusal; the delivery is rolled back");
                    }
                    if (failure != null) {
                        tx.setRollbackOnly();
                        failedOne = failed(d, failure);
                        byId.put(d.eventId(), failedOne);
                        // Everything applied before it in this transaction rolls back with it.
                        for (Delivery earlier : firsts) {
                            if (earlier == d) {
                                break;
                            }
                            if (byId.get(earlier.eventId()).status() == Status.APPLIED) {
                                byId.put(earlier.eventId(), notRun(earlier, failedOne));
                            }
                        }
                        continue;
                    }
                    byId.put(d.eventId(), Outcome.applied(d.eventId()));
                }
                tx.afterCompletion(committed -> {
                    Map<String, Boolean> seen = new HashMap<>();
                    for (Delivery d : deliveries) {
                        boolean copy = seen.put(d.eventId(), Boolean.TRUE) != null;
                        reportJoined(d, mirror(byId.get(d.eventId()), d, copy), committed);
                    }
                });
                return null;
            });
        } catch (SQLException e) {
            List<Outcome> failed = new ArrayList<>(deliveries.size());
            for (Delivery d : deliveries) {
                failed.add(report(d, databaseFailure(d.eventId(), e)));
            }
            return failed;
        } finally {
            clearMdc();
        }
        List<Outcome> outcomes = new ArrayList<>(deliveries.size());
        Map<String, Boolean> seen = new HashMap<>();
        for (Delivery d : deliveries) {
            boolean copy = seen.put(d.eventId(), Boolean.TRUE) != null;
            outcomes.add(mirror(byId.get(d.eventId()), d, copy));
        }
        return outcomes;
    }

    private static Outcome mirror(Outcome first, Delivery d, boolean copy) {
        return copy && first.status() == Status.APPLIED ? Outcome.duplicate(d.eventId()) : first;
    }

    private static Outcome notRun(Delivery d, Outcome failed) {
        return new Outcome(d.eventId(), Status.FAILED_RETRYABLE, new RetryableException("event '" + d.eventId()
                + "' rolled back with its batch, in which '" + failed.eventId() + "' failed", failed.failure()));
    }

    private void reportJoined(Delivery d, Outcome provisional, boolean committed) {
        Outcome last = provisional;
        if (!committed && provisional.status() == Status.APPLIED) {
            last = new Outcome(d.eventId(), Status.FAILED_RETRYABLE, new RetryableException("event '" + d.eventId()
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

    private Throwable runHandler(Delivery d, DefaultTx tx) {
        long start = System.nanoTime();
        try {
            handler.handle(d, tx);
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

    private static void clearMdc() {
        for (String key : Arrays.asList(MDC_CONSUMER, MDC_MESSAGE_ID, MDC_ATTEMPT, MDC_REDELIVERED, MDC_OUTCOME)) {
            MDC.remove(key);
        }
    }
}
