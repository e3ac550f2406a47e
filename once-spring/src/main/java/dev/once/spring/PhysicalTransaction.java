package dev.once.spring;

import dev.once.OnceException;
import dev.once.TransactionOutbox;
import dev.once.Tx;
import dev.once.internal.fence.FenceSet;
import dev.once.internal.fence.TakenFence;
import dev.once.tx.JoinedTransaction;
import dev.once.tx.TransactionHandle;
import java.sql.SQLException;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * What {@code once} keeps for one physical Spring transaction on one {@code DataSource}: the engine's
 * pending outcomes ({@link JoinedTransaction}), the {@link OnceOutbox} rows not yet written, the
 * {@link Tx} of the {@link IdempotentListener} body running in it, and the fences taken on its connection
 * ({@link SpringTransactionFences}), checked again before it commits. Kept the way Spring keeps a
 * transaction's JDBC connection: bound as a resource while the transaction is the thread's current
 * one, unbound when a {@code REQUIRES_NEW} step suspends it and bound again when it resumes, so the
 * inner transaction gets a state of its own and never writes into the suspended one's. Follows the
 * transaction's savepoints ({@code NESTED}): what a rollback to a savepoint undoes in the database is
 * undone here too.
 *
 * <p>Spring announces a savepoint after creating it and a rollback to it before performing it; it
 * does not announce a release (a {@code NESTED} step that commits). A rollback to a savepoint this
 * state never heard of was created before the state existed, so everything recorded here came after
 * it: such a rollback undoes all of it. Belongs to the transaction's thread; not thread-safe.
 */
final class PhysicalTransaction implements TransactionSynchronization, BooleanSupplier {

    /**
     * The resource key: one state per DataSource (as Spring binds the DataSource's connection) and
     * transaction. Equal for equal DataSources (a record's equals asks {@code ==} first, so a proxy
     * DataSource forwarding equals to its target still equals itself); each provider makes its own once
     * ({@link SpringTransactionProvider#stateKey()}), so the looks per delivery allocate none.
     */
    record Key(DataSource dataSource) {
        // Spring's debug log names the resource by its key
        @Override
        public String toString() {
            return "once state of " + dataSource;
        }
    }

    private final Key key;
    private final JoinedTransaction joined = JoinedTransaction.checkingBeforeCommit();
    // Both made on first use: most transactions take no savepoint and write no outbox row, and one of
    // these states is made for every listener call (an empty IdentityHashMap allocates 32 slots).
    private Set<Object> savepoints;
    private Map<OnceOutbox, TransactionOutbox> outboxes;
    private Tx listenerTx;
    // The fences taken on the transaction's connection (Fence.check, SpringTransactionFences), checked again
    // before the commit; null until one is.
    private FenceSet fences;
    // Whether Spring's synchronizations hold this state (and so call its beforeCommit and afterCompletion).
    private boolean enlisted;
    // dueBeforeCommit of the synchronizations beforeOwnersCommit found, or null: read then, asked at the commit
    private Boolean othersDueBeforeCommit;

    private PhysicalTransaction(Key key) {
        this.key = key;
    }

    /** The state of the current transaction on {@code key}'s DataSource, created and registered on first use. */
    static PhysicalTransaction current(Key key) {
        return bound(key, true);
    }

    /**
     * The state of a transaction that its caller began for one listener call and commits itself right after
     * it (the {@link IdempotentListener} interceptor's own, on a {@code DataSourceTransactionManager}): bound,
     * but not registered with Spring's synchronizations, whose every trigger (four per commit) copies and sorts
     * the thread's list when it is not empty; the caller runs {@link #beforeOwnersCommit} and {@link
     * #ownerEnded} around its commit instead. It is registered ({@link #enlist}) as soon as Spring has to tell
     * it something only a synchronization hears: the body begins a transaction step of any propagation (a
     * {@code REQUIRES_NEW} or non-transactional step suspends it, a {@code NESTED} one takes a savepoint;
     * {@link ConfinedConnectionHolder} sees each begin), or the body registered a synchronization of its own
     * (whose {@code beforeCommit} and outcome Spring orders).
     */
    static PhysicalTransaction owned(Key key) {
        return bound(key, false);
    }

