package dev.once.tx;

import java.util.ArrayList;
import java.util.List;
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
 * <p>Savepoints are matched by identity: pass the same object to {@link #savepoint} and
 * {@link #rollbackToSavepoint}. Used by the transaction's thread; not thread-safe.
 */
public final class JoinedTransaction implements SavepointListener {

    private static final Logger log = LoggerFactory.getLogger(JoinedTransaction.class);

    private final List<TransactionHandle.CompletionCallback> callbacks = new ArrayList<>(2);
    // undone.get(i): callback i reports work a rollback to a savepoint undid
    private final List<Boolean> undone = new ArrayList<>(2);
    // the savepoints still valid, oldest first, each with the number of callbacks registered before it
    private final List<Object> savepoints = new ArrayList<>(0);
    private final List<Integer> positions = new ArrayList<>(0);
    private final List<SavepointListener> listeners = new ArrayList<>(0);
    private boolean done;

    /** A transaction that has just begun: no callbacks, no savepoints. */
    public JoinedTransaction() {}

    /** Registers {@code callback} for the end of the transaction (see the class comment for what it hears). */
    public void afterCompletion(TransactionHandle.CompletionCallback callback) {
        if (done) {
            throw new IllegalStateException("the transaction has already completed; nothing can wait for its end");
        }
        callbacks.add(callback);
        undone.add(false);
    }

    /**
     * Forwards this transaction's savepoints to {@code listener} too (the engine's outbox buffer while a
     * handler runs in this transaction), until {@link #removeSavepointListener}.
     */
    public void addSavepointListener(SavepointListener listener) {
        listeners.add(listener);
    }

    /** Stops forwarding savepoints to {@code listener}. */
    public void removeSavepointListener(SavepointListener listener) {
        listeners.removeIf(l -> l == listener);
    }

    /** A savepoint was created: callbacks registered from now on are undone by a rollback to it. */
    @Override
    public void savepoint(Object savepoint) {
        savepoints.add(savepoint);
        positions.add(callbacks.size());
        for (SavepointListener l : listeners) {
            l.savepoint(savepoint);
        }
    }

    /**
     * The transaction rolled back to {@code savepoint}: every callback registered since it will hear
     * {@code completed(false)}. Savepoints created after it are gone; it stays, as in JDBC.
     *
     * @throws IllegalStateException if {@code savepoint} was never announced with {@link #savepoint} (or was
     *         released): the integration missed a savepoint, and outcomes registered since cannot be told apart
     */
    @Override
    public void rollbackToSavepoint(Object savepoint) {
        int at = indexOf(savepoint);
        if (at < 0) {
            throw new IllegalStateException("rollback to savepoint " + savepoint
                    + ", which was never announced with savepoint(...): the integration must report every"
                    + " savepoint it creates, or once cannot tell which outcomes the rollback undid");
        }
        for (int i = positions.get(at); i < callbacks.size(); i++) {
            undone.set(i, true);
        }
        truncate(at + 1);
        for (SavepointListener l : listeners) {
            l.rollbackToSavepoint(savepoint);
        }
    }

    /** The savepoint was released: it (and any created after it) can no longer be rolled back to. Unknown ones are ignored. */
    @Override
    public void releaseSavepoint(Object savepoint) {
        int at = indexOf(savepoint);
        if (at >= 0) {
            truncate(at);
        }
        for (SavepointListener l : listeners) {
            l.releaseSavepoint(savepoint);
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
        for (int i = 0; i < callbacks.size(); i++) {
            boolean stands = committed && !undone.get(i);
            try {
                callbacks.get(i).completed(stands);
            } catch (RuntimeException e) {
                log.warn("a transaction completion callback failed (committed={})", stands, e);
            }
        }
    }

    boolean knows(Object savepoint) {
        return indexOf(savepoint) >= 0;
    }

    private int indexOf(Object savepoint) {
        for (int i = savepoints.size() - 1; i >= 0; i--) {
            if (savepoints.get(i) == savepoint) {
                return i;
            }
        }
        return -1;
    }

    private void truncate(int size) {
        while (savepoints.size() > size) {
            savepoints.remove(savepoints.size() - 1);
            positions.remove(positions.size() - 1);
        }
    }
}
