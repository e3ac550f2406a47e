package dev.once.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Wrapper;

/** What every guarded JDBC object shares. Not API. */
final class Guards {

    private Guards() {}

    /**
     * {@code unwrap} for a guarded object of {@code owner}: the guard itself when it implements
     * {@code iface}, the driver's object when that cannot end the transaction (it is neither a connection
     * nor a statement, through which the raw connection is one call away). A connection or statement is
     * refused, unless the integration confined the handler to {@code owner} ({@link
     * ClaimWatch#confines}: Spring code looks the transaction's connection up there, and code that needs
     * the driver's own, pgjdbc's {@code CopyManager}, must keep working as on Spring's connection): then it
     * is handed out and the watch told, so the claim is checked before the commit as if not confined.
     */
    static <T> T unwrap(GuardedConnection owner, Wrapper guard, Wrapper delegate, Class<T> iface) throws SQLException {
        if (iface.isInstance(guard)) {
            return iface.cast(guard);
        }
        T unwrapped = delegate.unwrap(iface);
        if (unwrapped instanceof Connection || unwrapped instanceof Statement) {
            if (owner.unwrapsUnguarded()) {
                return unwrapped;
            }
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
