package dev.once.spring;

import dev.once.InvalidConfigurationException;
import dev.once.tx.JoinedTransactionHandle;
import dev.once.tx.TransactionHandle;
import dev.once.tx.TransactionProvider;
import java.lang.reflect.Method;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.BiConsumer;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.jdbc.datasource.DelegatingDataSource;
import org.springframework.jdbc.datasource.TransactionAwareDataSourceProxy;
import org.springframework.transaction.IllegalTransactionStateException;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.ResourceHolderSupport;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.util.ClassUtils;

/**
 * The engine's transactions from Spring: {@link #begin()} joins the transaction that Spring's
 * {@code DataSourceTransactionManager}, {@code JdbcTransactionManager} or {@code JpaTransactionManager}
 * has open on this thread, so the claim, the handler's {@code JdbcTemplate}, {@code JdbcClient} and
 * JPA writes and the outbox rows commit (or roll back) together, and outcomes are reported from the
 * transaction's {@code afterCompletion}, after the commit.
 *
 * <pre>{@code
 * IdempotentConsumer billing = IdempotentConsumer.builder()
 *     .transactions(SpringTransactionProvider.of(dataSource, transactionManager))
 *     .consumer("billing").handler(this::credit).build();
 * // inside a @Transactional method:
 * Outcome o = billing.process(delivery);   // final once the method's transaction commits
 * }</pre>
 *
 * <p><b>Fails fast</b> rather than silently writing on another connection:
 * {@link IllegalTransactionStateException} when no Spring transaction is active on the calling thread,
 * when it is read-only, or when the transaction does not hold a connection of the {@code DataSource}
 * this provider was given (the transaction manager manages another one, or a JPA transaction manager
 * whose {@code DataSource} is not set). {@link TransactionAwareDataSourceProxy} is looked through as
 * Spring's own transaction managers do; a {@code LazyConnectionDataSourceProxy} is a different
 * {@code DataSource}: give {@code once} the one the transaction manager has.
 *
 * <p>Immutable and thread-safe; each handle belongs to the thread that began it.
 */
public final class SpringTransactionProvider implements TransactionProvider {

    private static final boolean JPA_PRESENT = ClassUtils.isPresent(
            "org.springframework.orm.jpa.EntityManagerHolder", SpringTransactionProvider.class.getClassLoader());

    private final DataSource dataSource;
    private final DataSource key;
    private final PhysicalTransaction.Key stateKey;
    private final boolean dedicated;
    // dedicated: the engine's own transactions on the target DataSource, never the one Spring binds
    private final TransactionProvider afterRollback;

    private SpringTransactionProvider(DataSource dataSource, boolean dedicated) {
        this.dataSource = dataSource;
        this.key = resourceKey(dataSource);
        this.stateKey = new PhysicalTransaction.Key(key);
        this.dedicated = dedicated;
        this.afterRollback = dedicated ? TransactionProvider.owning(key) : null;
    }

    /** Joins Spring transactions on {@code dataSource}; the match is checked at every {@link #begin()}. */
    public static SpringTransactionProvider of(DataSource dataSource) {
        FrameworkLine.requireSavepointCallbacks();
        return new SpringTransactionProvider(Objects.requireNonNull(dataSource, "dataSource"), false);
    }

    /**
     * Joins the transactions of {@code transactionManager}, checked now: its {@code DataSource} must
     * be {@code dataSource} (or the target of a {@link TransactionAwareDataSourceProxy} around it).
     *
     * @throws InvalidConfigurationException if the transaction manager's {@code DataSource} is another
     *         one, or a {@code JpaTransactionManager} has none (the JPA transaction's JDBC connection is
     *         then not exposed, and the claim would run on a separate, auto-committed connection)
     */
    public static SpringTransactionProvider of(DataSource dataSource, PlatformTransactionManager transactionManager) {
        Objects.requireNonNull(transactionManager, "transactionManager");
        SpringTransactionProvider provider = of(dataSource);
        DataSource managed = managedDataSource(transactionManager);
        if (managed == NOT_KNOWN) {
            return provider; // JTA and others: checked per transaction in begin()
        }
        if (managed == null) {
            throw new InvalidConfigurationException(
                    transactionManager.getClass().getSimpleName()
                            + " has no DataSource set, so its transactions expose no JDBC connection and once would claim"
                            + " on a separate, auto-committed connection: call setDataSource(" + describe(dataSource)
                            + ") on it");
        }
        if (resourceKey(managed) != provider.key) {
            throw new InvalidConfigurationException(
                    "the transaction manager " + transactionManager.getClass().getSimpleName() + " manages "
                            + describe(managed) + ", but once was given " + describe(dataSource)
                            + ": the claim would commit apart from the business writes. Give once the transaction manager's"
                            + " DataSource" + hint(managed, dataSource));
        }
        return provider;
    }

    /** Always true: the Spring transaction's owner commits. */
    @Override
    public boolean joins() {
        return true;
    }

