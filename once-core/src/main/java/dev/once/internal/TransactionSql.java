package dev.once.internal;

import java.util.Locale;

/**
 * Finds SQL that would end or reshape the claim transaction, so a handler cannot do through a
 * statement what {@link GuardedConnection} refuses as a method call. Refused, as the first command
 * of any statement of the string (case-insensitive, after whitespace and comments):
 * {@code COMMIT}, {@code END}, {@code ABORT}, {@code ROLLBACK} (but not {@code ROLLBACK TO
 * SAVEPOINT}), {@code BEGIN} (MariaDB's {@code BEGIN NOT ATOMIC} block too: its body may commit),
 * {@code START TRANSACTION}, {@code SET [SESSION|LOCAL|GLOBAL] TRANSACTION}, {@code SET autocommit} in any of its
 * spellings, {@code PREPARE TRANSACTION} and {@code XA}; on MariaDB also the statements that commit
 * implicitly (DDL other than on temporary tables, {@code LOCK}/{@code UNLOCK TABLES}, {@code
 * TRUNCATE}, {@code GRANT}, {@code ANALYZE}/{@code OPTIMIZE}/{@code REPAIR}, {@code FLUSH}, …).
 * Savepoints ({@code SAVEPOINT}, {@code ROLLBACK TO}, {@code RELEASE}) pass: they only undo the
 * handler's own work.
 *
 * <p>Statements are split at semicolons outside string literals, quoted identifiers, dollar quotes
 * and comments. The scan is a guard against mistakes, not a parser: what it cannot see (a stored
 * procedure that commits, say) is caught after the handler where the database can tell, when the
 * engine checks that the claim is still part of the open transaction. A single statement costs
 * one scan of its leading words. Stateless. Not API.
 */
final class TransactionSql {

    private TransactionSql() {}

    /** The refused command, upper case (e.g. {@code COMMIT}), or null when the SQL may run. */
    static String refusal(String sql, boolean mysqlLexing) {
        return refusal(sql, mysqlLexing, null);
    }

    /** Receives the first word of each statement that may run. */
    @FunctionalInterface
    interface Leading {
        /**
         * @param keyword the word upper case when it is one the lexer compares (every transaction-control
         *     word, {@code SAVEPOINT}, {@code CALL}, {@code EXECUTE}, ...), else the empty string
         */
        void word(String keyword);
    }

    /** As {@link #refusal(String, boolean)}, telling {@code leading} the first word of every statement that may run. */
    static String refusal(String sql, boolean mysqlLexing, Leading leading) {
        if (sql == null) {
            return null;
        }
        boolean single = sql.indexOf(';') < 0;
        int i = 0;
        while (true) {
            String refused = refusedAt(sql, skip(sql, i), mysqlLexing, leading);
            if (refused != null || single) {
                return refused;
            }
            i = nextStatement(sql, i, mysqlLexing);
            if (i < 0) {
                return null;
            }
        }
    }

    private static String refusedAt(String sql, int at, boolean mysql, Leading leading) {
        int end1 = wordEnd(sql, at);
        if (end1 == at) {
            return null;
        }
        String w1 = keyword(sql, at, end1);
        if (leading != null) {
            leading.word(w1);
        }
        if (mysql && commitsImplicitly(sql, w1, end1)) {
            return w1 + " (it commits implicitly on MariaDB)";
        }
        switch (w1) {
            case "COMMIT", "END", "ABORT", "XA", "BEGIN":
                return w1;
            case "ROLLBACK": {
                int at2 = skip(sql, end1);
                int end2 = wordEnd(sql, at2);
                String w2 = keyword(sql, at2, end2);
                if (w2.equals("WORK") || w2.equals("TRANSACTION")) {
                    at2 = skip(sql, end2);
                    end2 = wordEnd(sql, at2);
                    w2 = keyword(sql, at2, end2);
                }
                return w2.equals("TO") ? null : "ROLLBACK";
            }
            case "START", "PREPARE":
                return nextKeyword(sql, end1).equals("TRANSACTION") ? w1 + " TRANSACTION" : null;
            case "SET":
                return refusedSet(sql, skip(sql, end1));
            default:
                return null;
        }
    }

