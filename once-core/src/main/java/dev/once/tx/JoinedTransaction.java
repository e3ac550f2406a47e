package dev.once.tx;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.Arrays;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the engine registers with one physical transaction, following the transaction's savepoints:
 * the completion callbacks that report outcomes. An integration that joins a caller's transaction
 * keeps one per physical transaction (a suspended transaction keeps its own, a {@code REQUIRES_NEW}
 * inner transaction gets a new one) and tells it how the transaction goes on, as Spring's
 * {@code TransactionSynchronization} is told: {@link #savepoint}, {@link #rollbackToSavepoint},
 * {@link #releaseSavepoint}, and at the end {@link #completed}.
 *
 * <p>The rule it keeps: a callback registered after a savepoint that the transaction then rolled
 * back to hears {@code completed(false)} when the transaction ends, even if the outer transaction
 * commits, because the work it reports was undone with the savepoint. Everything else hears how the
 * transaction ended. Callbacks run once, in the order registered, at {@link #completed}, never before
 * (an outcome is final only when the outermost transaction ends); a failing callback does not stop the
 * others.
 *
 * <p>An integration that can run the engine's last check right before its commit creates it with
 * {@link #checkingBeforeCommit()} and calls {@link #runChecks} there; the engine then leaves the check
 * that its claims are still the transaction's to that moment ({@link #checkBeforeCommit}) instead of
 * asking the database right after the handler, and when the integration's commit sends nothing but
 * the COMMIT, the last check and the COMMIT travel in one round trip. A check registered after a
 * savepoint the transaction rolled back to is dropped with the work it checks.
 *
 * <p>Savepoints are matched by identity: pass the same object to {@link #savepoint} and
 * {@link #rollbackToSavepoint}; {@link #START} is the start of the transaction, never announced. Used by the
 * transaction's thread; not thread-safe.
 */
public final class JoinedTransaction implements SavepointListener {

    private static final Logger log = LoggerFactory.getLogger(JoinedTransaction.class);

    /**
     * The start of every transaction, as a savepoint: {@code rollbackToSavepoint(START)} undoes everything
     * registered and forgets every savepoint, and the savepoint listeners hear it as a rollback to a savepoint
     * they were never told of (set before they existed: all they hold is undone). For an integration that meets
     * a rollback to a savepoint taken before it knew the transaction, as once-spring does when Spring rolls back
     * to a savepoint set before once's state joined the transaction. One shared constant rather than a
     * savepoint announced at the start of each transaction: a Spring listener's transaction is made per
     * delivery, and the announced sentinel cost an object and a savepoint slot each time. Never announced
     * with {@link #savepoint} (refused).
     */
    public static final Object START = new Object() {
        @Override
        public String toString() {
            return "JoinedTransaction.START";
        }
    };

    // CompletionCallbacks and CommitChecks in the order registered; one that belongs to work a rollback to a
    // savepoint undid is kept in its place wrapped in Undone (rare: no parallel list of flags per entry). An
    // array grown on demand, as the savepoints' below: a list object per transaction, and a Spring listener makes
    // a transaction per delivery, was 24 of its bytes.
    private Object[] entries = new Object[2];
    private int entryCount;

    private record Undone(Object entry) {}
    // Takes the place of a CommitCheck that ran, so it never runs twice. A place, not a removal: the
    // savepoints' positions count the entries registered before them.
    private static final Object CHECKED = new Object();
    // The savepoints still valid, oldest first, and the number of entries registered before each: arrays
    // grown on demand, not lists (a Spring listener's transaction makes one of these per delivery and announces
    // one savepoint, and its engine one savepoint listener: three lists and their boxed positions were most of
    // what this object cost).
    private Object[] savepoints = NO_SAVEPOINTS;
    private int[] positions = NO_POSITIONS;
    private int savepointCount;
    private SavepointListener[] listeners = NO_LISTENERS;
    private int listenerCount;
    private static final Object[] NO_SAVEPOINTS = {};
    private static final int[] NO_POSITIONS = {};
    private static final SavepointListener[] NO_LISTENERS = {};
    private final boolean checksBeforeCommit;
    private final boolean checksAfterHandler;
    private Connection confinedTo;
    private boolean done;

    /** A transaction that has just begun: no callbacks, no savepoints; the engine checks its claims right after the handler. */
    public JoinedTransaction() {
        this(false, true);
    }

    private JoinedTransaction(boolean checksBeforeCommit, boolean checksAfterHandler) {
        this.checksBeforeCommit = checksBeforeCommit;
        this.checksAfterHandler = checksAfterHandler;
    }

    /**
     * A transaction that has just begun, whose integration calls {@link #runChecks} right before every
     * commit of it (and never commits it without): the engine leaves its claim checks to that moment.
     */
    public static JoinedTransaction checkingBeforeCommit() {
        return new JoinedTransaction(true, false);
    }

    /**
     * A transaction that has just begun, whose integration calls {@link #runChecks} right before every commit
     * of it, and whose caller must also hear a lost claim from the call itself: the engine checks its claims
     * right after the handler (a failed outcome is returned at once) and again before the commit. For an
     * integration whose caller holds the raw connection between the calls and the commit ({@link
     * ManualTransactions}): a rollback there, or a savepoint set and rolled back there, undoes claims the
     * integration never hears undone, and only the check at the commit sees it.
     */
    public static JoinedTransaction checkingAfterHandlerAndBeforeCommit() {
        return new JoinedTransaction(true, true);
    }

    /** True when the integration runs {@link #runChecks} before the commit, so the engine may register checks. */
    public boolean checksBeforeCommit() {
        return checksBeforeCommit;
    }

    /** True when the engine must check its claims right after the handler (also when it checks them before the commit). */
    public boolean checksAfterHandler() {
        return checksAfterHandler;
    }

    /**
     * Tells the engine that the handler about to run reaches this transaction's connection only through
     * {@code handlerConnection}, the connection of its {@code Tx}: the integration has put it where the
     * caller's code looks the transaction's connection up (Spring's bound {@code ConnectionHolder}), so
     * every statement of the handler passes the engine's guard, which sees what can cost a claim (a failed
     * statement, SQL naming the inbox, transaction control). The engine then skips its claim check when
     * the guard saw none of it and nothing else is due before the commit ({@link CommitCheck#run}'s
     * {@code commit}): the transaction costs the round trips of a hand-written one. While confined, the
     * guard hands out the driver's own connection on {@code unwrap} (as the integration's connection would)
     * and notes that it no longer sees everything, so the check runs. {@code null} withdraws it. Stays
     * until replaced; the engine compares it with the connection its handler got, so a mark left by
     * another handler never counts.
     */
    public void confineHandlerTo(Connection handlerConnection) {
        this.confinedTo = handlerConnection;
    }

    /** The connection of {@link #confineHandlerTo}, or null. */
    public Connection handlerConfinedTo() {
        return confinedTo;
    }

    /**
     * The engine's check that what it claimed in this transaction is still the transaction's, run by
     * the integration right before the commit.
     */
    @FunctionalInterface
    public interface CommitCheck {
        /**
         * Asks the database; throws when the claim is lost (the transaction must then roll back).
         *
         * @param commit true when the integration's commit would send nothing but the COMMIT: the check
         *     may then send it in its own round trip, when the check passes, and says so
         * @return true if it committed the transaction (only when {@code commit} was true)
         * @throws SQLException if the database could not be asked
         */
        boolean run(boolean commit) throws SQLException;
    }

    /**
     * Registers {@code check} to run right before the commit (dropped if a rollback to a savepoint
     * taken before it undoes the work it checks).
     *
     * @throws IllegalStateException unless created {@link #checkingBeforeCommit()}, or once completed
     */
    public void checkBeforeCommit(CommitCheck check) {
        if (!checksBeforeCommit) {
            throw new IllegalStateException("this transaction's integration runs no checks before its commit");
        }
        add(check);
    }

    /**
     * Runs the registered checks still standing, in order, right before the commit; the last one may
     * send the COMMIT with it. A failing check throws, and the integration must roll back.
     *
     * @param commitAllowed whether the integration's commit would send nothing but the COMMIT (no
     *     other work is due before it), so the last check may commit; asked once, and only when a check is
     *     pending (the answer may cost the integration a look at its transaction's other participants)
     * @return true if the transaction is now committed (the integration's commit must then send nothing;
     *     a JDBC driver that tracks the transaction's state, as pgjdbc does, sends nothing by itself)
     * @throws SQLException if a check could not ask the database
     */
    public boolean runChecks(BooleanSupplier commitAllowed) throws SQLException {
        int last = -1;
        for (int i = 0; i < entryCount; i++) {
            if (entries[i] instanceof CommitCheck) {
                last = i;
            }
        }
        if (last < 0) {
            return false;
        }
        boolean mayCommit = commitAllowed.getAsBoolean();
        boolean committed = false;
        for (int i = 0; i <= last; i++) {
            if (entries[i] instanceof CommitCheck check) {
                committed = check.run(mayCommit && i == last);
                entries[i] = CHECKED; // ran: not again if the integration asks once more
            }
        }
        return committed;
    }

    /** Registers {@code callback} for the end of the transaction (see the class comment for what it hears). */
    public void afterCompletion(TransactionHandle.CompletionCallback callback) {
        add(callback);
    }

    private void add(Object entry) {
        if (done) {
            throw new IllegalStateException("the transaction has already completed; nothing can wait for its end");
        }
        if (entryCount == entries.length) {
            entries = Arrays.copyOf(entries, entryCount * 2);
        }
        entries[entryCount++] = entry;
    }

    /**
     * Forwards this transaction's savepoints to {@code listener} too (the engine's outbox buffer while a
     * handler runs in this transaction), until {@link #removeSavepointListener}.
     */
    public void addSavepointListener(SavepointListener listener) {
        if (listenerCount == listeners.length) {
            listeners = Arrays.copyOf(listeners, Math.max(2, listenerCount * 2));
        }
        listeners[listenerCount++] = listener;
    }

    /** Stops forwarding savepoints to {@code listener}. */
    public void removeSavepointListener(SavepointListener listener) {
        // By index, the last added first (the engine removes its buffer after each handler), every time it was added.
        for (int i = listenerCount - 1; i >= 0; i--) {
            if (listeners[i] == listener) {
                System.arraycopy(listeners, i + 1, listeners, i, listenerCount - i - 1);
                listeners[--listenerCount] = null;
            }
        }
    }

    /**
     * A savepoint was created: callbacks registered from now on are undone by a rollback to it.
     *
     * @throws IllegalArgumentException for {@link #START}, the start of the transaction, which is not set
     */
    @Override
    public void savepoint(Object savepoint) {
        if (savepoint == START) {
            throw new IllegalArgumentException("JoinedTransaction.START is the start of the transaction, not a"
                    + " savepoint to announce: pass the savepoint object the transaction created");
        }
        if (savepointCount == savepoints.length) {
            savepoints = Arrays.copyOf(savepoints, Math.max(2, savepointCount * 2));
            positions = Arrays.copyOf(positions, savepoints.length);
        }
        savepoints[savepointCount] = savepoint;
        positions[savepointCount++] = entryCount;
        for (int i = 0; i < listenerCount; i++) {
            listeners[i].savepoint(savepoint);
        }
    }

    /**
     * The transaction rolled back to {@code savepoint}: every callback registered since it will hear
     * {@code completed(false)}. Savepoints created after it are gone; it stays, as in JDBC.
     * {@link #START}: the start of the transaction, before everything registered; every savepoint is gone.
     *
     * @throws IllegalStateException if {@code savepoint} was never announced with {@link #savepoint} (or was
     *         released): the integration missed a savepoint, and outcomes registered since cannot be told apart
     */
    @Override
    public void rollbackToSavepoint(Object savepoint) {
        if (savepoint == START) {
            undoFrom(0);
            truncate(0);
            for (int i = 0; i < listenerCount; i++) {
                listeners[i].rollbackToSavepoint(savepoint);
            }
            return;
        }
        int at = indexOf(savepoint);
        if (at < 0) {
            throw new IllegalStateException("rollback to savepoint " + savepoint
                    + ", which was never announced with savepoint(...): the integration must report every"
                    + " savepoint it creates, or once cannot tell which outcomes the rollback undid");
        }
        undoFrom(positions[at]);
        truncate(at + 1);
        for (int i = 0; i < listenerCount; i++) {
            listeners[i].rollbackToSavepoint(savepoint);
        }
    }

    /** The savepoint was released: it (and any created after it) can no longer be rolled back to. Unknown ones are ignored. */
    @Override
    public void releaseSavepoint(Object savepoint) {
        int at = indexOf(savepoint);
        if (at >= 0) {
            truncate(at);
        }
        for (int i = 0; i < listenerCount; i++) {
            listeners[i].releaseSavepoint(savepoint);
        }
    }

    /** True once {@link #completed} ran. */
    public boolean done() {
        return done;
    }

    /** The transaction ended: runs every callback once. Later calls do nothing. */
    public void completed(boolean committed) {
        if (done) {
            return;
        }
        done = true;
        for (int i = 0; i < entryCount; i++) {
            Object entry = entries[i];
            boolean undone = entry instanceof Undone;
            if (entry instanceof Undone u) {
                entry = u.entry();
            }
            if (!(entry instanceof TransactionHandle.CompletionCallback callback)) {
                continue;
            }
            boolean stands = committed && !undone;
            try {
                callback.completed(stands);
            } catch (RuntimeException e) {
                log.warn("a transaction completion callback failed (committed={})", stands, e);
            }
        }
    }

    // Every entry registered from position from on belongs to work a rollback undid.
    private void undoFrom(int from) {
        for (int i = from; i < entryCount; i++) {
            if (!(entries[i] instanceof Undone)) {
                entries[i] = new Undone(entries[i]);
            }
        }
    }

    /** Where {@code savepoint} stands among the savepoints still valid, oldest 0; -1 if it is not one of them. */
    int indexOf(Object savepoint) {
        for (int i = savepointCount - 1; i >= 0; i--) {
            if (savepoints[i] == savepoint) {
                return i;
            }
        }
        return -1;
    }

    /** How many savepoints are still valid (set, and neither released nor gone with a rollback to one before them). */
    int savepointCount() {
        return savepointCount;
    }

    private void truncate(int size) {
        while (savepointCount > size) {
            savepoints[--savepointCount] = null;
        }
    }
}
