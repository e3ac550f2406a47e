package dev.once.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Wrapper;

/** What every guarded JDBC object shares. Not API. */
final class Guards {

    private Guards() {}

    /**
     * {@code unwrap} for a guarded object: the guard itself when it implements {@code iface}, the
     * driver's object only when that cannot end the transaction (it is neither a connection nor a
     * statement, through which the raw connection is one call away).
     */
    static <T> T unwrap(Wrapper guard, Wrapper delegate, Class<T> iface) throws SQLException {
        if (iface.isInstance(guard)) {
            return iface.cast(guard);
        }
        T unwrapped = delegate.unwrap(iface);
        if (unwrapped instanceof Connection || unwrapped instanceof Statement) {
            throw new SQLException("unwrap(" + iface.getName() + ") refused inside a handler: it would hand out the"
                    + " raw connection, through which the claim transaction could be committed or rolled back apart"
                    + " from its effect; use the java.sql interfaces of tx.connection()");
        }
        return unwrapped;
    }

    /** A driver statement reached from a result set, wrapped so it leads back to the guard. */
    static Statement statement(GuardedConnection connection, Statement raw) {
        return raw == null ? null : new GuardedStatement<>(connection, raw);
    }
}
