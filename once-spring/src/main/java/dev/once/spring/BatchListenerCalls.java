package dev.once.spring;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.StreamPositions;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aop.ProxyMethodInvocation;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The batch {@link IdempotentListener} methods ({@code List<…>} of records): the whole poll through the
 * engine's batch path in one transaction, and when that rolls back, one record per transaction in order
 * through the single-record path, so the error handler hears of the failing record only after every record
 * before it committed. A batch of an SQS FIFO queue's messages runs one ordered run per message group instead
 * ({@link #fifoBatch}). Split from {@link IdempotentListenerInterceptor}, which dispatches to it. Thread-safe.
 */
final class BatchListenerCalls {

    // The interceptor's log category, as before the batch path had a class of its own: users may have configured it.
    private static final Logger log = LoggerFactory.getLogger(IdempotentListenerInterceptor.class);

    /** The single-record path a batch falls back to, one record per call. */
    @FunctionalInterface
    interface SingleRecord {
        Object call(
                ProxyMethodInvocation invocation,
                ListenerMethod listener,
                Delivery delivery,
                StreamPositions positions,
                Object[] args)
                throws Throwable;
    }

    private final Supplier<OnceSpring> once;
    private final SingleRecord single;
    private final Map<String, IdempotentConsumer> batchConsumers = new ConcurrentHashMap<>();

    BatchListenerCalls(Supplier<OnceSpring> once, SingleRecord single) {
        this.once = once;
        this.single = single;
    }

    Object batch(ProxyMethodInvocation invocation, ListenerMethod listener) throws Throwable {
        Object[] args = invocation.getArguments();
        List<?> records = (List<?>) args[listener.batchIndex()];
        List<Delivery> deliveries = new ArrayList<>(records.size());
        // an SQS FIFO queue's messages: each one's place in its message group; else null
        List<StreamPositions> positions = null;
        int invalid = -1;
        for (int i = 0; i < records.size(); i++) {
            try {
                deliveries.add(listener.delivery(records.get(i)));
                StreamPositions at =
                        listener.sqs() ? IdempotentListenerInterceptor.sqsFifoPosition(listener, records.get(i)) : null;
                if (at != null) {
                    if (positions == null) {
                        positions = new ArrayList<>(records.size());
                    }
                    positions.add(at);
                }
            } catch (InvalidDeliveryException e) {
                invalid = i;
                break;
            }
        }
        if (positions != null && invalid < 0) {
            return fifoBatch(invocation, listener, records, deliveries, positions);
        }
        // A transaction open before the call (a container's, a caller's): the records below are applied in it, one by
        // one, and commit or roll back with it, not each on its own
        boolean inOpenTransaction = TransactionSynchronizationManager.isActualTransactionActive();
        if (invalid < 0 && !records.isEmpty()) {
            // In a transaction the Kafka container began, the batch runs NESTED (a savepoint), so that its rollback
            // leaves the container's transaction usable for the records one by one, where one whose event another
            // transaction holds waits for it (IdempotentListenerInterceptor) instead of failing the whole poll.
            NestedListenerStep nested = once.get().nestedStep(listener.kafka());
            boolean joined = nested == null && inOpenTransaction;
            if (nested != null) {
                nested.snapshot();
            }
            try {
                return wholeBatch(invocation, listener, records, deliveries, nested, null);
            } catch (Throwable e) {
                if (nested != null && !nested.undoMarks()) {
                    throw e; // a JPA transaction marked rollback-only: the container's transaction must roll back
                }
                if (joined) {
                    // The batch joined an open transaction (a JpaTransactionManager's, which refuses NESTED): its
                    // failure marked that transaction rollback-only and left the batch's claims in it, so the records
                    // retried one by one there would find their own claims, be skipped as duplicates and the batch
                    // acknowledged, and nothing commit. The whole transaction must roll back and the batch come back.
                    throw e;
                }
                log.debug(
                        "batch of {} for consumer '{}' rolled back ({}); retrying one record per transaction",
                        records.size(),
                        listener.consumer(),
                        e.toString());
            }
        }
        // One record per transaction, in order, so everything before the failing record is committed when
        // the error handler hears of it: it commits exactly those offsets (spring-kafka issue 4436 is a
        // BatchListenerFailedException thrown from a batch whose one transaction rolled them all back). In a
        // transaction open before the call, one record per savepoint (or joined, for a record with no event id):
        // the records before the failing one are that transaction's, and the failure says so.
        AfterCommitAcknowledgment batchAck = AfterCommitAcknowledgment.wrap(listener, args.clone());
        for (int i = 0; i < records.size(); i++) {
            try {
                Delivery d = i < deliveries.size() ? deliveries.get(i) : listener.delivery(records.get(i));
                StreamPositions at = positions == null ? null : positions.get(i);
                Object[] single = args.clone();
                single[listener.batchIndex()] = List.of(records.get(i));
                if (listener.ackIndex() >= 0) {
                    single[listener.ackIndex()] = AfterCommitAcknowledgment.IGNORED;
                }
                this.single.call(invocation, listener, d, at, single);
            } catch (Throwable e) {
                throw Kafka.failedAt(listener, records, i, inOpenTransaction, e);
            }
        }
        if (batchAck != null) {
            batchAck.settle(true, once.get().transactions().stateKey());
        }
        return null;
    }

    /**
     * The whole batch in one transaction, through the engine's batch path, so it keeps the per-record
     * path's rules: claimed in one statement, the mismatch policy for a reused event id, the check that
     * the claims are still the transaction's before it commits, outcomes reported after the commit.
     * Anything but APPLIED or a plain DUPLICATE for any record rolls the batch back and throws, and the
     * caller retries it one record per transaction, where that record fails on its own.
     */
    private Object wholeBatch(
            ProxyMethodInvocation invocation,
            ListenerMethod listener,
            List<?> records,
            List<Delivery> deliveries,
            NestedListenerStep nested,
            StreamPositions positions)
            throws Throwable {
        Object[] args = invocation.getArguments().clone();
        AfterCommitAcknowledgment ack = AfterCommitAcknowledgment.wrap(listener, args);
        IdempotentConsumer consumer = batchConsumer(listener.consumer());
        OnceSpring o = once.get();
        Map<String, Object> firstRecord = new HashMap<>();
        for (int i = 0; i < records.size(); i++) {
            firstRecord.putIfAbsent(deliveries.get(i).eventId(), records.get(i));
        }
        BatchCall call = new BatchCall(invocation, args, listener.batchIndex(), firstRecord);
        BatchCall outer = CURRENT_BATCH.get();
        CURRENT_BATCH.set(call);
        try {
            (nested != null ? nested.template() : o.transactionTemplate()).execute(status -> {
                for (Outcome r : positions == null
                        ? consumer.processBatch(deliveries)
                        : consumer.processInOrder(deliveries, positions)) {
                    if (!r.shouldAcknowledge()) {
                        throw new IdempotentListenerInterceptor.Failed(r);
                    }
                }
                return null;
            });
        } catch (IdempotentListenerInterceptor.Failed f) {
            throw f.outcome.failure() != null
                    ? f.outcome.failure()
                    : new IllegalStateException("event '" + f.outcome.eventId() + "' " + f.outcome.tag());
        } finally {
            CURRENT_BATCH.set(outer); // set, not remove: as IdempotentListenerInterceptor's CURRENT
        }
        if (ack != null) {
            ack.settle(false, o.transactions().stateKey());
        }
        return call.result;
    }

    /**
     * A batch of an SQS FIFO queue's messages: one ordered run per message group, in the order of the group's first
     * message, each in a transaction of its own through the engine's ordered path ({@code processInOrder} with the
     * group's positions), so that the group's stored position moves with its messages, and a run whose first message
     * the group has already gone past (held past its visibility timeout while SQS handed its successors to another
     * call, which applied them) is refused rather than applied after them. A group's run is all or nothing: a failure
     * or a refusal rolls back that group alone. The others still run, and the call then throws the first failure, so
     * that the container deletes none of the batch (ON_SUCCESS, the only mode a batch may have): the messages of the
     * groups applied come back and are duplicates, the failed group's come back in order (a refused one is in the
     * dead-letter queue already).
     */
    private Object fifoBatch(
            ProxyMethodInvocation invocation,
            ListenerMethod listener,
            List<?> records,
            List<Delivery> deliveries,
            List<StreamPositions> positions)
            throws Throwable {
        Map<String, List<Integer>> groups = new LinkedHashMap<>();
        for (int i = 0; i < records.size(); i++) {
            groups.computeIfAbsent(positions.get(i).stream(), g -> new ArrayList<>())
                    .add(i);
        }
        Throwable failed = null;
        Object result = null;
        for (Map.Entry<String, List<Integer>> group : groups.entrySet()) {
            List<Object> groupRecords = new ArrayList<>(group.getValue().size());
            List<Delivery> groupDeliveries = new ArrayList<>(group.getValue().size());
            List<BigInteger> groupPositions = new ArrayList<>(group.getValue().size());
            for (int i : group.getValue()) {
                groupRecords.add(records.get(i));
                groupDeliveries.add(deliveries.get(i));
                groupPositions.add(positions.get(i).positions().get(0));
            }
            try {
                result = wholeBatch(
                        invocation,
                        listener,
                        groupRecords,
                        groupDeliveries,
                        null,
                        new StreamPositions(group.getKey(), groupPositions));
            } catch (Throwable e) {
                log.error(
                        "consumer '{}' failed message group '{}' of a FIFO batch (its {} of {} messages, from event"
                                + " '{}'; rolled back, not acknowledged: the batch comes back)",
                        listener.consumer(),
                        group.getKey(),
                        groupRecords.size(),
                        records.size(),
                        groupDeliveries.get(0).eventId(),
                        e);
                if (failed == null) {
                    failed = e;
                }
            }
        }
        if (failed != null) {
            throw failed;
        }
        return result;
    }

    /** The batch listener call running on this thread, for the engine's batch handler. */
    private static final ThreadLocal<BatchCall> CURRENT_BATCH = new ThreadLocal<>();

    private static final class BatchCall {
        final ProxyMethodInvocation invocation;
        final Object[] args;
        final int batchIndex;
        final Map<String, Object> firstRecord;
        Object result;

        BatchCall(ProxyMethodInvocation invocation, Object[] args, int batchIndex, Map<String, Object> firstRecord) {
            this.invocation = invocation;
            this.args = args;
            this.batchIndex = batchIndex;
            this.firstRecord = firstRecord;
        }
    }

    /** The batch handler of every batch listener consumer: the body with the records claimed for the first time. */
    private static void handleBatch(List<Delivery> claimed, dev.once.BatchTx tx) throws Exception {
        BatchCall call = CURRENT_BATCH.get();
        List<Object> fresh = new ArrayList<>(claimed.size());
        for (Delivery d : claimed) {
            fresh.add(call.firstRecord.get(d.eventId()));
        }
        Object[] args = call.args.clone();
        args[call.batchIndex] = fresh;
        try {
            call.result = call.invocation.invocableClone(args).proceed();
        } catch (Exception | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    private IdempotentConsumer batchConsumer(String name) {
        return batchConsumers.computeIfAbsent(
                name,
                n -> once.get()
                        .consumerBuilder()
                        .consumer(n)
                        .batchHandler(BatchListenerCalls::handleBatch)
                        .build());
    }

    /** Kafka-specific pieces, loaded only with spring-kafka on the class path. */
    static final class Kafka {
        /**
         * @param inOpenTransaction whether the records ran in a transaction open before the call (a container's, a
         *     caller's): the ones before {@code index} are applied in it and commit only if it commits
         */
        static Exception failedAt(
                ListenerMethod listener, List<?> records, int index, boolean inOpenTransaction, Throwable cause) {
            if (!ListenerMessages.SPRING_KAFKA) {
                return cause instanceof Exception e ? e : new IllegalStateException(cause);
            }
            return new org.springframework.kafka.listener.BatchListenerFailedException(
                    "record " + index + " of " + records.size() + " failed for consumer '" + listener.consumer()
                            + "'; the " + index + " before it "
                            + (inOpenTransaction
                                    ? "are applied in the transaction the call joined, and commit or roll back with it"
                                    : "are committed"),
                    cause,
                    index);
        }
    }
}
