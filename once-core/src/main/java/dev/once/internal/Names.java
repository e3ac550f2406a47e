package dev.once.internal;

import dev.once.InvalidConfigurationException;
import java.util.regex.Pattern;

/** Validation of the names {@code once} accepts from configuration. Not API. */
public final class Names {

    private static final Pattern CONSUMER = Pattern.compile("[a-z0-9._-]{1,100}");
    private static final Pattern QUALIFIED_IDENTIFIER =
            Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}(\\.[A-Za-z_][A-Za-z0-9_]{0,62})?");
    private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");

    private Names() {}

    /** A consumer name scopes the inbox: {@code billing}, {@code shipment-consumer}. */
    public static String consumer(String consumer) {
        if (consumer == null || !CONSUMER.matcher(consumer).matches()) {
            throw new InvalidConfigurationException(
                    "consumer must match " + CONSUMER.pattern() + ", but was " + quoted(consumer));
        }
        return consumer;
    }

    /** A user table for guarded transitions, optionally schema-qualified; written unquoted so case folds as usual. */
    public static String table(String table) {
        if (table == null || !QUALIFIED_IDENTIFIER.matcher(table).matches()) {
            throw new InvalidConfigurationException("table must be an SQL identifier matching "
                    + QUALIFIED_IDENTIFIER.pattern() + ", but was " + quoted(table));
        }
        return table;
    }

    /** A user column name. */
    public static String column(String column) {
        if (column == null || !IDENTIFIER.matcher(column).matches()) {
            throw new InvalidConfigurationException("column must be an SQL identifier matching " + IDENTIFIER.pattern()
                    + ", but was " + quoted(column));
        }
        return column;
    }

    /** Quotes a value for an error message, showing null as null. */
    public static String quoted(String value) {
        return value == null ? "null" : "'" + value + "'";
    }

    /**
     * The index of the first UTF-16 surrogate without its pair, or -1. Such a string has no UTF-8
     * form: the drivers send {@code '?'} in its place, so two distinct values would be stored as one
     * (two event ids claimed as one, the second event lost).
     */
    public static int unpairedSurrogate(String value) {
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (Character.isHighSurrogate(c)
                    && i + 1 < value.length()
                    && Character.isLowSurrogate(value.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                return i;
            }
        }
        return -1;
    }
}
