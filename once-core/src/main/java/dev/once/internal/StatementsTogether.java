package dev.once.internal;

import dev.once.jdbc.Dialect;
import java.sql.Connection;
import java.sql.SQLException;

/**
 * Whether once may send several statements as one prepared string, one round trip: a claim or claim
 * check with the {@code COMMIT}, a claim with the statement that puts the lock timeout back ({@link
 * LockTimeoutRestore}), the relay's batch begin with its lock query. The dialect writes such strings,
 * but only a driver that takes several statements in one prepared string can send them ({@link
 * Dialect#statementsTogether}: pgjdbc; another driver of PostgreSQL's protocol refuses the string, and
 * every such call would fail). Asked of the first connection and kept, so a delivery or a relay batch
 * pays nothing for it: the connections of one consumer, relay or inbox all come from one DataSource,
 * one driver (a connection of a driver that refuses, after a first one of pgjdbc, fails loudly with the
 * driver's error; the other way round only costs round trips). Thread-safe (a race asks twice and gets
 * one answer). Not API.
 */
public final class StatementsTogether {

    private final Dialect dialect;
    private volatile Boolean together;

    public StatementsTogether(Dialect dialect) {
        this.dialect = dialect;
    }

    /** True when {@code connection}'s driver takes several statements in one prepared string. */
    public boolean allowed(Connection connection) throws SQLException {
        Boolean t = together;
        if (t == null) {
            t = dialect.statementsTogether(connection);
            together = t;
        }
        return t;
    }
}
