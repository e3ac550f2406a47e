package dev.once.cli.internal;

import java.util.List;
import java.util.regex.Pattern;

/**
 * Every statement {@code once doctor} runs itself, in one place (the outbox figures come from
 * {@link dev.once.outbox.OutboxAdmin}). They are plain SQL that PostgreSQL and
 * MariaDB read alike, so there is no per-dialect variant. Identifiers a user passes (table, key
 * columns) are checked against {@link #IDENTIFIER} and never quoted, so they resolve exactly as
 * the user's own unquoted SQL would; the once table names come from a validated prefix.
 */
public final class DoctorQueries {

    /** A plain or schema-qualified identifier, as {@code --table} and each {@code --key} column must be. */
    public static final Pattern IDENTIFIER =
            Pattern.compile("[A-Za-z_][A-Za-z0-9_$]{0,62}(\\.[A-Za-z_][A-Za-z0-9_$]{0,62})?");

    /** How many duplicate keys the report lists. */
    public static final int DUPLICATES_LISTED = 20;

    private DoctorQueries() {}

    /** Seed 000's diagnosis: business keys present more than once, most repeated first. Columns: key columns..., copies. */
    public static String duplicateKeys(String table, List<String> keys) {
        String k = String.join(", ", keys);
        return "SELECT " + k + ", count(*) AS copies FROM " + table + " GROUP BY " + k
                + " HAVING count(*) > 1 ORDER BY copies DESC, " + k + " LIMIT " + DUPLICATES_LISTED;
    }

    /** How many business keys are duplicated, and how many surplus rows they make. Columns: keys, surplus rows. */
    public static String duplicateTotals(String table, List<String> keys) {
        String k = String.join(", ", keys);
        return "SELECT count(*), coalesce(sum(copies - 1), 0) FROM (SELECT count(*) AS copies FROM " + table
                + " GROUP BY " + k + " HAVING count(*) > 1) d";
    }

    /** Inbox size and age. Columns: rows, oldest processed_at, now. */
    public static String inboxSummary(String inboxTable) {
        return "SELECT count(*), min(processed_at), current_timestamp FROM " + inboxTable;
    }

    /** Rows per consumer, largest first. Columns: consumer, rows. */
    public static String inboxByConsumer(String inboxTable) {
        return "SELECT consumer, count(*) AS n FROM " + inboxTable
                + " GROUP BY consumer ORDER BY n DESC, consumer LIMIT 10";
    }

    /** Inbox rows older than a cutoff. Binds: 1 cutoff. */
    public static String inboxOlderThan(String inboxTable) {
        return "SELECT count(*) FROM " + inboxTable + " WHERE processed_at < ?";
    }
}
