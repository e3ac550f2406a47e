package dev.once.internal;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.HandlerMisuseException;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryableException;
import dev.once.StaleFencingTokenException;
import dev.once.jdbc.Dialect;
import io.micrometer.core.instrument.MeterRegistry;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

import javax.sql.DataSource;
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
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/** The engine behind {@link IdempotentConsumer}. Not API. */
public final class DefaultIdempotentConsumer implements IdempotentConsumer {

    private static final Logger log = LoggerFactory.getLogger(DefaultIdempotentConsumer.class);

    static final String MDC_CONSUMER = "once.consumer";
    static final String MDC_MESSAGE_ID = "once.event_id";
    static final String MDC_ATTEMPT = "once.attempt";
    static final String MDC_REDELIVERED = "once.redelivered";
    static final String MDC_OUTCOME = "once.outcome";

    private final DataSource dataSource;
    private final String consumer;
    private final Handler handler;
    private final Inbox inbox;
    private final Dialect dialect;
    private final int maxConflictRetries;
    private final Predicate<Throwable> permanentFailure;
    private final OnceMetrics metrics;
    private final Clock clock;

    public DefaultIdempotentConsumer(DataSource dataSource, String consumer, Handler handler, Inbox inbox,
                                     int maxConflictRetries, Predicate<Throwable> permanentFailure,
                                     MeterRegistry registry, Clock clock) {
        this.dataSource = dataSource;
        this.consumer = consumer;
        this.handler = handler;
        this.inbox = inbox;
        this.dialect = inbox.dialect();
        this.maxConflictRetries = maxConflictRetries;
        this.permanentFailure = permanentFailure;
        this.metrics = new OnceMetrics(registry, consumer);
        this.clock = clock;
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
            Outcome outcome = withConflictRetries(delivery.eventId(), () -> processOnce(delivery));
            MDC.put(MDC_OUTCOME, outcome.tag());
            log.debug("processed {}", delivery.eventId());
            return metrics.outcome(outcome);
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
            outcomes.add(metrics.outcome(o));
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
        for (int attempt = 0; ; attempt++) {
            try (Connection c = dataSource.getConnection()) {
                boolean autoCommit = beginTransaction(c);
                try {
                    Set<String> claimed;
                    try {
                        claimed = inbox.claimAll(c, consumer, batch.stream().map(Delivery::eventId).toList());
                    } catch (SQLException e) {
                        rollbackQuietly(c);
                        if (dialect.isLockTimeout(e)) {
                            return null;
                        }
                        throw e;
                    }
                    for (Delivery d : batch) {
                        if (!claimed.contains(d.eventId())) {
                            continue;
                        }
                        putMdc(d);
                        DefaultTx tx = new DefaultTx(c, dialect, inbox.tablePrefix(), consumer, d, clock, metrics);
                        Throwable failure = runHandler(d, tx);
                        if (failure != null || tx.misuse() != null) {
                            rollbackQuietly(c);
                            if (failure instanceof SQLException sql && dialect.isTransientConflict(sql)) {
                                throw sql;
                            }
                            log.debug("batch rolled back at {}: {}", d.eventId(), String.valueOf(failure));
                            return null;
                        }
                    }
                    c.commit();
                    Map<String, Outcome> byId = new HashMap<>();
                    for (Delivery d : batch) {
                        byId.put(d.eventId(), claimed.contains(d.eventId()) ? Outcome.applied(d.eventId())
                                : Outcome.duplicate(d.eventId()));
                    }
                    return byId;
                } catch (Throwable e) {
                    // Any throwable, Errors included: endTransaction's setAutoCommit(true) would otherwise
                    // commit the claim and whatever the handler wrote before it failed.
                    rollbackQuietly(c);
                    throw e;
                } finally {
                    endTransaction(c, autoCommit);
                }
            } catch (SQLException e) {
                if (dialect.isTransientConflict(e) && attempt < maxConflictRetries) {
                    backoff(attempt);
                    continue;
                }
                if (dialect.isTransientConflict(e)) {
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
        for (int i = 0; ; i++) {
            try {
                return attempt.run();
            } catch (SQLException e) {
                if (dialect.isTransientConflict(e) && i < maxConflictRetries) {
                    backoff(i);
                    continue;
                }
                // Includes a failed commit: it may or may not have committed, so the message is
                // left for redelivery and the inbox absorbs it if it did.
                return new Outcome(eventId, Status.FAILED_RETRYABLE, new RetryableException(
                        "event '" + eventId + "' rolled back, database error (SQLState " + e.getSQLState() + "): "
                                + e.getMessage(), e));
            }
        }
    }

    private Outcome processOnce(Delivery d) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            boolean autoCommit = beginTransaction(c);
            try {
                boolean claimed;
                try {
                    claimed = inbox.claim(c, consumer, d.eventId());
                } catch (SQLException e) {
                    if (dialect.isLockTimeout(e)) {
                        rollbackQuietly(c);
                        return new Outcome(d.eventId(), Status.IN_PROGRESS, new RetryableException("event '"
                                + d.eventId() + "' is being processed by another delivery that has not committed"
                                + " within the lock timeout (" + inbox.lockTimeout().map(Duration::toString)
                                .orElse("the session's lock_timeout") + "); leave it unacknowledged", e));
                    }
                    throw e;
                }
                if (!claimed) {
                    c.rollback();   // nothing was written; ends the transaction
                    return Outcome.duplicate(d.eventId());
                }
                DefaultTx tx = new DefaultTx(c, dialect, inbox.tablePrefix(), consumer, d, clock, metrics);
                Throwable failure = runHandler(d, tx);
                if (failure == null && tx.misuse() != null) {
                    failure = new HandlerMisuseException("handler called Connection." + tx.misuse()
                            + "() and swallowed the refusal; the delivery is rolled back");
                }
                if (failure != null) {
                    rollbackQuietly(c);
                    if (failure instanceof SQLException sql && dialect.isTransientConflict(sql)) {
                        throw sql;
                    }
                    return failed(d, failure);
                }
                c.commit();
                return Outcome.applied(d.eventId());
            } catch (Throwable e) {
                // Any throwable, Errors included (runHandler lets them through): restoring auto-commit in
                // endTransaction would otherwise commit the claim with a partial effect.
                rollbackQuietly(c);
                throw e;
            } finally {
                endTransaction(c, autoCommit);
            }
        }
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

    private static boolean beginTransaction(Connection c) throws SQLException {
        boolean autoCommit = c.getAutoCommit();
        if (autoCommit) {
            c.setAutoCommit(false);
        }
        return autoCommit;
    }

    private static void endTransaction(Connection c, boolean autoCommit) {
        try {
            if (autoCommit && !c.isClosed()) {
                c.setAutoCommit(true);
            }
        } catch (SQLException e) {
            log.debug("could not restore auto-commit", e);
        }
    }

    private static void rollbackQuietly(Connection c) {
        try {
            if (!c.isClosed()) {
                c.rollback();
            }
        } catch (SQLException e) {
            log.debug("rollback failed", e);
        }
    }

    private static void backoff(int attempt) {
        long maxMillis = Math.min(200, 5L << Math.min(attempt, 5));
        try {
            Thread.sleep(ThreadLocalRandom.current().nextLong(1, maxMillis + 1));
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