    /**
     * True only for the provider of {@link IdempotentListener} calls that begin their own transaction, in
     * which the claim may wait for the commit ({@link IdempotentListener#claimTiming()}).
     */
    @Override
    public boolean dedicated() {
        return dedicated;
    }

    /**
     * For the provider of {@link #dedicated()} calls: the engine's own transactions on the transaction manager's
     * {@code DataSource} (a {@link TransactionAwareDataSourceProxy} looked through, so never the connection the
     * listener's transaction holds), where it reads the inbox after a call with the claim at commit rolled back.
     */
    @Override
    public TransactionProvider afterRollback() {
        return afterRollback;
    }

    /**
     * This provider for calls that begin a transaction of their own for one delivery and read the inbox
     * after a rollback (the {@link IdempotentListener} interceptor): {@link #dedicated()}.
     */
    SpringTransactionProvider perCall() {
        return new SpringTransactionProvider(dataSource, true);
    }

    /** The {@code DataSource} this provider joins transactions of. */
    public DataSource dataSource() {
        return dataSource;
    }

    /** The {@code DataSource} Spring binds the transaction's connection under (proxies looked through). */
    DataSource key() {
        return key;
    }

    /** What {@link PhysicalTransaction} binds its state under for this provider's {@code DataSource}. */
    PhysicalTransaction.Key stateKey() {
        return stateKey;
    }

    /**
     * Joins the Spring transaction of this thread.
     *
     * @throws IllegalTransactionStateException outside a transaction, in a read-only one, or when the
     *         transaction holds no connection of this provider's {@code DataSource}
     */
    @Override
    public TransactionHandle begin() throws SQLException {
        if (!TransactionSynchronizationManager.isActualTransactionActive()
                || !TransactionSynchronizationManager.isSynchronizationActive()) {
            throw new IllegalTransactionStateException("once joins the current Spring transaction, but no transaction"
                    + " is active on thread '" + Thread.currentThread().getName() + "': call it from a @Transactional"
                    + " method (or TransactionTemplate) of the transaction manager on " + describe(dataSource)
                    + "; @IdempotentListener methods get one of their own");
        }
        if (TransactionSynchronizationManager.isCurrentTransactionReadOnly()) {
            throw new IllegalTransactionStateException("once must write its claim and outbox rows, but the current"
                    + " transaction '" + TransactionSynchronizationManager.getCurrentTransactionName()
                    + "' is read-only");
        }
        Object bound = TransactionSynchronizationManager.getResource(key);
        if (!(bound instanceof ConnectionHolder)) {
            throw new IllegalTransactionStateException("the current transaction '"
                    + TransactionSynchronizationManager.getCurrentTransactionName() + "' holds no connection of "
                    + describe(dataSource) + ", the DataSource once was given; it holds "
                    + boundResources() + ". Its transaction manager manages another DataSource (or, for JPA, none:"
                    + " set JpaTransactionManager.setDataSource): the claim would commit apart from the business"
                    + " writes" + boundHint());
        }
        return new JoinedHandle(DataSourceUtils.getConnection(key), key, stateKey);
    }

    private static final class JoinedHandle extends JoinedTransactionHandle {
        private final DataSource key;
        private boolean closed;

        JoinedHandle(Connection connection, DataSource key, PhysicalTransaction.Key stateKey) {
            // Outcomes are registered with the physical transaction's state, which follows its savepoints
            // and is set aside while a REQUIRES_NEW step suspends it.
            super(connection, PhysicalTransaction.current(stateKey).joined());
            this.key = key;
        }

