package dev.once.cli.demo;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A payment event as it travels: the producer-assigned event id (header {@code once-event-id}),
 * the payment it records and its amount in dollars. The body is {@code {"payment":"pay-3","amount":20}}.
 */
record Payment(String eventId, String paymentId, int amount) {

    private static final Pattern BODY = Pattern.compile("\\{\"payment\":\"([^\"]+)\",\"amount\":(\\d+)}");

    static Payment of(String eventId, String body) {
        Matcher m = BODY.matcher(body == null ? "" : body);
        if (!m.matches()) {
            throw new IllegalArgumentException(
                    "payment event " + eventId + " has a body the demo did not write: " + body);
        }
        return new Payment(eventId, m.group(1), Integer.parseInt(m.group(2)));
    }

    String body() {
        return "{\"payment\":\"" + paymentId + "\",\"amount\":" + amount + "}";
    }
}
