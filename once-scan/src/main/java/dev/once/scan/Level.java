package dev.once.scan;

import java.util.Locale;

/** How serious a finding is; the names and order are SARIF's {@code level} values. */
public enum Level {
    /** Loses or duplicates an effect that matters: money, a notification, an acknowledged loss. */
    ERROR(1.0),
    /** Duplicates data or a message, or holds the lease with a slow call. */
    WARNING(0.5),
    /** Worth knowing: a weak default, a cache refreshed twice. */
    NOTE(0.1);

    private final double factor;

    Level(double factor) {
        this.factor = factor;
    }

    /** The factor of this level in the Production Reliability Index (see {@link Scoring}). */
    public double factor() {
        return factor;
    }

    /** The SARIF and command-line spelling: {@code error}, {@code warning}, {@code note}. */
    public String id() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** True if this level is at least as serious as {@code threshold}. */
    public boolean atLeast(Level threshold) {
        return ordinal() <= threshold.ordinal();
    }

    /** Parses {@code error|warning|note}. */
    public static Level parse(String s) {
        for (Level l : values()) {
            if (l.id().equalsIgnoreCase(s.strip())) {
                return l;
            }
        }
        throw new IllegalArgumentException("level must be one of error, warning, note, but was '" + s + "'");
    }
}
