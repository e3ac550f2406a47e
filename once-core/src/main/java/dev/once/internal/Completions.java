package dev.once.internal;

import dev.once.tx.TransactionHandle;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The completion callbacks of one transaction, run once; a failing callback does not stop the
 * others. Shared by the owned handles of {@link Transactions} and {@link dev.once.tx.ManualTransactions}.
 * Not API.
 */
public final class Completions {

    private static final Logger log = LoggerFactory.getLogger(Completions.class);

    private List<TransactionHandle.CompletionCallback> callbacks;
    private boolean done;

    public void add(TransactionHandle.CompletionCallback callback) {
        if (callbacks == null) {
            callbacks = new ArrayList<>(2);
        }
        callbacks.add(callback);
    }

    public boolean done() {
        return done;
    }

    public void fire(boolean committed) {
        if (done) {
            return;
        }
        done = true;
        if (callbacks == null) {
            return;
        }
        for (TransactionHandle.CompletionCallback cb : callbacks) {
            try {
                cb.completed(committed);
            } catch (RuntimeException e) {
                log.warn("a transaction completion callback failed (committed={})", committed, e);
            }
        }
    }
}
