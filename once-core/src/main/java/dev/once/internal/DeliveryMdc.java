package dev.once.internal;

import dev.once.Delivery;
import org.slf4j.MDC;

/** The SLF4J MDC fields the engine sets while it works on a delivery. Not API. */
final class DeliveryMdc {

    static final String MDC_CONSUMER = "once.consumer";
    static final String MDC_MESSAGE_ID = "once.event_id";
    static final String MDC_ATTEMPT = "once.attempt";
    static final String MDC_REDELIVERED = "once.redelivered";
    static final String MDC_OUTCOME = "once.outcome";

    private static final String[] MDC_KEYS = {MDC_CONSUMER, MDC_MESSAGE_ID, MDC_ATTEMPT, MDC_REDELIVERED, MDC_OUTCOME};

    private DeliveryMdc() {}

    static void put(String consumer, Delivery d) {
        MDC.put(MDC_CONSUMER, consumer);
        MDC.put(MDC_MESSAGE_ID, d.eventId());
        MDC.put(MDC_ATTEMPT, d.attempt() == 1 ? "1" : Integer.toString(d.attempt())); // most are first attempts
        MDC.put(MDC_REDELIVERED, Boolean.toString(d.redelivered()));
    }

    static void clear() {
        for (String key : MDC_KEYS) {
            MDC.remove(key);
        }
    }
}