        @Override
        protected void markRollbackOnly() {
            SpringTransactionProvider.markRollbackOnly();
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                DataSourceUtils.releaseConnection(connection(), key);
            }
        }
    }

    /**
     * Marks the whole current transaction rollback-only, however it is managed: the JDBC connection
     * holders (DataSourceTransactionManager reads them) and the JPA transaction
     * (JpaTransactionManager reads {@code EntityTransaction.getRollbackOnly()}).
     */
    static void markRollbackOnly() {
        // Every resource bound, whatever bound it (another DataSource's connection, a JPA or Hibernate session, a
        // holder of the caller's): there is no telling which of them its transaction manager reads. forEach with
        // a constant action walks the map without the view and the iterators a for loop over values() takes (a
        // listener's own transaction marks a copy of an event rollback-only: once per duplicate delivery).
        TransactionSynchronizationManager.getResourceMap().forEach(MARK_ROLLBACK_ONLY);
    }

    /**
     * The resource holders bound to this thread that are not rollback-only now: those {@link #markRollbackOnly()}
     * would mark. Taken before a try that a savepoint may undo, so that its marks are undone with it ({@link
     * #unmark}): Spring resets the JDBC connection's mark on a rollback to a savepoint, not the other holders', a
     * container's Kafka transaction among them, which would then abort at commit.
     */
    static List<ResourceHolderSupport> unmarkedHolders() {
        List<ResourceHolderSupport> unmarked = new ArrayList<>(4);
        TransactionSynchronizationManager.getResourceMap().forEach((key, resource) -> {
            if (resource instanceof ResourceHolderSupport holder && !holder.isRollbackOnly()) {
                unmarked.add(holder);
            }
        });
        return unmarked;
    }

    /**
     * Clears the rollback-only mark of {@code holders} (from {@link #unmarkedHolders()}), after a rollback to a
     * savepoint undid the work that marked them.
     *
     * @return false if a mark cannot be cleared: a JPA transaction marked rollback-only stays so, and the caller's
     *         transaction must roll back
     */
    static boolean unmark(List<ResourceHolderSupport> holders) {
        for (ResourceHolderSupport holder : holders) {
            holder.resetRollbackOnly();
            if (JPA_PRESENT && Jpa.markedRollbackOnly(holder)) {
                return false;
            }
        }
        return true;
    }

    private static final BiConsumer<Object, Object> MARK_ROLLBACK_ONLY = (key, resource) -> {
        if (resource instanceof ResourceHolderSupport holder) {
            holder.setRollbackOnly();
        }
        if (JPA_PRESENT) {
            Jpa.markRollbackOnly(resource);
        }
    };

    private static final class Jpa {
        static boolean markedRollbackOnly(Object resource) {
            if (resource instanceof org.springframework.orm.jpa.EntityManagerHolder holder) {
                var tx = holder.getEntityManager().getTransaction();
                return tx.isActive() && tx.getRollbackOnly();
            }
            return false;
        }

        static void markRollbackOnly(Object resource) {
            if (resource instanceof org.springframework.orm.jpa.EntityManagerHolder holder) {
                var tx = holder.getEntityManager().getTransaction();
                if (tx.isActive()) {
                    tx.setRollbackOnly();
                }
            }
        }
    }

    private static final DataSource NOT_KNOWN = new DelegatingDataSource();

    /** The DataSource a transaction manager binds connections under; null if none is set; NOT_KNOWN for others. */
    private static DataSource managedDataSource(PlatformTransactionManager tm) {
        if (tm instanceof DataSourceTransactionManager dstm) {
            return dstm.getDataSource();
        }
        // JpaTransactionManager (spring-orm is optional) and others with a getDataSource() accessor
        // (HibernateTransactionManager, jOOQ's and R2DBC's don't apply).
        try {
            Method m = tm.getClass().getMethod("getDataSource");
            if (DataSource.class.isAssignableFrom(m.getReturnType())) {
                return (DataSource) m.invoke(tm);
            }
        } catch (ReflectiveOperationException e) {
            // no accessor: a JTA or custom transaction manager, checked per transaction
        }
        return NOT_KNOWN;
    }

    /** The key Spring binds the connection under: transaction managers look through TransactionAwareDataSourceProxy. */
    static DataSource resourceKey(DataSource ds) {
        DataSource d = ds;
        while (d instanceof TransactionAwareDataSourceProxy proxy && proxy.getTargetDataSource() != null) {
            d = proxy.getTargetDataSource();
        }
        Object unwrapped =
                org.springframework.transaction.support.TransactionSynchronizationUtils.unwrapResourceIfNecessary(d);
        return unwrapped instanceof DataSource u ? u : d;
    }

    private static String hint(DataSource managed, DataSource given) {
        if (managed instanceof DelegatingDataSource delegating && wraps(delegating, resourceKey(given))) {
            return " (it is a " + managed.getClass().getSimpleName() + " around the one once was given: give once"
                    + " the " + managed.getClass().getSimpleName() + ")";
        }
        if (given instanceof DelegatingDataSource delegating && wraps(delegating, resourceKey(managed))) {
            return " (once was given a " + given.getClass().getSimpleName() + " around the transaction manager's"
                    + " DataSource: give both the same bean)";
        }
        return "";
    }

    private String boundHint() {
        for (Object k : TransactionSynchronizationManager.getResourceMap().keySet()) {
            if (k instanceof DataSource other) {
                String h = hint(other, dataSource);
                if (!h.isEmpty()) {
                    return h;
                }
            }
        }
        return "";
    }

    private static boolean wraps(DelegatingDataSource outer, DataSource inner) {
        DataSource d = outer;
        while (d instanceof DelegatingDataSource delegating) {
            d = delegating.getTargetDataSource();
            if (d == inner) {
                return true;
            }
        }
        return false;
    }

    private static String boundResources() {
        var keys = TransactionSynchronizationManager.getResourceMap().keySet();
        if (keys.isEmpty()) {
            return "no resources";
        }
        return keys.stream()
                .map(k -> k instanceof DataSource d ? describe(d) : k.getClass().getSimpleName())
                .collect(Collectors.joining(", ", "[", "]"));
    }

    static String describe(DataSource ds) {
        return ds.getClass().getSimpleName() + "@" + Integer.toHexString(System.identityHashCode(ds));
    }
}
