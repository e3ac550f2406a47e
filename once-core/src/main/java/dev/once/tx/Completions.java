package dev.once.tx;

import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The callbacks of one transaction, each run once; a failing callback does not stop the others. */
final class Completions {

    private static final Logger log = LoggerFactory.getLogger(Completions.class);

    private List<TransactionHandle.CompletionCallback> callbacks;
    private boolean done;

    void add(TransactionHandle.CompletionCallback callback) {
        if (callbacks == null) {
            callbacks = new ArrayList<>(2);
        }
        callbacks.add(callback);
    }

    boolean done() {
        return done;
    }

    void fire(boolean committed) {
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
