package dev.once.internal;

import dev.once.BatchHandler;
import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.MismatchPolicy;
import dev.once.OutboxHeaders;
import dev.once.Outcome;
import dev.once.OutcomeListener;
import dev.once.RetryPolicy;
import dev.once.StreamPositions;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Clock;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

/**
 * The engine behind {@link IdempotentConsumer}. Not API. See {@link IdempotentConsumer} for the
 * rule it keeps; every transaction it runs goes through {@link Transactions}. It sends each call to
 * its mode and reports what came of it; the rooms behind it, one job each:
 * <ul>
 *   <li>{@code OwnedMode}: the engine's own transactions (conflict retries, {@code Bisection}, in-order runs);</li>
 *   <li>{@code JoinedMode}: a transaction the caller opened, outcomes reported when it ends;</li>
 *   <li>{@code ClaimRun}: the work inside one claim transaction (claim, handlers, outbox rows);</li>
 *   <li>{@code CommitClaim}: {@link ClaimTiming#AT_COMMIT}, the handler first and the claim with the commit;</li>
 *   <li>{@code ClaimCheck}: whether the claim still holds after the handler, and when to ask;</li>
 *   <li>{@code Settlement}: each delivery's outcome from its first occurrence's, and its report.</li>
 * </ul>
 */
public final class DefaultIdempotentConsumer implements IdempotentConsumer {

    private static final Logger log = LoggerFactory.getLogger(DefaultIdempotentConsumer.class);

    private final Transactions transactions;
    private final String consumer;
    private final Inbox inbox;
    private final OnceMetrics metrics;
    // Null when the policy is OFF: the claims are then the inbox's own, with no fingerprint column.
    private final FingerprintedClaims fingerprints;
    private final Settlement settlement;
    private final OwnedMode owned;
    private final JoinedMode joined;
    private final Clock clock;

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
            OutboxHeaders outboxHeaders,
            ClaimTiming claimTiming) {
        this.transactions = transactions;
        this.clock = clock;
        this.consumer = consumer;
        this.inbox = inbox;
        this.metrics = new OnceMetrics(registry, consumer);
        StatementsTogether together = new StatementsTogether(inbox.dialect());
        this.fingerprints =
                mismatchPolicy == MismatchPolicy.OFF ? null : new FingerprintedClaims(inbox, clock, together);
        this.settlement = new Settlement(metrics, listener, mismatchPolicy);
        ClaimCheck check = new ClaimCheck(consumer, inbox.dialect(), inbox.tablePrefix(), together);
        AllNewClaims allNewClaims =
                mismatchPolicy == MismatchPolicy.OFF ? AllNewClaims.of(inbox, consumer, clock, together) : null;
        ClaimRun claimRun = new ClaimRun(
                consumer,
                handler,
                batchHandler,
                inbox,
                permanentFailure,
                metrics,
                clock,
                outboxHeaders,
                fingerprints,
                settlement,
                check,
                allNewClaims,
                transactions.dedicated());
        CommitClaim atCommit = claimTiming == ClaimTiming.AT_COMMIT
                ? new CommitClaim(transactions, claimRun, inbox, consumer, clock, together)
                : null;
        this.owned = new OwnedMode(
                transactions, inbox.dialect(), conflictRetries, claimRun, check, consumer, allNewClaims, atCommit);
        this.joined = new JoinedMode(transactions, claimRun, check, settlement, atCommit);
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
        DeliveryMdc.put(consumer, delivery);
        try {
            if (transactions.joins()) {
                return joined.process(delivery);
            }
            Outcome outcome = owned.process(delivery);
            MDC.put(DeliveryMdc.MDC_OUTCOME, outcome.tag());
            log.debug("processed {}", delivery.eventId());
            return settlement.report(delivery, outcome);
        } finally {
            DeliveryMdc.clear();
        }
    }

    @Override
    public List<Outcome> processBatch(List<Delivery> deliveries) {
        Objects.requireNonNull(deliveries, "deliveries");
        if (deliveries.size() <= 1) {
            return deliveries.stream().map(this::process).toList();
        }
        List<Delivery> firsts = firsts(deliveries);
        BatchFingerprints prints = fingerprints == null ? null : new BatchFingerprints(deliveries);
        if (transactions.joins()) {
            try {
                return joined.batch(deliveries, firsts, prints, null);
            } finally {
                DeliveryMdc.clear();
            }
        }
        return ownedRun(deliveries, prints, false, () -> owned.batch(firsts, prints));
    }

    @Override
    public List<Outcome> processInOrder(List<Delivery> deliveries) {
        Objects.requireNonNull(deliveries, "deliveries");
        if (deliveries.size() <= 1 || transactions.joins()) {
            // One delivery, or one joined transaction: all of it commits or none, never out of order.
            return processBatch(deliveries);
        }
        List<Delivery> firsts = firsts(deliveries);
        BatchFingerprints prints = fingerprints == null ? null : new BatchFingerprints(deliveries);
        return ownedRun(deliveries, prints, true, () -> owned.inOrder(firsts, prints, null));
    }

    /**
     * A single delivery too runs as an ordered run here, so that its transaction moves the position; in a
     * transaction the caller opened, the whole run in it, as {@link #processInOrder(List)} does there.
     */
    @Override
    public List<Outcome> processInOrder(List<Delivery> deliveries, StreamPositions positions) {
        Objects.requireNonNull(deliveries, "deliveries");
        PositionFence fence =
                new PositionFence(inbox, consumer, deliveries, Objects.requireNonNull(positions, "positions"), clock);
        if (deliveries.isEmpty()) {
            return List.of();
        }
        List<Delivery> firsts = firsts(deliveries);
        BatchFingerprints prints = fingerprints == null ? null : new BatchFingerprints(deliveries);
        if (transactions.joins()) {
            try {
                return joined.batch(deliveries, firsts, prints, fence);
            } finally {
                DeliveryMdc.clear();
            }
        }
        // The engine's own transaction would wait for a stream row lock an open transaction of this thread holds
        String locked = fence.lockedOnThread(null);
        if (locked != null) {
            throw new IllegalStateException(locked);
        }
        return ownedRun(deliveries, prints, true, () -> owned.inOrder(firsts, prints, fence));
    }

    /** An owned batch or in-order run ({@code run}: the first occurrences' outcomes by id), settled and reported. */
    private List<Outcome> ownedRun(
            List<Delivery> deliveries, BatchFingerprints prints, boolean inOrder, Supplier<Map<String, Outcome>> run) {
        MDC.put(DeliveryMdc.MDC_CONSUMER, consumer);
        Map<String, Outcome> byId;
        try {
            byId = run.get();
        } finally {
            DeliveryMdc.clear();
        }
        return inOrder
                ? settlement.settleAndReportInOrder(deliveries, byId, prints)
                : settlement.settleAndReport(deliveries, byId, prints);
    }

    /** Counts each delivery as received; first occurrence wins, later copies in the same batch mirror its outcome. */
    private List<Delivery> firsts(List<Delivery> deliveries) {
        Map<String, Delivery> firsts = new LinkedHashMap<>(deliveries.size() * 4 / 3 + 1);
        for (Delivery d : deliveries) {
            metrics.received(Objects.requireNonNull(d, "delivery in batch"));
            firsts.putIfAbsent(d.eventId(), d);
        }
        return new ArrayList<>(firsts.values());
    }
}