    // The state bound to key's DataSource in this thread, or a new one bound (and registered if enlist).
    private static PhysicalTransaction bound(Key key, boolean enlist) {
        Object bound = TransactionSynchronizationManager.getResource(key);
        if (bound instanceof PhysicalTransaction state) {
            return state;
        }
        PhysicalTransaction state = new PhysicalTransaction(key);
        TransactionSynchronizationManager.bindResource(key, state);
        if (enlist) {
            state.enlist();
        }
        return state;
    }

    /** Registers this state with Spring's synchronizations of the transaction, once; Spring drives it from then on. */
    void enlist() {
        if (!enlisted) {
            enlisted = true;
            TransactionSynchronizationManager.registerSynchronization(this);
        }
    }

    /** Whether Spring's synchronizations hold this state. */
    boolean enlisted() {
        return enlisted;
    }

    /**
     * Called by the owner of a transaction this state was made for ({@link #owned}) right before it commits:
     * what {@link #beforeCommit} does, or nothing when the state is enlisted (Spring runs it then). When the
     * body registered synchronizations of its own, this state is enlisted now instead, after them: Spring then
     * runs their {@code beforeCommit} first and this one's claim check after their writes, and tells this state
     * how the commit ended.
     *
     * @return true if the commit that follows decides alone how this transaction ends ({@link #ownerEnded} must
     *     then be told), false if Spring's synchronizations tell this state
     */
    boolean beforeOwnersCommit() {
        if (enlisted) {
            return false;
        }
        List<TransactionSynchronization> others = TransactionSynchronizationManager.getSynchronizations();
        if (!others.isEmpty()) {
            // Spring's list as the commit will see it (a synchronization registered during its beforeCommit
            // triggers is not run there): read once here, not copied again for the fold's rule
            othersDueBeforeCommit = Boolean.valueOf(dueBeforeCommit(others));
            enlist();
            return false;
        }
        beforeCommit(false);
        return true;
    }

    /**
     * Called by the owner of a transaction this state was made for ({@link #owned}) once it ended, whether it
     * committed or not; does nothing when Spring's synchronizations told this state already.
     */
    void ownerEnded(boolean committed) {
        if (!enlisted) {
            afterCompletion(committed ? STATUS_COMMITTED : STATUS_ROLLED_BACK);
        }
    }

    /**
     * Tells {@code outcome} how the call that just returned ends for the broker: at the end of the transaction
     * it joined on {@code key}'s DataSource (a container's, a caller's {@code @Transactional}), true only if that
     * transaction commits and no rollback to a savepoint undid the call (once's state follows its savepoints;
     * a Spring {@code afterCommit} synchronization would outlive such a rollback); or now, with true, when no
     * transaction is active (the call's own has committed already). The one place the listener's
     * acknowledgements (Kafka's {@code Acknowledgment}, Pub/Sub's ack or nack) wait for a joined commit.
     */
    static void afterCallCommits(Key key, TransactionHandle.CompletionCallback outcome) {
        if (TransactionSynchronizationManager.isActualTransactionActive()
                && TransactionSynchronizationManager.isSynchronizationActive()) {
            current(key).joined().afterCompletion(outcome);
        } else {
            outcome.completed(true);
        }
    }

    /** The state of the current transaction on {@code key}'s DataSource, or null when once has none there. */
    static PhysicalTransaction existing(Key key) {
        return TransactionSynchronizationManager.getResource(key) instanceof PhysicalTransaction s ? s : null;
    }

    JoinedTransaction joined() {
        return joined;
    }

    /** The body of the {@link IdempotentListener} call running in this transaction, or null. */
    Tx listenerTx() {
        return listenerTx;
    }

