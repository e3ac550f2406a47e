package dev.once.internal;

import dev.once.Delivery;
import dev.once.Outcome;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * How an owned batch that rolls back is split until the delivery that failed stands alone: the
 * strategy only. One batch transaction ({@code once}, {@code OwnedMode.batchOnce}) says what a
 * part came to ({@link BatchResult}); {@link #bisect} splits around the delivery the per-event
 * handler named, else in halves, and {@link #prefix} does the same for in-order runs but stops at
 * the first delivery that is not acknowledged. Not used in joined mode (the caller's transaction is
 * one transaction, never split). Not API.
 */
final class Bisection {

    private Bisection() {}

    /**
     * Runs {@code batch} in one transaction ({@code once}). If it rolls back because of its deliveries (a handler
     * failed, a claim timed out on a concurrent duplicate, conflicts outlasted the retries), the
     * parts are run in transactions of their own until the failing delivery stands alone: around
     * it when the per-event handler named it (the deliveries before it, it, the rest), else in
     * halves (a batch handler fails for the batch as a whole). One poison message among n costs
     * about 2·log2(n) transactions instead of n, and no delivery is applied twice: the parts are
     * disjoint and each commits only its own claims. No savepoints: PostgreSQL subtransactions
     * degrade past 64 per transaction.
     *
     * @return the outcome of each delivery, by event id
     */
    static Map<String, Outcome> bisect(List<Delivery> batch, Function<List<Delivery>, BatchResult> once) {
        BatchResult result = once.apply(batch);
        if (result.outcomes() != null) {
            return result.outcomes(); // the common case, the batch in one transaction: its map as it is
        }
        Map<String, Outcome> byId = new HashMap<>();
        split(batch, result, byId, once);
        return byId;
    }

    private static void bisect(
            List<Delivery> batch, Map<String, Outcome> byId, Function<List<Delivery>, BatchResult> once) {
        BatchResult result = once.apply(batch);
        if (result.outcomes() != null) {
            byId.putAll(result.outcomes());
            return;
        }
        split(batch, result, byId, once);
    }

    /** The parts of {@code batch}, whose transaction rolled back with {@code result}, each run as {@link #bisect}. */
    private static void split(
            List<Delivery> batch,
            BatchResult result,
            Map<String, Outcome> byId,
            Function<List<Delivery>, BatchResult> once) {
        if (batch.size() == 1) {
            byId.put(batch.get(0).eventId(), result.alone().apply(batch.get(0)));
            return;
        }
        int culprit = result.culprit();
        if (culprit >= 0) {
            if (culprit > 0) {
                bisect(batch.subList(0, culprit), byId, once);
            }
            bisect(batch.subList(culprit, culprit + 1), byId, once);
            if (culprit + 1 < batch.size()) {
                bisect(batch.subList(culprit + 1, batch.size()), byId, once);
            }
            return;
        }
        int half = (batch.size() + 1) / 2;
        bisect(batch.subList(0, half), byId, once);
        bisect(batch.subList(half, batch.size()), byId, once);
    }

    /**
     * Runs {@code batch} as {@link #bisect} does, parts in list order, but stops at the first
     * delivery that is not acknowledged: nothing after it runs.
     *
     * @return how many deliveries from the start were acknowledged; when fewer than all, the next
     *     one has its outcome too and those after it none
     */
    static int prefix(List<Delivery> batch, Map<String, Outcome> byId, Function<List<Delivery>, BatchResult> once) {
        BatchResult result = once.apply(batch);
        if (result.outcomes() != null) {
            for (int i = 0; i < batch.size(); i++) {
                Outcome o = result.outcomes().get(batch.get(i).eventId());
                byId.put(o.eventId(), o);
                if (!o.shouldAcknowledge()) {
                    return i;
                }
            }
            return batch.size();
        }
        if (batch.size() == 1) {
            Outcome o = result.alone().apply(batch.get(0));
            byId.put(o.eventId(), o);
            return o.shouldAcknowledge() ? 1 : 0;
        }
        int culprit = result.culprit();
        if (culprit >= 0) {
            // The deliveries before the named one, then it alone; the rest only if it went through.
            int before = culprit == 0 ? 0 : prefix(batch.subList(0, culprit), byId, once);
            if (before < culprit || prefix(batch.subList(culprit, culprit + 1), byId, once) == 0) {
                return before;
            }
            return culprit
                    + 1
                    + (culprit + 1 < batch.size() ? prefix(batch.subList(culprit + 1, batch.size()), byId, once) : 0);
        }
        int half = (batch.size() + 1) / 2;
        int first = prefix(batch.subList(0, half), byId, once);
        if (first < half) {
            return first;
        }
        return half + prefix(batch.subList(half, batch.size()), byId, once);
    }
}
