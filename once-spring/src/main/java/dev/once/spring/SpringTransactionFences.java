package dev.once.spring;

import dev.once.internal.fence.TakenFence;
import dev.once.internal.fence.TransactionFences;
import dev.once.lease.Fence;
import java.sql.Connection;
import java.util.Map;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Makes a {@link Fence#check} on a Spring-managed transaction's connection hold until that transaction
 * commits: the fence is kept with once's state of the physical transaction ({@link PhysicalTransaction}) and
 * checked again in its {@code beforeCommit}, after every {@code NESTED} step has settled, so neither a
 * rollback to a savepoint that undid the check nor a refusal the caller caught lets the transaction's writes
 * commit after a newer holder's; the commit fails with {@link dev.once.StaleFencingTokenException} instead.
 * The connection is recognized as the one the transaction manager bound, or a proxy of it ({@code
 * JdbcTemplate}'s, {@code TransactionAwareDataSourceProxy}'s); a connection Spring does not manage (taken
 * from the pool by hand) is the caller's own transaction and left alone, as is a check with no Spring
 * transaction active.
 *
 * <p>Found by {@link java.util.ServiceLoader} when once-spring is on the class or module path; not for
 * application code. Stateless and thread-safe: what it keeps is the checking thread's transaction's. Public because
 * {@code ServiceLoader} on the class path instantiates only public classes; its signature names once-core's fence
 * seam, exported to this module alone ({@code "exports"}: a client of once-spring sees the class, not the seam).
 */
@SuppressWarnings("exports")
public final class SpringTransactionFences implements TransactionFences {

    /** Called by {@link java.util.ServiceLoader}. */
    public SpringTransactionFences() {}

    @Override
    public void taken(Connection connection, TakenFence fence) {
        if (!TransactionSynchronizationManager.isActualTransactionActive()
                || !TransactionSynchronizationManager.isSynchronizationActive()) {
            return; // no Spring transaction on this thread: the caller's own JDBC transaction
        }
        DataSource key = boundTo(connection);
        if (key != null) {
            PhysicalTransaction.current(new PhysicalTransaction.Key(key)).fenced(fence);
        }
    }

    /** The DataSource the current transaction holds {@code connection} of (or of what it proxies), or null. */
    private static DataSource boundTo(Connection connection) {
        Connection target = null;
        for (Map.Entry<Object, Object> bound :
                TransactionSynchronizationManager.getResourceMap().entrySet()) {
            if (bound.getKey() instanceof DataSource ds
                    && bound.getValue() instanceof ConnectionHolder holder
                    && holder.getConnectionHandle() != null) {
                Connection held = holder.getConnection();
                if (held == connection) {
                    return ds;
                }
                if (target == null) {
                    target = DataSourceUtils.getTargetConnection(connection);
                }
                if (DataSourceUtils.getTargetConnection(held) == target) {
                    return ds;
                }
            }
        }
        return null;
    }
}