    /** Sets the listener body's {@link Tx} and returns the one it replaces (a listener called from a listener). */
    Tx listenerTx(Tx tx) {
        Tx previous = listenerTx;
        listenerTx = tx;
        return previous;
    }

    /**
     * The writer of {@code outbox}'s rows in this transaction, told of its savepoints from now on (a
     * rollback to one taken before the writer existed undoes all of its rows). One per transaction, so
     * its rows are numbered #1, #2, … under one random cause.
     */
    TransactionOutbox writer(OnceOutbox outbox, Supplier<TransactionOutbox> writer) {
        if (outboxes == null) {
            outboxes = new IdentityHashMap<>(2);
        }
        return outboxes.computeIfAbsent(outbox, o -> {
            TransactionOutbox w = writer.get();
            joined.addSavepointListener(w);
            return w;
        });
    }

    /**
     * A fence taken on this transaction's connection, recorded before it is checked (a refusal the caller
     * catches is found again): {@link #beforeCommit} checks it again, the newest token per resource.
     */
    void fenced(TakenFence fence) {
        if (fences == null) {
            fences = new FenceSet();
        }
        fences.take(fence);
    }

    /**
     * Checks every fence taken in this transaction again ({@link FenceSet}), on its connection, after all its
     * savepoints are settled: a rollback to one taken before a check undid the check, and a caller may have
     * caught a refusal and written on. Two statements per fenced resource, none where nothing was fenced.
     */
    private void fenceAgain() {
        if (fences == null) {
            return;
        }
        if (!(TransactionSynchronizationManager.getResource(key.dataSource()) instanceof ConnectionHolder holder)
                || holder.getConnectionHandle() == null) {
            throw new OnceException("the transaction fenced " + fences + " but holds no connection of "
                    + key.dataSource() + " at its commit to check the fences again on; it is rolled back");
        }
        try {
            fences.checkAll(
                    holder.getConnection(),
                    "found when the Spring transaction's fences were checked again before its commit (a rollback to"
                            + " a savepoint undid the check, or the caller caught its refusal and went on); this"
                            + " writer's lease was taken over, the transaction is rolled back");
        } catch (SQLException e) {
            throw new OnceException(
                    "checking the transaction's fences again before its commit failed: " + e.getMessage(), e);
        }
    }

    @Override
    public void suspend() {
        TransactionSynchronizationManager.unbindResource(key);
    }

    @Override
    public void resume() {
        TransactionSynchronizationManager.bindResource(key, this);
    }

    /** Forwarded by the joined transaction to the outbox writers and, while a handler runs, the engine's buffer. */
    @Override
    public void savepoint(Object savepoint) {
        if (savepoints == null) {
            savepoints = Collections.newSetFromMap(new IdentityHashMap<>(4));
        }
        savepoints.add(savepoint);
        joined.savepoint(savepoint);
    }

    @Override
    public void savepointRollback(Object savepoint) {
        // One taken before this state existed is a rollback to the start of the transaction as far as once knows it
        joined.rollbackToSavepoint(
                savepoints != null && savepoints.contains(savepoint) ? savepoint : JoinedTransaction.START);
    }

    /**
     * The rows are written in one statement per writer before the commit, then the engine's claim checks
     * run; a failure of either rolls everything back. The last check carries the COMMIT itself when
     * nothing else is due before the transaction manager's {@code Connection.commit()}: no other
     * synchronization has a {@code beforeCommit} of its own (one ordered after this one may still write; one
     * ordered before it wrote through Spring's connection, which the guard of a confined body does not see, so
     * the check must run), the connection is not a
     * JTA one (those come with Spring's {@code ConnectionSynchronization}), and the transaction holds nothing
     * but JDBC connections (a JPA or Hibernate transaction manager flushes its session in its commit, after
     * every {@code beforeCommit}). Synchronizations' {@code beforeCompletion} runs after the fold; Spring
     * meant it for releasing resources, and a write there would land in a transaction of its own.
     * The driver's commit then finds the transaction ended and sends nothing (pgjdbc tracks it), so the
     * listener's transaction costs the round trips of a hand-written one. Otherwise each check is a
     * statement of its own.
     */
    @Override
    public void beforeCommit(boolean readOnly) {
        fenceAgain(); // first: the fold below may carry the COMMIT itself
        try {
            if (outboxes != null) {
                for (TransactionOutbox w : outboxes.values()) {
                    w.flush();
                }
            }
        } catch (SQLException e) {
            throw new OnceException("writing the transaction's outbox rows failed: " + e.getMessage(), e);
        }
        try {
            joined.runChecks(this); // asks getAsBoolean only when a check is pending
        } catch (SQLException e) {
            throw new OnceException("checking the transaction's claims before its commit failed: " + e.getMessage(), e);
        }
    }

