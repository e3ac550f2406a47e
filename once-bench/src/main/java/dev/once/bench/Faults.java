package dev.once.bench;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * In-process fault injection at the same point in every subject's handler: just before the
 * business effect, after the subject's own dedupe step ran. An armed event id makes the handler
 * throw {@link ProcessCrash}, an {@link Error} that no subject's failure handling catches as an
 * ordinary exception, standing in for the process dying there.
 */
final class Faults {

    private static final Set<String> CRASH_BEFORE_EFFECT = ConcurrentHashMap.newKeySet();

    private Faults() {}

    /** The next delivery of {@code eventId} dies just before its effect. */
    static void crashBeforeEffect(String eventId) {
        CRASH_BEFORE_EFFECT.add(eventId);
    }

    /** Called by every subject's handler before it applies the effect. */
    static void beforeEffect(String eventId) {
        if (!CRASH_BEFORE_EFFECT.isEmpty() && CRASH_BEFORE_EFFECT.remove(eventId)) {
            throw new ProcessCrash(eventId);
        }
    }

    /** The process "died" here: nothing after this point in the delivery runs. */
    static final class ProcessCrash extends Error {
        ProcessCrash(String eventId) {
            super("injected crash before the effect of event " + eventId, null, false, false);
        }
    }
}
