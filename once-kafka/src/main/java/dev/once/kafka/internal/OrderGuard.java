package dev.once.kafka.internal;

import dev.once.BatchHandler;
import dev.once.BatchTx;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.Inbox;
import dev.once.Tx;
import dev.once.tx.TransactionHandle;
import dev.once.tx.TransactionProvider;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.apache.kafka.common.TopicPartition;

/**
 * Wraps the user's handler so that a record is applied only when every record before it in its
 * partition is settled: applied or a duplicate, that is, its claim committed (or made in the same
 * open transaction). What is not settled stops its partition: a record that failed, one held back
 * in turn, and one whose claim another transaction holds and has not committed ({@code IN_PROGRESS}:
 * the slow batch of an owner that lost the partition, or of a runner still closing), which never
 * reaches the handler. The guard refuses a record behind any of them with a
 * {@link HeldBackException}, so the runner seeks back and it comes again after them; records of
 * other partitions are untouched, and the offsets kept in the database only move with what it let
 * through.
 *
 * <p>How it knows: {@code processBatch} runs its transactions in list order (a partition's records
 * in offset order), each through {@link #transactions}, so the guard sees what each transaction
 * applied and whether it committed. A record before this one that it did not see applied is either a
 * duplicate or not settled; one query of the inbox on the transaction's connection tells them apart
 * (a claim another transaction has not committed is not visible). It runs only then, so a batch of
 * new records costs no statement.
 *
 * <p>An event whose id is on several partitions is claimed once (per consumer and event id): it is
 * applied only when the records before it are settled on every partition of the batch where it
 * appears, and on those where the runner saw it wait behind a failure in an earlier batch
 * ({@link Plan#waiting}); until then it is held back on all of them. A copy whose first occurrence
 * failed itself, or was held back only by copies waiting for it in turn (two partitions holding the
 * same events in opposite orders), gets a try of its own on its partition (see {@code BatchVerdicts}),
 * so the event is applied at the first position whose partition lets it through.
 *
 * <p>Around a {@link BatchHandler} the same rule holds per call: a failing call names no record, so
 * the engine halves the batch, and halves are run in list order, so the failing record k stands
 * alone, and is remembered, before any part holding a later record of its partition runs; such a
 * part is then refused whole, and halved, until its records of other partitions go through and the
 * held-back ones fail alone. Not API. State is per thread: each worker thread runs its own batch.
 */
public final class OrderGuard implements Handler, BatchHandler {

    /** Where a record sits in its partition. */
    public record Position(TopicPartition partition, long offset) {}

    /**
     * What the guard needs of one {@code processBatch} call.
     *
     * @param positions each event id's first position on each partition of the call, where the
     *                  engine applies it (its first occurrence in the list) first
     * @param order     each event id's index in the list, first occurrences only; empty when the
     *                  list has been run through already (a copy tried alone after it)
     * @param records   the ids of the batch's records of each partition by offset (records with an id)
     * @param waiting   event ids seen behind a record that failed on a partition in an earlier batch:
     *                  held back wherever they are until that partition reaches them
     * @param gaps      per partition, the first offset settled only after the transaction (a
     *                  record without an id going to the dead letters): no offset past it goes to the
     *                  database
     * @param ids       how many distinct event ids {@code records} hold
     */
    public record Plan(
            Map<String, List<Position>> positions,
            Map<String, Integer> order,
            Map<TopicPartition, NavigableMap<Long, String>> records,
            Map<String, List<Position>> waiting,
            Map<TopicPartition, Long> gaps,
            int ids) {}

    private final Handler handler;
    private final BatchHandler batchHandler;
    private final DatabaseOffsets offsets;
    private final ThreadLocal<Batch> current = new ThreadLocal<>();
    private volatile Inbox inbox;
    private volatile String consumer;

    /** @param offsets where applied records' next offsets go in their transaction; null when not kept in the database */
    public OrderGuard(Handler handler, DatabaseOffsets offsets) {
        this.handler = handler;
        this.batchHandler = null;
        this.offsets = offsets;
    }

