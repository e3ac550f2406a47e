package dev.once.bench;

import java.util.Objects;

/**
 * One business event of the benchmark workload: credit {@code account} by {@code amount}. The
 * producer-assigned {@code id} is the dedupe key; the payload carries only the business data, so
 * two events with identical payloads are still two events.
 */
record Event(String id, long account, long amount) {

    Event {
        Objects.requireNonNull(id, "id");
        if (account < 0 || amount <= 0) {
            throw new IllegalArgumentException(
                    "account must be >= 0 and amount > 0, but were " + account + " and " + amount);
        }
    }

    /** The wire payload, "account:amount", as a producer would send it. */
    String payload() {
        return account + ":" + amount;
    }

    static long account(String payload) {
        return Long.parseLong(payload, 0, payload.indexOf(':'), 10);
    }

    static long amount(String payload) {
        return Long.parseLong(payload, payload.indexOf(':') + 1, payload.length(), 10);
    }
}
