package dev.once.internal;

import dev.once.Delivery;
import dev.once.Outcome;
import java.util.Map;
import java.util.function.Function;

/**
 * What one batch transaction came to: the outcomes by id when it committed (or failed in a way
 * no split would change), else the outcome each delivery would get alone and, when known, the
 * index of the delivery that failed. Not API.
 */
record BatchResult(Map<String, Outcome> outcomes, Function<Delivery, Outcome> alone, int culprit) {
    static BatchResult done(Map<String, Outcome> outcomes) {
        return new BatchResult(outcomes, null, -1);
    }

    static BatchResult split(Function<Delivery, Outcome> alone, int culprit) {
        return new BatchResult(null, alone, culprit);
    }
}