    /** Guards a batch handler; {@code offsets} as in {@link #OrderGuard(Handler, DatabaseOffsets)}. */
    public OrderGuard(BatchHandler batchHandler, DatabaseOffsets offsets) {
        this.handler = null;
        this.batchHandler = batchHandler;
        this.offsets = offsets;
    }

    /** The inbox and consumer name of the engine it guards; called once the engine is built. */
    public void bind(Inbox inbox, String consumer) {
        this.inbox = inbox;
        this.consumer = consumer;
        if (offsets != null) {
            offsets.bind(inbox);
        }
    }

    /**
     * The engine's transactions: owned ones on {@code dataSource}, which tell the guard what each
     * applied and whether it committed, and write the pending database offsets just before the
     * COMMIT, in the same transaction as the claims and effects.
     */
    public TransactionProvider transactions(DataSource dataSource) {
        TransactionProvider owned = TransactionProvider.owning(dataSource);
        return new TransactionProvider() {
            @Override
            public TransactionHandle begin() throws SQLException {
                TransactionHandle h = owned.begin();
                Batch b = current.get();
                if (b != null) {
                    b.openEnded();
                    b.connection = h.connection();
                }
                if (offsets != null) {
                    offsets.clearPending();
                }
                return new Tracked(h);
            }

            @Override
            public boolean joins() {
                return false;
            }
        };
    }

    /** Runs {@code body} (a {@code processBatch} call) under {@code plan}. */
    public <T> T guard(Plan plan, Supplier<T> body) {
        current.set(new Batch(plan));
        try {
            return body.get();
        } finally {
            current.remove();
        }
    }

    @Override
    public void handle(Delivery delivery, Tx tx) throws Exception {
        Batch batch = current.get();
        List<Position> where = batch == null ? null : batch.plan.positions.get(delivery.eventId());
        if (where == null) {
            handler.handle(delivery, tx);
            return;
        }
        String why = blocker(batch, delivery.eventId(), Set.of(), batch.openTo);
        if (why != null) {
            throw refuse(batch, List.of(delivery.eventId()), why);
        }
        try {
            handler.handle(delivery, tx);
        } catch (Exception e) {
            batch.failedAt.merge(where.get(0).partition(), where.get(0).offset(), Math::min);
            throw e;
        }
        applied(batch, delivery.eventId());
    }

    @Override
    public void handle(List<Delivery> claimed, BatchTx tx) throws Exception {
        Batch batch = current.get();
        if (batch == null) {
            batchHandler.handle(claimed, tx);
            return;
        }
        if (wholeBatch(batch, claimed)) {
            try {
                batchHandler.handle(inPartitionOrder(batch.plan.positions(), batch.plan.records(), claimed), tx);
            } catch (Exception e) {
                failedAlone(batch, claimed);
                throw e;
            }
            appliedAll(batch, claimed);
            return;
        }
        Set<String> call = new HashSet<>();
        for (Delivery d : claimed) {
            call.add(d.eventId());
        }
        List<String> refused = new ArrayList<>();
        String why = null;
        // The call's own ids count as settled for this look only: the cursors past them are this call's.
        Map<TopicPartition, Long> cursors = new HashMap<>(batch.openTo);
        for (Delivery d : claimed) {
            if (batch.plan.positions.containsKey(d.eventId())) {
                String w = blocker(batch, d.eventId(), call, cursors);
                if (w != null) {
                    refused.add(d.eventId());
                    why = why == null ? w : why;
                }
            }
        }
        if (!refused.isEmpty()) {
            throw refuse(batch, refused, why);
        }
        try {
            batchHandler.handle(inPartitionOrder(batch.plan.positions(), batch.plan.records(), claimed), tx);
        } catch (Exception e) {
            failedAlone(batch, claimed);
            throw e;
        }
        for (Delivery d : claimed) {
            if (batch.plan.positions.containsKey(d.eventId())) {
                applied(batch, d.eventId());
            }
        }
    }

    /** Whether an event of the call sits on two partitions of the poll: only then can the list be out of order. */
    private static boolean spread(Map<String, List<Position>> positions, List<Delivery> claimed) {
        for (Delivery d : claimed) {
            List<Position> at = positions.get(d.eventId());
            if (at != null && at.size() > 1) {
                return true;
            }
        }
        return false;
    }

