package dev.once.internal;

import dev.once.Delivery;
import dev.once.MismatchPolicy;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.OutcomeListener;
import dev.once.PayloadMismatchException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What each delivery comes to once its transaction has decided, and who hears of it: copies of an
 * event in one batch take its first occurrence's outcome, a duplicate with another payload is a
 * reused event id, and every outcome goes to the meters and the {@link OutcomeListener}. Owned and
 * joined mode alike. Not API.
 */
final class Settlement {

    // The engine's log category, as before the engine was split into rooms: users may have configured it.
    private static final Logger log = LoggerFactory.getLogger(DefaultIdempotentConsumer.class);

    private final OnceMetrics metrics;
    private final OutcomeListener listener;
    private final MismatchPolicy mismatchPolicy;

    Settlement(OnceMetrics metrics, OutcomeListener listener, MismatchPolicy mismatchPolicy) {
        this.metrics = metrics;
        this.listener = listener;
        this.mismatchPolicy = mismatchPolicy;
    }

    /** Every delivery's outcome (copies take their first's), each reported to meters and listener. */
    List<Outcome> settleAndReport(List<Delivery> deliveries, Map<String, Outcome> byId, BatchFingerprints prints) {
        return report(deliveries, settle(deliveries, byId, prints));
    }

    /**
     * As {@link #settleAndReport}, for an ordered run: every delivery after the first whose event was
     * not acknowledged is held back behind it, later copies included (a copy of that very event, of an
     * applied one), rather than taking their first's outcome. The caller settles that first delivery
     * alone and runs the rest again: a copy reported {@link Status#FAILED_PERMANENT} counted (and told
     * the listener of) a dead-lettering that does not happen to it, a duplicate was counted twice.
     */
    List<Outcome> settleAndReportInOrder(
            List<Delivery> deliveries, Map<String, Outcome> byId, BatchFingerprints prints) {
        return report(deliveries, settle(deliveries, byId, prints, true));
    }

    private List<Outcome> report(List<Delivery> deliveries, List<Outcome> outcomes) {
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
    List<Outcome> settle(List<Delivery> deliveries, Map<String, Outcome> byId, BatchFingerprints prints) {
        return settle(deliveries, byId, prints, false);
    }

    /** {@code inOrder}: past the first outcome not acknowledged, every delivery is held back behind it. */
    private List<Outcome> settle(
            List<Delivery> deliveries, Map<String, Outcome> byId, BatchFingerprints prints, boolean inOrder) {
        List<Outcome> outcomes = new ArrayList<>(deliveries.size());
        Set<String> seen = new HashSet<>(deliveries.size() * 4 / 3 + 1);
        Outcome stop = null; // in order: the outcome of the first event not acknowledged
        for (int i = 0; i < deliveries.size(); i++) {
            Delivery d = deliveries.get(i);
            Outcome first = byId.get(d.eventId());
            boolean copy = !seen.add(d.eventId());
            Status status = first.status();
            if (stop != null) {
                outcomes.add(FailedOutcomes.heldBack(d, stop));
                continue;
            }
            if (inOrder && !first.shouldAcknowledge()) {
                stop = first;
            }
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
     * A delivery of an event an earlier delivery applied: a plain duplicate, unless both payloads
     * have a fingerprint and they differ, a reused event id. That is counted and logged with both
     * fingerprints (never the payload, which may hold secrets), and under FAIL_PERMANENT reported
     * for dead-lettering. Nothing is applied either way.
     */
    Outcome duplicateOf(Delivery d, Long delivered, Long applied) {
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

    Outcome report(Delivery d, Outcome o) {
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
}