    // MariaDB ends the open transaction before DDL, table locks and administrative statements.
    // Temporary tables are the exception (CREATE/DROP TEMPORARY TABLE do not commit).
    private static boolean commitsImplicitly(String sql, String w1, int end1) {
        switch (w1) {
            case "ALTER",
                    "RENAME",
                    "TRUNCATE",
                    "GRANT",
                    "REVOKE",
                    "ANALYZE",
                    "OPTIMIZE",
                    "REPAIR",
                    "FLUSH",
                    "RESET",
                    "INSTALL",
                    "UNINSTALL",
                    "CACHE",
                    "LOCK",
                    "UNLOCK":
                return true;
            case "CREATE", "DROP":
                return !nextKeyword(sql, end1).equals("TEMPORARY");
            case "LOAD":
                return nextKeyword(sql, end1).equals("INDEX");
            default:
                return false;
        }
    }

    // SET TRANSACTION ..., SET SESSION TRANSACTION ..., SET autocommit = 1, SET @@session.autocommit = 1
    private static String refusedSet(String sql, int at) {
        if (sql.startsWith("@@", at)) {
            at += 2;
        }
        int end = wordEnd(sql, at);
        if (end == at) {
            return null;
        }
        String w = keyword(sql, at, end);
        if (w.equals("SESSION") || w.equals("LOCAL") || w.equals("GLOBAL")) {
            int next = end < sql.length() && sql.charAt(end) == '.' ? end + 1 : skip(sql, end);
            if (sql.startsWith("@@", next)) {
                next += 2;
            }
            int scopedEnd = wordEnd(sql, next);
            if (scopedEnd == next) {
                return null;
            }
            w = keyword(sql, next, scopedEnd);
        }
        if (w.equals("TRANSACTION")) {
            return "SET TRANSACTION";
        }
        return w.equals("AUTOCOMMIT") ? "SET AUTOCOMMIT" : null;
    }

    // Every word the rules above compare, so that a word of the SQL is matched against them in place
    // rather than copied and upper-cased: the lexer runs on every statement a handler prepares, and
    // allocated a substring and a record per word (issue 21).
    private static final String[] KEYWORDS = {
        "ABORT", "ALTER", "ANALYZE", "AUTOCOMMIT", "BEGIN", "CACHE", "CALL", "COMMIT", "CREATE", "DROP",
        "END", "EXECUTE", "FLUSH", "GLOBAL", "GRANT", "INDEX", "INSTALL", "LOAD", "LOCAL", "LOCK",
        "OPTIMIZE", "PREPARE", "RENAME", "REPAIR", "RESET", "REVOKE", "ROLLBACK", "SAVEPOINT", "SESSION", "SET",
        "START", "TEMPORARY", "TO", "TRANSACTION", "TRUNCATE", "UNINSTALL", "UNLOCK", "WORK", "XA"
    };

    /** What {@link #keyword} returns for a word that is none of {@link #KEYWORDS} (or for no word). */
    private static final String OTHER = "";

    /** The end of the word (letters and underscores) starting at {@code at}; {@code at} when there is none. */
    private static int wordEnd(String sql, int at) {
        int end = at;
        while (end < sql.length() && (Character.isLetter(sql.charAt(end)) || sql.charAt(end) == '_')) {
            end++;
        }
        return end;
    }

    /**
     * The word {@code sql[at, end)} upper case if it is one of {@link #KEYWORDS} (that constant), else
     * {@link #OTHER}. The same answer as upper-casing the word with {@code Locale.ROOT} and looking it up.
     */
    private static String keyword(String sql, int at, int end) {
        int n = end - at;
        for (int i = at; i < end; i++) {
            if (sql.charAt(i) >= 0x80) {
                // Outside ASCII, upper case may change the length (ß -> SS): do exactly what it did.
                String upper = sql.substring(at, end).toUpperCase(Locale.ROOT);
                for (String k : KEYWORDS) {
                    if (k.equals(upper)) {
                        return k;
                    }
                }
                return OTHER;
            }
        }
        for (String k : KEYWORDS) {
            if (k.length() == n && sql.regionMatches(true, at, k, 0, n)) {
                return k;
            }
        }
        return OTHER;
    }