    /**
     * {@code claimed} in an order that keeps every partition's order: the call's ids count as settled
     * together, so the handler, applying them in list order, must meet an event after the records before
     * it on each partition where it sits. The list comes partition by partition, each in offset order,
     * so only an event on two partitions can be out of place: with {@code f, x} on one partition and
     * {@code x} on another listed first, {@code x} would be applied ahead of {@code f}. Two partitions
     * holding events in opposite orders leave no such order; those events keep their list order.
     *
     * @param positions where each event of the poll sits, as {@link Plan#positions}
     * @param records each partition's records of the poll by offset, as {@link Plan#records}
     */
    static List<Delivery> inPartitionOrder(
            Map<String, List<Position>> positions,
            Map<TopicPartition, NavigableMap<Long, String>> records,
            List<Delivery> claimed) {
        if (!spread(positions, claimed)) {
            return claimed; // the common call: no map of its ids made
        }
        Map<String, Integer> index = new HashMap<>();
        for (int i = 0; i < claimed.size(); i++) {
            index.putIfAbsent(claimed.get(i).eventId(), i);
        }
        // Each partition's call records in offset order, an event at its first position there: an edge from
        // each to the next.
        List<List<Integer>> next = new ArrayList<>(claimed.size());
        int[] before = new int[claimed.size()];
        for (int i = 0; i < claimed.size(); i++) {
            next.add(new ArrayList<>(1));
        }
        for (NavigableMap<Long, String> partition : records.values()) {
            Set<Integer> seen = new HashSet<>();
            int previous = -1;
            for (String id : partition.values()) {
                Integer i = index.get(id);
                if (i == null || !seen.add(i)) {
                    continue;
                }
                if (previous >= 0) {
                    next.get(previous).add(i);
                    before[i]++;
                }
                previous = i;
            }
        }
        // Kahn's order, the lowest list index first among those free, so the list stays as it was wherever
        // no partition asks otherwise; in a circle the lowest index left goes first.
        java.util.PriorityQueue<Integer> free = new java.util.PriorityQueue<>();
        for (int i = 0; i < claimed.size(); i++) {
            if (before[i] == 0) {
                free.add(i);
            }
        }
        boolean[] taken = new boolean[claimed.size()];
        List<Delivery> ordered = new ArrayList<>(claimed.size());
        int scan = 0;
        while (ordered.size() < claimed.size()) {
            Integer i = free.poll();
            if (i == null) {
                while (taken[scan]) {
                    scan++;
                }
                i = scan;
            } else if (taken[i]) {
                continue;
            }
            taken[i] = true;
            ordered.add(claimed.get(i));
            for (int j : next.get(i)) {
                if (--before[j] == 0 && !taken[j]) {
                    free.add(j);
                }
            }
        }
        return ordered;
    }

    /**
     * Whether the call holds every record of the batch and none of its ids waits on another
     * partition: then every record before each of them in its partition is in the call, or in an
     * earlier batch the runner committed before it fetched this one, and no look is needed. The
     * common call, a batch of new ids in one transaction: the look at every record's predecessors
     * was a quarter of the runner worker's CPU (JFR, the bench's kafka suite, issue 21). A call after
     * a failure in the batch is a part of it, never whole (or, for a batch of one record, its retry
     * after a transient conflict, with nothing before it). The engine hands a batch handler each
     * event once (its first occurrence), so as many ids of the plan as the plan has are all of them.
     */
    private static boolean wholeBatch(Batch batch, List<Delivery> claimed) {
        Plan plan = batch.plan;
        if (claimed.size() < plan.ids()) {
            return false;
        }
        int ofPlan = 0;
        for (Delivery d : claimed) {
            if (plan.positions.containsKey(d.eventId())) {
                if (!plan.waiting.isEmpty() && plan.waiting.containsKey(d.eventId())) {
                    return false;
                }
                ofPlan++;
            }
        }
        return ofPlan == plan.ids();
    }

    /** A call of one record failed: its partition stops at it. */
    private static void failedAlone(Batch batch, List<Delivery> claimed) {
        List<Position> alone =
                claimed.size() == 1 ? batch.plan.positions.get(claimed.get(0).eventId()) : null;
        if (alone != null) {
            batch.failedAt.merge(alone.get(0).partition(), alone.get(0).offset(), Math::min);
        }
    }

