package dev.once.internal;

import dev.once.Delivery;
import dev.once.tx.JoinedTransaction;
import dev.once.tx.SavepointListener;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * Per thread, the row locks that the caller's transactions still open hold on once's tables: the claims they took
 * before their handlers ran, and the rows of the ordered streams their runs moved ({@link PositionFence}). A claim
 * of one of these ids, or a move of one of these streams, on another connection of the same thread (Spring's
 * {@code REQUIRES_NEW} or {@code NOT_SUPPORTED} inside the transaction that holds it, or an engine of its own
 * transactions called there) would wait for the holder's row lock, which only this thread can release when that
 * transaction ends, and it cannot end before the call returns: for ever on PostgreSQL without a lock timeout,
 * until {@code innodb_lock_wait_timeout} on MariaDB. The engine answers such a delivery IN_PROGRESS at once
 * instead, without a statement: a delivery of it is being processed and has not committed, which is what
 * IN_PROGRESS says, and the broker's redelivery finds that transaction ended; such a run fails fast.
 *
 * <p>Follows the holder's savepoints (as a {@link SavepointListener} of its {@link JoinedTransaction}), as each
 * database releases row locks (measured with two sessions, PostgreSQL 15 and MariaDB 10.11): a rollback to a
 * savepoint releases on PostgreSQL every row lock taken after it (the subtransaction's), and on MariaDB the locks of
 * rows inserted after it (the undo removes the row) but not those of rows that existed (updated, or locked by
 * {@code INSERT ... ON DUPLICATE KEY UPDATE} or {@code FOR UPDATE}), kept to the transaction's end unless the
 * transaction had run no statement before the savepoint. So a claim (an insert) taken after a savepoint rolled back
 * to is forgotten on both; a stream's row lock is forgotten on PostgreSQL and kept until the end on MariaDB
 * (conservative where its run inserted the row, or began the transaction: a fail-fast where the run would not have
 * waited). Keyed by table prefix and consumer, not by database: two databases with the same inbox
 * tables and consumer name on one thread answer IN_PROGRESS (or fail fast) where the claim would not have waited
 * (conservative, and only while the holder is open). A claim taken at commit ({@code ClaimTiming.AT_COMMIT})
 * holds no lock while the transaction is open and is not kept. Not thread-safe: each thread sees only its own.
 * Not API.
 */
final class ClaimsOnThread {

    private static final ThreadLocal<ClaimsOnThread> ON_THREAD = new ThreadLocal<>();

    // One per open transaction and consumer that claimed; an ended one's is reused by the next claim of the
    // thread, so a Spring listener's transaction per delivery allocates nothing here once warm. Walked with
    // indexed loops: two looks per delivery, and JIT escape analysis left their iterators allocated (measured
    // in the spring suite's once-record row).
    private final List<Held> held = new ArrayList<>(2);

    private ClaimsOnThread() {}

    /** Notes that the open transaction {@code tx} claimed {@code ids} of {@code consumer} under inbox tables {@code prefix}. */
    static void claimed(JoinedTransaction tx, String prefix, String consumer, Collection<String> ids) {
        if (tx != null && !ids.isEmpty()) {
            held(tx, prefix, consumer).ids.addAll(ids);
        }
    }

    /** Notes that the open transaction {@code tx} claimed {@code id} of {@code consumer} under inbox tables {@code prefix}. */
    static void claimed(JoinedTransaction tx, String prefix, String consumer, String id) {
        if (tx != null) {
            held(tx, prefix, consumer).ids.add(id);
        }
    }

    /**
     * Notes that the open transaction {@code tx} holds the row lock of {@code consumer}'s ordered stream {@code
     * stream} under tables {@code prefix} from now until it ends, or ({@code releasedBySavepoint}: PostgreSQL) rolls
     * back to a savepoint set before.
     */
    static void lockedStream(
            JoinedTransaction tx, String prefix, String consumer, String stream, boolean releasedBySavepoint) {
        if (tx != null) {
            Held h = held(tx, prefix, consumer);
            (releasedBySavepoint ? h.streams : h.streamsToTheEnd).add(stream);
        }
    }

    /**
     * Whether a transaction of this thread other than {@code mine} (null: any, for the engine's own transaction)
     * holds the row lock of {@code consumer}'s stream {@code stream} while it is open.
     */
    static boolean streamHeldByAnother(JoinedTransaction mine, String prefix, String consumer, String stream) {
        ClaimsOnThread claims = ON_THREAD.get();
        if (claims == null) {
            return false;
        }
        for (int i = 0; i < claims.held.size(); i++) {
            Held h = claims.held.get(i);
            if (h.holdsFor(mine, prefix, consumer)
                    && (h.streams.contains(stream) || h.streamsToTheEnd.contains(stream))) {
                return true;
            }
        }
        return false;
    }

    /**
     * Whether the open transaction {@code mine} itself holds the row lock of {@code consumer}'s stream {@code stream}
     * (an earlier run of it moved or met the stream): a refusal by the stream's position may then be its own move,
     * which stands or falls with it.
     */
    static boolean streamHeldBy(JoinedTransaction mine, String prefix, String consumer, String stream) {
        Held h = heldOf(mine, prefix, consumer);
        return h != null && (h.streams.contains(stream) || h.streamsToTheEnd.contains(stream));
    }

    /** What the open transaction {@code mine} itself holds for {@code consumer} under {@code prefix}; null: nothing. */
    private static Held heldOf(JoinedTransaction mine, String prefix, String consumer) {
        ClaimsOnThread claims = ON_THREAD.get();
        if (claims == null || mine == null || mine.done()) {
            return null;
        }
        for (int i = 0; i < claims.held.size(); i++) {
            Held h = claims.held.get(i);
            if (h.tx == mine && h.consumer.equals(consumer) && h.prefix.equals(prefix)) {
                return h;
            }
        }
        return null;
    }

    private static Held held(JoinedTransaction tx, String prefix, String consumer) {
        ClaimsOnThread claims = ON_THREAD.get();
        if (claims == null) {
            claims = new ClaimsOnThread();
            ON_THREAD.set(claims);
        }
        return claims.of(tx, prefix, consumer);
    }

    /**
     * Whether a transaction of this thread other than {@code mine} (null: any of the caller's) is open and claimed
     * events of {@code consumer}: a lock wait of {@code mine} may then be on a lock of that transaction (a locking
     * read of the inbox, a gap lock on MariaDB), which ends only after the waiting call returns.
     */
    static boolean openBeside(JoinedTransaction mine, String prefix, String consumer) {
        ClaimsOnThread claims = ON_THREAD.get();
        if (claims == null) {
            return false;
        }
        for (int i = 0; i < claims.held.size(); i++) {
            if (claims.held.get(i).holdsFor(mine, prefix, consumer)) {
                return true;
            }
        }
        return false;
    }

    /** Whether a transaction of this thread other than {@code mine} (null: none of the caller's) holds {@code id}'s claim while it is open. */
    static boolean heldByAnother(JoinedTransaction mine, String prefix, String consumer, String id) {
        ClaimsOnThread claims = ON_THREAD.get();
        if (claims == null) {
            return false;
        }
        for (int i = 0; i < claims.held.size(); i++) {
            Held h = claims.held.get(i);
            if (h.holdsFor(mine, prefix, consumer) && h.ids.contains(id)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Whether the open transaction {@code mine} itself holds {@code id}'s claim (a copy met it): the copy's
     * duplicate then stands or falls with that claim, not with an earlier transaction's.
     */
    static boolean heldBy(JoinedTransaction mine, String prefix, String consumer, String id) {
        Held h = heldOf(mine, prefix, consumer);
        return h != null && h.ids.contains(id);
    }

    /**
     * The first of {@code deliveries} whose claim a transaction of this thread other than {@code mine} (null: the
     * engine's own, which holds none yet) holds while it is open; null when none.
     */
    static Delivery heldByAnother(JoinedTransaction mine, String prefix, String consumer, List<Delivery> deliveries) {
        ClaimsOnThread claims = ON_THREAD.get();
        if (claims == null) {
            return null;
        }
        for (int k = 0; k < claims.held.size(); k++) {
            Held h = claims.held.get(k);
            if (!h.holdsFor(mine, prefix, consumer)) {
                continue;
            }
            for (int i = 0; i < deliveries.size(); i++) {
                if (h.ids.contains(deliveries.get(i).eventId())) {
                    return deliveries.get(i);
                }
            }
        }
        return null;
    }

    private Held of(JoinedTransaction tx, String prefix, String consumer) {
        Held ended = null;
        for (int i = 0; i < held.size(); i++) {
            Held h = held.get(i);
            if (h.tx == tx && h.consumer.equals(consumer) && h.prefix.equals(prefix)) {
                return h;
            }
            if (ended == null && h.tx.done()) {
                ended = h;
            }
        }
        if (ended == null) {
            ended = new Held();
            held.add(ended);
        }
        ended.holdFor(tx, prefix, consumer);
        return ended;
    }

    /** What one open transaction locked for one consumer (claims, streams), undone with its savepoints. */
    private static final class Held implements SavepointListener {
        JoinedTransaction tx;
        String prefix;
        String consumer;
        // In claim order: a rollback to a savepoint drops the ids claimed after it. Scanned, not hashed: looked
        // in only when a thread has two transactions open, and mostly one id long.
        final List<String> ids = new ArrayList<>(1);
        // The streams whose row lock its runs took, in that order (a stream twice when locked again after a
        // savepoint: the rollback to it drops only the second).
        final List<String> streams = new ArrayList<>(0);
        // The streams whose row lock only the transaction's end releases (MariaDB: rows that existed)
        final List<String> streamsToTheEnd = new ArrayList<>(0);
        // The savepoints set since this transaction's first lock, and how many ids and streams it held before each.
        final List<Object> savepoints = new ArrayList<>(0);
        final List<Integer> before = new ArrayList<>(0);
        final List<Integer> streamsBefore = new ArrayList<>(0);

        /** Whether this is another open transaction's, not {@code mine}, holding claims of the consumer. */
        boolean holdsFor(JoinedTransaction mine, String prefix, String consumer) {
            return tx != mine && !tx.done() && this.consumer.equals(consumer) && this.prefix.equals(prefix);
        }

        void holdFor(JoinedTransaction tx, String prefix, String consumer) {
            this.tx = tx;
            this.prefix = prefix;
            this.consumer = consumer;
            ids.clear();
            streams.clear();
            streamsToTheEnd.clear();
            savepoints.clear();
            before.clear();
            streamsBefore.clear();
            tx.addSavepointListener(this);
        }

        @Override
        public void savepoint(Object savepoint) {
            savepoints.add(savepoint);
            before.add(ids.size());
            streamsBefore.add(streams.size());
        }

        @Override
        public void rollbackToSavepoint(Object savepoint) {
            int at = indexOf(savepoint);
            // one set before this transaction's first lock (or its start): every id and stream noted came after it
            int keep = at < 0 ? 0 : before.get(at);
            ids.subList(keep, ids.size()).clear();
            int keepStreams = at < 0 ? 0 : streamsBefore.get(at);
            streams.subList(keepStreams, streams.size()).clear();
            int savepointsKept = at < 0 ? 0 : at + 1; // it stays, as in JDBC
            savepoints.subList(savepointsKept, savepoints.size()).clear();
            before.subList(savepointsKept, before.size()).clear();
            streamsBefore.subList(savepointsKept, streamsBefore.size()).clear();
        }

        private int indexOf(Object savepoint) { // by identity, as JoinedTransaction matches them
            for (int i = 0; i < savepoints.size(); i++) {
                if (savepoints.get(i) == savepoint) {
                    return i;
                }
            }
            return -1;
        }

        @Override
        public void releaseSavepoint(Object savepoint) {
            int at = indexOf(savepoint);
            if (at >= 0) {
                savepoints.subList(at, savepoints.size()).clear();
                before.subList(at, before.size()).clear();
                streamsBefore.subList(at, streamsBefore.size()).clear();
            }
        }
    }
}