    /** The keyword after whitespace and comments from {@code from}, or {@link #OTHER}. */
    private static String nextKeyword(String sql, int from) {
        int at = skip(sql, from);
        return keyword(sql, at, wordEnd(sql, at));
    }

    /** Skips whitespace and comments ({@code --}, {@code #} and nested block comments) from {@code i}. */
    private static int skip(String sql, int i) {
        int n = sql.length();
        while (i < n) {
            char c = sql.charAt(i);
            if (Character.isWhitespace(c)) {
                i++;
            } else if (c == '-' && i + 1 < n && sql.charAt(i + 1) == '-' || c == '#') {
                i = lineEnd(sql, i);
            } else if (c == '/' && i + 1 < n && sql.charAt(i + 1) == '*') {
                i = blockEnd(sql, i);
            } else {
                return i;
            }
        }
        return i;
    }

    private static int lineEnd(String sql, int i) {
        int nl = sql.indexOf('\n', i);
        return nl < 0 ? sql.length() : nl + 1;
    }

    private static int blockEnd(String sql, int i) {
        int depth = 0;
        int n = sql.length();
        while (i < n) {
            if (sql.startsWith("/*", i)) {
                depth++;
                i += 2;
            } else if (sql.startsWith("*/", i)) {
                i += 2;
                if (--depth == 0) {
                    return i;
                }
            } else {
                i++;
            }
        }
        return n;
    }

    /**
     * The index just after the next semicolon that ends a statement, or -1 when there is none. With
     * MySQL lexing (MariaDB), string literals take backslash escapes, {@code "..."} is a string and
     * {@code #} starts a comment; elsewhere {@code #} is an operator.
     */
    private static int nextStatement(String sql, int i, boolean mysqlLexing) {
        int n = sql.length();
        while (i < n) {
            char c = sql.charAt(i);
            switch (c) {
                case ';':
                    return i + 1;
                case '\'':
                case '"':
                case '`':
                    boolean escapes = c != '`' && (mysqlLexing || c == '\'' && isEscapeString(sql, i));
                    i = quotedEnd(sql, i, c, escapes);
                    break;
                case '#':
                    i = mysqlLexing ? lineEnd(sql, i) : i + 1;
                    break;
                case '-':
                case '/':
                    int after = skip(sql, i);
                    i = after == i ? i + 1 : after;
                    break;
                case '$':
                    i = dollarQuotedEnd(sql, i);
                    break;
                default:
                    i++;
            }
        }
        return -1;
    }

    // PostgreSQL's E'...' strings take backslash escapes even with standard_conforming_strings on.
    private static boolean isEscapeString(String sql, int quote) {
        return quote > 0
                && (sql.charAt(quote - 1) == 'E' || sql.charAt(quote - 1) == 'e')
                && (quote == 1 || !Character.isLetterOrDigit(sql.charAt(quote - 2)) && sql.charAt(quote - 2) != '_');
    }

    private static int quotedEnd(String sql, int open, char quote, boolean backslashEscapes) {
        int n = sql.length();
        int i = open + 1;
        while (i < n) {
            char c = sql.charAt(i);
            if (backslashEscapes && c == '\\') {
                i += 2;
            } else if (c == quote) {
                if (i + 1 < n && sql.charAt(i + 1) == quote) {
                    i += 2; // doubled quote inside the literal
                } else {
                    return i + 1;
                }
            } else {
                i++;
            }
        }
        return n;
    }

    // $tag$ ... $tag$ (PostgreSQL). A '$' inside an identifier (a$b) or before a digit ($1) is no quote.
    private static int dollarQuotedEnd(String sql, int open) {
        if (open > 0 && (Character.isLetterOrDigit(sql.charAt(open - 1)) || sql.charAt(open - 1) == '_')) {
            return open + 1;
        }
        int i = open + 1;
        int n = sql.length();
        if (i < n && Character.isDigit(sql.charAt(i))) {
            return i;
        }
        while (i < n && (Character.isLetterOrDigit(sql.charAt(i)) || sql.charAt(i) == '_')) {
            i++;
        }
        if (i >= n || sql.charAt(i) != '$') {
            return open + 1;
        }
        String tag = sql.substring(open, i + 1);
        int close = sql.indexOf(tag, i + 1);
        return close < 0 ? n : close + tag.length();
    }
}