    /** As {@link #applied} for each of a whole batch, without a set of its ids. */
    private void appliedAll(Batch batch, List<Delivery> claimed) {
        batch.allOpen = true;
        if (offsets == null) {
            return;
        }
        for (Delivery d : claimed) {
            List<Position> where = batch.plan.positions.get(d.eventId());
            if (where != null) {
                Position p = where.get(0);
                Long gap = batch.plan.gaps.get(p.partition());
                if (gap == null || p.offset() < gap) {
                    offsets.applied(p.partition(), p.offset() + 1);
                }
            }
        }
    }

    /**
     * Why {@code id} may not be applied now, or null: a record before one of its positions is not
     * settled, or it waits on a partition this call does not reach. {@code call} holds the ids
     * applied together with it (a batch handler's call), settled with it or not at all.
     *
     * <p>{@code cursors}: per partition, an offset below which every record is known settled, open or in
     * {@code call}; the look starts there and moves it on. Without it each record of a batch re-read
     * every record before it in its partition: quadratic in the batch, 70% of a Kafka runner's worker
     * thread (JFR, the bench's kafka suite, 2,000 records per batch) before this.
     */
    private String blocker(Batch batch, String id, Set<String> call, Map<TopicPartition, Long> cursors)
            throws SQLException {
        Plan plan = batch.plan;
        for (Position w : plan.waiting.getOrDefault(id, List.of())) {
            NavigableMap<Long, String> rs = plan.records.get(w.partition());
            if (rs == null || !rs.containsKey(w.offset())) {
                return w.partition() + " has not reached it (offset " + w.offset() + ", behind a record that failed)";
            }
        }
        Integer mine = plan.order.get(id);
        // Made when a record before it is not known settled: for most records, never.
        List<String> unknown = null;
        Map<String, Position> at = null;
        for (Position p : plan.positions.get(id)) {
            Long failed = batch.failedAt.get(p.partition());
            if (failed != null && failed < p.offset()) {
                return p.partition() + " offset " + failed + " failed or was held back first";
            }
            NavigableMap<Long, String> rs = plan.records.get(p.partition());
            Long from = cursors.get(p.partition());
            if (from != null && from >= p.offset()) {
                continue; // every record before it is settled
            }
            boolean prefix = true;
            for (Map.Entry<Long, String> e : (from == null
                            ? rs.headMap(p.offset(), false)
                            : rs.subMap(from, true, p.offset(), false))
                    .entrySet()) {
                String before = e.getValue();
                if (batch.allSettled
                        || batch.allOpen
                        || batch.settled.contains(before)
                        || batch.open.contains(before)
                        || call.contains(before)) {
                    if (prefix) {
                        cursors.put(p.partition(), e.getKey() + 1);
                    }
                    continue;
                }
                prefix = false;
                // Listed after this one and not in the call. A per-event handler's transaction claimed its
                // whole part up front, so a claim the inbox shows for it may be one whose handler has not
                // run yet: not settled, and no look tells. A batch handler's call holds every claim its
                // transaction made, so such a record is either new (not tried yet, and the look finds no
                // claim) or a duplicate, claimed and committed before (settled: the look finds it). Taking
                // the duplicate for untried held the copy back, and every record behind it failed alone.
                if (batchHandler == null && later(plan, mine, before)) {
                    return p.partition() + " offset " + e.getKey() + " has not been tried yet";
                }
                if (unknown == null) {
                    unknown = new ArrayList<>();
                    at = new HashMap<>();
                }
                unknown.add(before);
                at.putIfAbsent(before, new Position(p.partition(), e.getKey()));
            }
        }
        if (unknown == null) {
            return null;
        }
        Set<String> visible = claimed(batch.connection, unknown);
        // Visible: committed, or claimed earlier in this transaction; either way settled with it.
        batch.open.addAll(visible);
        for (String u : unknown) {
            if (!visible.contains(u)) {
                Position p = at.get(u);
                return p.partition() + " offset " + p.offset()
                        + (later(plan, mine, u)
                                ? " has not been tried yet"
                                : " is not settled (its claim is held by a transaction that has not committed, or it"
                                        + " failed)");
            }
        }
        return null;
    }