    /**
     * Whether nothing else is due before the commit, so the last claim check may carry the COMMIT: {@link
     * JoinedTransaction#runChecks}' question, which this state answers itself rather than through a method
     * reference made per commit (a Spring listener makes a transaction per delivery).
     */
    // Asked by runChecks only when a check is pending: a commit with no claim to check (no listener body
    // ran, or only duplicates) skips these looks at Spring's synchronizations and resources. Indexed loops
    // and a count: no iterator or map view allocated per commit (Spring's list is a fresh sorted copy).
    @Override
    public boolean getAsBoolean() {
        if (othersDueBeforeCommit != null
                ? othersDueBeforeCommit
                : dueBeforeCommit(TransactionSynchronizationManager.getSynchronizations())) {
            return false;
        }
        Map<Object, Object> resources = TransactionSynchronizationManager.getResourceMap();
        if (resources.size() == 2
                && TransactionSynchronizationManager.getResource(key) == this
                && TransactionSynchronizationManager.getResource(key.dataSource()) instanceof ConnectionHolder) {
            return true; // the usual transaction: its connection and this state, nothing else
        }
        for (Object bound : resources.values()) {
            if (!(bound instanceof ConnectionHolder || bound instanceof PhysicalTransaction)) {
                return false;
            }
        }
        return true;
    }

    /** Whether a synchronization of {@code all} other than this state may write or commit apart from it. */
    private boolean dueBeforeCommit(List<TransactionSynchronization> all) {
        for (int i = 0; i < all.size(); i++) {
            TransactionSynchronization s = all.get(i);
            if (s != this
                    && (s.getClass().getName().startsWith(CONNECTION_SYNCHRONIZATION)
                            || WRITES_BEFORE_COMMIT.get(s.getClass()))) {
                return true;
            }
        }
        return false;
    }

    // Spring registers DataSourceUtils' ConnectionSynchronization for a connection no
    // DataSourceTransactionManager bound: a JTA transaction's (committed by XA, never by SQL).
    private static final String CONNECTION_SYNCHRONIZATION = DataSourceUtils.class.getName() + "$";

    /**
     * Whether a synchronization class has a {@code beforeCommit} of its own: one that runs after this
     * state's (Spring runs them in order) may write, and a COMMIT sent before it would leave that write
     * to a second transaction; one that ran before it may have written unseen. One that only listens for the
     * outcome ({@code afterCommit}, an {@code @TransactionalEventListener} counter) does not hold the fold back.
     */
    private static final ClassValue<Boolean> WRITES_BEFORE_COMMIT = new ClassValue<>() {
        @Override
        protected Boolean computeValue(Class<?> type) {
            try {
                return type.getMethod("beforeCommit", boolean.class).getDeclaringClass()
                        != TransactionSynchronization.class;
            } catch (NoSuchMethodException e) {
                return true;
            }
        }
    };

    @Override
    public void afterCompletion(int status) {
        TransactionSynchronizationManager.unbindResourceIfPossible(key);
        // STATUS_UNKNOWN (a commit that failed mid-way) counts as not committed: the message stays
        // unacknowledged and a redelivery is absorbed by the inbox if it did commit.
        joined.completed(status == STATUS_COMMITTED);
    }
}
