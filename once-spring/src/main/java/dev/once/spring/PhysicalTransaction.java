package dev.once.spring;

import dev.once.OnceException;
import dev.once.TransactionOutbox;
import dev.once.Tx;
import dev.once.tx.JoinedTransaction;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * What {@code once} keeps for one physical Spring transaction on one {@code DataSource}: the engine's
 * pending outcomes ({@link JoinedTransaction}), the {@link OnceOutbox} rows not yet written, and the
 * {@link Tx} of the {@link IdempotentListener} body running in it. Kept the way Spring keeps a
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
final class PhysicalTransaction implements TransactionSynchronization {

    /** The resource key: one state per DataSource (as Spring binds the DataSource's connection) and transaction. */
    private record Key(DataSource dataSource) {}

    private final Object key;
    private final JoinedTransaction joined = new JoinedTransaction();
    // Stands for "the start of the transaction as far as once knows it": a rollback to a savepoint taken
    // before this state existed is a rollback to it.
    private final Object start = new Object();
    private final Set<Object> savepoints = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Map<OnceOutbox, Rows> outboxes = new IdentityHashMap<>(2);
    private Tx listenerTx;

    private PhysicalTransaction(Object key) {
        this.key = key;
        joined.savepoint(start);
    }

    /** The state of the current transaction on {@code dataSource}, created and registered on first use. */
    static PhysicalTransaction current(DataSource dataSource) {
        Key key = new Key(dataSource);
        Object bound = TransactionSynchronizationManager.getResource(key);
        if (bound instanceof PhysicalTransaction state) {
            return state;
        }
        PhysicalTransaction state = new PhysicalTransaction(key);
        TransactionSynchronizationManager.bindResource(key, state);
        TransactionSynchronizationManager.registerSynchronization(state);
        return state;
    }

    /** The state of the current transaction on {@code dataSource}, or null when once has none there. */
    static PhysicalTransaction existing(DataSource dataSource) {
        return TransactionSynchronizationManager.getResource(new Key(dataSource)) instanceof PhysicalTransaction s
                ? s
                : null;
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

    /** The writer for {@code outbox}'s rows added from now on in this transaction. */
    TransactionOutbox writer(OnceOutbox outbox, Supplier<TransactionOutbox.Builder> builder) {
        return outboxes.computeIfAbsent(outbox, o -> new Rows(builder)).current();
    }

    @Override
    public void suspend() {
        TransactionSynchronizationManager.unbindResource(key);
    }

    @Override
    public void resume() {
        TransactionSynchronizationManager.bindResource(key, this);
    }

    @Override
    public void savepoint(Object savepoint) {
        savepoints.add(savepoint);
        joined.savepoint(savepoint);
        for (Rows rows : outboxes.values()) {
            rows.savepoint(savepoint);
        }
    }

    @Override
    public void savepointRollback(Object savepoint) {
        Object to = savepoints.contains(savepoint) ? savepoint : start;
        joined.rollbackToSavepoint(to);
        for (Rows rows : outboxes.values()) {
            rows.rollbackTo(to);
        }
    }

    /** The rows are written in one statement per writer before the commit; a failure rolls everything back. */
    @Override
    public void beforeCommit(boolean readOnly) {
        try {
            for (Rows rows : outboxes.values()) {
                rows.flush();
            }
        } catch (SQLException e) {
            throw new OnceException("writing the transaction's outbox rows failed: " + e.getMessage(), e);
        }
    }

    @Override
    public void afterCompletion(int status) {
        TransactionSynchronizationManager.unbindResourceIfPossible(key);
        // STATUS_UNKNOWN (a commit that failed mid-way) counts as not committed: the message stays
        // unacknowledged and a redelivery is absorbed by the inbox if it did commit.
        joined.completed(status == STATUS_COMMITTED);
    }

    /**
     * One {@link OnceOutbox}'s rows in this transaction, as segments: a new writer for the rows added
     * after each savepoint, so a rollback to it drops exactly the writers opened since (their buffered
     * rows, and the rows they already flushed, which the database's rollback undid). A writer flushes
     * by itself when it holds {@code Outbox.FLUSH_ROWS} rows; its rows then land inside the savepoint
     * they belong to, never inside a later one. Writers are opened on the first row of a segment.
     * The segments are written in order at commit; only a segment that fills a writer's flush size
     * is written earlier, ahead of rows of earlier segments still buffered.
     */
    private final class Rows {
        private final Supplier<TransactionOutbox.Builder> builder;
        private final String cause = java.util.UUID.randomUUID().toString();
        private final List<Object> marks = new ArrayList<>(); // the savepoint each segment starts at
        private final List<TransactionOutbox> writers = new ArrayList<>();
        private int opened;

        Rows(Supplier<TransactionOutbox.Builder> builder) {
            this.builder = builder;
            marks.add(start);
            writers.add(null);
        }

        TransactionOutbox current() {
            int last = writers.size() - 1;
            TransactionOutbox w = writers.get(last);
            if (w == null) {
                // #1, #2, … within the transaction's first writer, <cause>.<k>#1, … in later ones: unique
                // per transaction, and stable because each row stores its id.
                w = builder.get()
                        .cause(opened == 0 ? cause : cause + "." + opened)
                        .build();
                opened++;
                writers.set(last, w);
            }
            return w;
        }

        void savepoint(Object savepoint) {
            marks.add(savepoint);
            writers.add(null);
        }

        void rollbackTo(Object savepoint) {
            int at = marks.size() - 1;
            while (at > 0 && marks.get(at) != savepoint) {
                at--; // not found: taken before this outbox's first row, all of whose rows came after it
            }
            while (marks.size() > at + 1) {
                marks.remove(marks.size() - 1);
                writers.remove(writers.size() - 1);
            }
            writers.set(at, null);
        }

        void flush() throws SQLException {
            for (TransactionOutbox w : writers) {
                if (w != null) {
                    w.flush();
                }
            }
        }
    }
}