    /** Whether {@code other} is listed after the event at {@code mine} (null: a copy tried alone, after the list). */
    private static boolean later(Plan plan, Integer mine, String other) {
        Integer its = plan.order.get(other);
        return mine != null && its != null && its > mine;
    }

    private HeldBackException refuse(Batch batch, List<String> ids, String why) {
        for (String id : ids) {
            // Every partition where it stands stops there: nothing after it goes ahead of it.
            for (Position p : batch.plan.positions.get(id)) {
                batch.failedAt.merge(p.partition(), p.offset(), Math::min);
            }
        }
        return new HeldBackException("held back: " + why + "; records of a partition are applied in offset order");
    }

    private Set<String> claimed(Connection c, Collection<String> ids) throws SQLException {
        // The transaction's own connection, not the handler's guarded one: this is no statement of the
        // handler's, and an error here fails the delivery, which rolls the transaction back.
        return inbox.claimedAmong(c, consumer, ids);
    }

    /** Event {@code id} is applied in this thread's open transaction. */
    private void applied(Batch batch, String id) {
        batch.open.add(id);
        Position p = batch.plan.positions.get(id).get(0);
        Long failed = batch.failedAt.get(p.partition());
        if (failed != null && failed == p.offset()) {
            batch.failedAt.remove(p.partition()); // the failed record went through on its second try
        }
        Long gap = batch.plan.gaps.get(p.partition());
        if (offsets != null && (gap == null || p.offset() < gap)) {
            // Everything before it in its partition is settled: the check above let it through.
            offsets.applied(p.partition(), p.offset() + 1);
        }
    }

    private static final class Batch {
        final Plan plan;
        final Map<TopicPartition, Long> failedAt = new HashMap<>();
        /** Ids applied (or found claimed) in the open transaction. */
        final Set<String> open = new HashSet<>();
        /** Ids whose claim a committed transaction holds. */
        final Set<String> settled = new HashSet<>();
        /** Per partition, the offset below which every record is in {@link #settled}: only grows. */
        final Map<TopicPartition, Long> settledTo = new HashMap<>();
        /** Per partition, the offset below which every record is settled or open: reset with the transaction. */
        final Map<TopicPartition, Long> openTo = new HashMap<>();
        /** Every id of the plan is applied in the open transaction ({@link #open} is not filled then). */
        boolean allOpen;
        /** Every id of the plan is settled ({@link #settled} is not filled then). */
        boolean allSettled;
        /** The open transaction's own connection. */
        Connection connection;

        Batch(Plan plan) {
            this.plan = plan;
        }

        /** The open transaction ended (committed ones moved to settled first): what it held is no longer open. */
        void openEnded() {
            open.clear();
            allOpen = false;
            openTo.clear();
            openTo.putAll(settledTo);
        }
    }

    /** A transaction of the engine, as the guard and the database offsets follow it. */
    private final class Tracked implements TransactionHandle {
        private final TransactionHandle delegate;

        Tracked(TransactionHandle delegate) {
            this.delegate = delegate;
        }

        @Override
        public Connection connection() {
            return delegate.connection();
        }

        @Override
        public boolean joined() {
            return false;
        }

        @Override
        public void commit() throws SQLException {
            if (offsets != null) {
                offsets.writePending(delegate.connection());
            }
            delegate.commit();
            Batch b = current.get();
            if (b != null) {
                b.settled.addAll(b.open);
                b.allSettled |= b.allOpen;
                b.settledTo.putAll(b.openTo); // each at or past its settled one
                b.openEnded();
            }
        }

        @Override
        public void rollback() throws SQLException {
            ended();
            delegate.rollback();
        }

        @Override
        public void afterCompletion(CompletionCallback callback) {
            delegate.afterCompletion(callback);
        }

        @Override
        public void close() throws SQLException {
            ended();
            delegate.close();
        }

        private void ended() {
            Batch b = current.get();
            if (b != null) {
                b.openEnded();
            }
            if (offsets != null) {
                offsets.clearPending();
            }
        }
    }
}
