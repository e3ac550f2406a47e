package dev.once.spring;

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
 * ({@link dev.once.tx.JoinedTransaction#confineHandlerTo}): the listener's transaction is the claim, the body's
 * statements and the COMMIT, as a hand-written one.
 *
 * <p>Everything that is the transaction's and not the connection's stays with the transaction manager's
 * holder: rollback-only (an inner {@code REQUIRED} participant that fails marks the real transaction, which
 * then does not commit) and the timeout. Participants see an active transaction, {@code NESTED} steps take
 * their savepoints through the guard, {@code REQUIRES_NEW} suspends and resumes this holder as Spring's own.
 * {@code unwrap} to the driver's connection (pgjdbc's {@code CopyManager}) is answered by the guard itself,
 * which hands it out while confined and tells the engine, so the check runs again. Only for a
 * {@code DataSourceTransactionManager}'s transaction: a JPA session's statements never pass a holder.
 */
final class ConfinedConnectionHolder extends ConnectionHolder {

    private final ConnectionHolder real;
    private final DataSource key;
    private final PhysicalTransaction state;

    private ConfinedConnectionHolder(
            ConnectionHolder real, Connection exposed, DataSource key, PhysicalTransaction state) {
        super(exposed, true);
        this.real = real;
        this.key = key;
        this.state = state;
        setSynchronizedWithTransaction(true);
    }

    /**
     * Binds {@code guarded} as the connection of the current transaction on {@code key} and tells
     * {@code state}'s joined transaction; null (nothing bound) when the transaction holds no connection of
     * {@code key}.
     */
    static ConfinedConnectionHolder bind(DataSource key, Connection guarded, PhysicalTransaction state) {
        if (!(TransactionSynchronizationManager.getResource(key) instanceof ConnectionHolder real)
                || !real.isSynchronizedWithTransaction()) {
            return null;
        }
        ConfinedConnectionHolder holder = new ConfinedConnectionHolder(real, guarded, key, state);
        state.joined().confineHandlerTo(guarded);
        TransactionSynchronizationManager.unbindResource(key);
        TransactionSynchronizationManager.bindResource(key, holder);
        return holder;
    }

    /** Puts the transaction manager's holder back, as the body found it before it ran. */
    void unbind() {
        TransactionSynchronizationManager.unbindResourceIfPossible(key);
        TransactionSynchronizationManager.bindResource(key, real);
    }

    /**
     * Asked by {@code DataSourceTransactionManager.getTransaction} alone, whatever the propagation, before it
     * suspends the transaction ({@code REQUIRES_NEW}, {@code NOT_SUPPORTED}) or takes a savepoint ({@code
     * NESTED}): once's state of the transaction must then be one of Spring's synchronizations, which alone
     * hear of both (a state the listener did not register, {@link PhysicalTransaction#owned}, is registered
     * now).
     */
    @Override
    protected boolean isTransactionActive() {
        state.enlist();
        return super.isTransactionActive();
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
