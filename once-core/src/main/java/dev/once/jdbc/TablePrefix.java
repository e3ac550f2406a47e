package dev.once.jdbc;

import dev.once.InvalidConfigurationException;
import java.util.regex.Pattern;

/** Validates the configurable table prefix; the only identifier {@code once} ever writes into SQL text. */
public final class TablePrefix {

    /** The default prefix: tables are {@code once_inbox}, {@code once_outbox}, … */
    public static final String DEFAULT = "once_";

    // Short enough that the longest table name (prefix + "idempotency_key_created_at") stays
    // within PostgreSQL's 63-byte identifier limit.
    private static final Pattern VALID = Pattern.compile("[a-z][a-z0-9_]{0,29}");

    private TablePrefix() {}

    /**
     * @return {@code prefix}, unchanged, if valid
     * @throws InvalidConfigurationException naming the value otherwise
     */
    public static String validate(String prefix) {
        if (prefix == null || !VALID.matcher(prefix).matches()) {
            throw new InvalidConfigurationException("table prefix must match " + VALID.pattern()
                    + " (a lower-case SQL identifier start, at most 30 characters), but was "
                    + (prefix == null ? "null" : "'" + prefix + "'"));
        }
        return prefix;
    }
}
