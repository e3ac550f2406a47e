package dev.once.spring;

import dev.once.tx.JoinedTransaction;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.util.Date;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The transaction's connection as an {@link IdempotentListener} body finds it, while the body runs in the
 * transaction the listener began: bound in place of the transaction manager's {@link ConnectionHolder}, it
 * hands out the engine's guarded connection (the body's {@code Tx.connection()}), so the body's
 * {@code JdbcTemplate}, {@code JdbcClient}, MyBatis or jOOQ statements pass the guard that sees what can
 * cost the claim. The engine then needs no claim check before the commit when the guard saw nothing
 * ({@link JoinedTransaction#confineHandlerTo}): the listener's transaction is the claim, the body's
 * statements and the COMMIT, as a hand-written one.
 *
 * <p>Everything that is the transaction's and not the connection's stays with the transaction manager's
 * holder: rollback-only (an inner {@code REQUIRED} participant that fails marks the real transaction, which
 * then does not commit) and the timeout. Participants see an active transaction, {@code NESTED} steps take
 * their savepoints through the guard, {@code REQUIRES_NEW} suspends and resumes this holder as Spring's own.
 * {@code unwrap} to the driver's connection (pgjdbc's {@code CopyManager}) is answered from the real
 * connection and withdraws the confinement, so the check runs again. Only for a
 * {@code DataSourceTransactionManager}'s transaction: a JPA session's statements never pass a holder.
 */
final class ConfinedConnectionHolder extends ConnectionHolder {

    private final ConnectionHolder real;
    private final DataSource key;

    private ConfinedConnectionHolder(ConnectionHolder real, Connection exposed, DataSource key) {
        super(exposed, true);
        this.real = real;
        this.key = key;
        setSynchronizedWithTransaction(true);
    }

    /**
     * Binds {@code guarded} as the connection of the current transaction on {@code key} and tells
     * {@code joined}; null (nothing bound) when the transaction holds no connection of {@code key}.
     */
    static ConfinedConnectionHolder bind(DataSource key, Connection guarded, JoinedTransaction joined) {
        if (!(TransactionSynchronizationManager.getResource(key) instanceof ConnectionHolder real)
                || !real.isSynchronizedWithTransaction()) {
            return null;
        }
        ConfinedConnectionHolder holder = new ConfinedConnectionHolder(real, exposed(guarded, real, joined), key);
        joined.confineHandlerTo(guarded);
        TransactionSynchronizationManager.unbindResource(key);
        TransactionSynchronizationManager.bindResource(key, holder);
        return holder;
    }

    /** Puts the transaction manager's holder back, as the body found it before it ran. */
    void unbind() {
        TransactionSynchronizationManager.unbindResourceIfPossible(key);
        TransactionSynchronizationManager.bindResource(key, real);
    }

    // The guarded connection, but unwrap answered from the real one: code that needs the driver's own
    // (COPY through pgjdbc's CopyManager) keeps working as on Spring's connection, and the engine is told it
    // no longer sees everything. One reflective call per connection method (prepareStatement and the like);
    // the statements it returns are the guard's own.
    private static Connection exposed(Connection guarded, ConnectionHolder real, JoinedTransaction joined) {
        return (Connection) Proxy.newProxyInstance(
                ConfinedConnectionHolder.class.getClassLoader(), new Class<?>[] {Connection.class}, (p, m, args) -> {
                    if (m.getName().equals("unwrap") && args[0] instanceof Class<?> iface) {
                        if (iface.isInstance(p)) {
                            return p;
                        }
                        joined.confineHandlerTo(null);
                        return real.getConnection().unwrap(iface);
                    }
                    if (m.getName().equals("isWrapperFor") && args[0] instanceof Class<?> iface) {
                        return iface.isInstance(p) || real.getConnection().isWrapperFor(iface);
                    }
                    if (m.getName().equals("equals")) {
                        return p == args[0];
                    }
                    if (m.getName().equals("hashCode")) {
                        return System.identityHashCode(p);
                    }
                    if (m.getName().equals("toString")) {
                        return "once-guarded " + guarded;
                    }
                    try {
                        return m.invoke(guarded, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    @Override
    public void setRollbackOnly() {
        real.setRollbackOnly();
    }

    @Override
    public void resetRollbackOnly() {
        real.resetRollbackOnly();
    }

    @Override
    public boolean isRollbackOnly() {
        return real.isRollbackOnly();
    }

    @Override
    public boolean hasTimeout() {
        return real.hasTimeout();
    }

    @Override
    public Date getDeadline() {
        return real.getDeadline();
    }

    @Override
    public int getTimeToLiveInSeconds() {
        return real.getTimeToLiveInSeconds();
    }

    @Override
    public long getTimeToLiveInMillis() {
        return real.getTimeToLiveInMillis();
    }
}
