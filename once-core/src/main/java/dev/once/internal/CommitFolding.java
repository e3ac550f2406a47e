package dev.once.internal;

import dev.once.jdbc.Dialect;
import java.sql.Connection;
import java.sql.SQLException;

/**
 * Whether a consumer may send its last statement and the {@code COMMIT} as one prepared string (a
 * claim at commit, a claim check): the dialect writes such strings, but only a driver that takes
 * several statements in one prepared string can send them ({@link Dialect#statementsTogether}:
 * pgjdbc; another driver of PostgreSQL's protocol refuses the string, and every commit would fail).
 * Asked of the first connection and kept, so a delivery pays nothing for it: a consumer's connections
 * all come from one DataSource, one driver. Thread-safe (a race asks twice and gets one answer). Not API.
 */
final class CommitFolding {

    private final Dialect dialect;
    private volatile Boolean together;

    CommitFolding(Dialect dialect) {
        this.dialect = dialect;
    }

    /** True when {@code connection}'s driver takes a statement and the COMMIT in one prepared string. */
    boolean allowed(Connection connection) throws SQLException {
        Boolean t = together;
        if (t == null) {
            t = dialect.statementsTogether(connection);
            together = t;
        }
        return t;
    }
}
