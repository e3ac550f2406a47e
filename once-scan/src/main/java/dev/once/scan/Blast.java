package dev.once.scan;

import java.util.Locale;

/** What an effect can break when it runs twice (or not at all), heaviest first; the weight feeds the index. */
public enum Blast {
    /** A charge, refund, transfer, payout, balance. */
    MONEY(10),
    /** An e-mail, SMS, push notification. */
    NOTIFICATION(6),
    /** A row inserted or a counter moved in the consumer's own database. */
    DATA(4),
    /** Another message published downstream. */
    MESSAGE(3),
    /** A cache entry written or evicted. */
    CACHE(1);

    private final int weight;

    Blast(int weight) {
        this.weight = weight;
    }

    public int weight() {
        return weight;
    }

    public String id() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** The heavier of two. */
    public static Blast max(Blast a, Blast b) {
        if (a == null) {
            return b;
        }
        if (b == null) {
            return a;
        }
        return a.ordinal() <= b.ordinal() ? a : b;
    }
}
