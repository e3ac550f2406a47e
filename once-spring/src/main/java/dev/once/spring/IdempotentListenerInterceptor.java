package dev.once.spring;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.Tx;
import java.lang.reflect.Method;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aop.ProxyMethodInvocation;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Runs an {@link IdempotentListener} method: claim, body and outbox in one transaction of the
 * application's transaction manager, the body skipped for a duplicate, return (and so the container's
 * acknowledgement) only after commit. Thread-safe.
 */
final class IdempotentListenerInterceptor implements MethodInterceptor {

    private static final Logger log = LoggerFactory.getLogger(IdempotentListenerInterceptor.class);

    /** The listener call running on this thread, for the engine's handler to proceed with. */
    private static final ThreadLocal<Call> CURRENT = new ThreadLocal<>();

    private final BeanFactory beanFactory;
    private final Map<Method, ListenerMethod> methods = new ConcurrentHashMap<>();
    private final Map<String, IdempotentConsumer> consumers = new ConcurrentHashMap<>();
    private final Map<String, IdempotentConsumer> atCommitConsumers = new ConcurrentHashMap<>();
    private final Map<String, IdempotentConsumer> batchConsumers = new ConcurrentHashMap<>();
    private volatile OnceSpring once;

    IdempotentListenerInterceptor(BeanFactory beanFactory) {
        this.beanFactory = beanFactory;
    }

    ListenerMethod method(Method method) {
        ListenerMethod known = methods.get(method); // no capturing lambda allocated on every call
        return known != null ? known : methods.computeIfAbsent(method, m -> ListenerMethod.of(m, beanFactory));
    }

    @Override
    public Object invoke(MethodInvocation invocation) throws Throwable {
        ListenerMethod listener = method(invocation.getMethod());
        if (listener.batchIndex() >= 0) {
            return batch((ProxyMethodInvocation) invocation, listener);
        }
        Object[] args = invocation.getArguments();
        Delivery delivery;
        try {
            delivery = listener.delivery(args);
        } catch (InvalidDeliveryException e) {
            // A container's dead-letter recoverer keeps the reason only in the record's headers: say it here.
            log.error(
                    "consumer '{}' cannot take a message: {} (permanent: the container's error handler"
                            + " dead-letters it)",
                    listener.consumer(),
                    e.getMessage());
            AfterCommitPubSub pubSub = AfterCommitPubSub.wrap(listener, args.clone());
            if (pubSub != null) {
                pubSub.settle(false); // for the subscription's dead-letter policy
            }
            throw e;
        }
        return one((ProxyMethodInvocation) invocation, listener, delivery, args);
    }

    /** The mutable state of one listener call: set by the engine's handler, read after commit. */
    private static final class Call {
        final ProxyMethodInvocation invocation;
        final Object[] args;
        final javax.sql.DataSource dataSource;
        // the body runs confined to the engine's guarded connection (ConfinedConnectionHolder)
        final boolean confine;
        Object result;
        Duration nack;

        Call(ProxyMethodInvocation invocation, Object[] args, javax.sql.DataSource dataSource, boolean confine) {
            this.invocation = invocation;
            this.args = args;
            this.dataSource = dataSource;
            this.confine = confine;
        }
    }

    /**
     * The handler of every listener consumer: proceeds with the call bound to this thread. The body's
     * {@link Tx} is kept with the physical transaction, where {@link OnceOutbox} finds it; a
     * {@code REQUIRES_NEW} step in the body runs in another transaction and does not see it.
     */
    private static void handle(Delivery delivery, Tx tx) throws Exception {
        Call call = CURRENT.get();
        PhysicalTransaction state = PhysicalTransaction.current(call.dataSource);
        Tx outer = state.listenerTx(tx);
        ConfinedConnectionHolder confined =
                call.confine ? ConfinedConnectionHolder.bind(call.dataSource, tx.connection(), state.joined()) : null;
        try {
            call.result = call.invocation.invocableClone(call.args).proceed();
        } catch (Exception | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        } finally {
            if (confined != null) {
                confined.unbind();
            }
            state.listenerTx(outer);
        }
    }

    private Object one(ProxyMethodInvocation invocation, ListenerMethod listener, Delivery delivery, Object[] given)
            throws Throwable {
        Object[] args = given.clone();
        AfterCommitAcknowledgment ack = AfterCommitAcknowledgment.wrap(listener, args);
        AfterCommitChannel channel = listener.channelIndex() >= 0 ? AfterCommitChannel.wrap(listener, args) : null;
        AfterCommitPubSub pubSub = AfterCommitPubSub.wrap(listener, args);
        OnceSpring o = once();
        // The claim waits for the commit, and the body is confined to the guarded connection, only in a
        // transaction the template begins for this call alone. Confined, a claim-first body needs no claim
        // check when the guard saw nothing, and transaction control a body sends through its JdbcTemplate
        // (ROLLBACK as SQL, which would leave a claim at commit to commit alone) is refused.
        boolean own = !TransactionSynchronizationManager.isActualTransactionActive();
        boolean atCommit = listener.atCommit() && own;
        Call call = new Call(invocation, args, o.transactions().key(), own && o.confinesListeners());
        IdempotentConsumer consumer = atCommit ? atCommitConsumer(listener.consumer()) : consumer(listener.consumer());
        Call outer = CURRENT.get();
        CURRENT.set(call);
        Outcome outcome;
        try {
            outcome = o.transactionTemplate().execute(status -> {
                if (channel != null) {
                    TransactionSynchronizationManager.registerSynchronization(channel);
                }
                Outcome r = consumer.process(delivery);
                if (channel != null) {
                    channel.outcome(r);
                }
                if (!r.shouldAcknowledge()) {
                    throw new Failed(r); // rolls the transaction back; rethrown as the body's own exception
                }
                if (askedForRedelivery(ack, channel, pubSub)) {
                    // The body asked for redelivery: its writes and the claim must not commit.
                    status.setRollbackOnly();
                }
                return r;
            });
        } catch (RuntimeException | Error e) {
            if (atCommit && appliedByCopy(o, consumer, listener, delivery)) {
                return duplicateAfterRollback(listener, delivery, ack, pubSub);
            }
            throw failure(listener, delivery, e, pubSub);
        } finally {
            if (outer == null) {
                CURRENT.remove();
            } else {
                CURRENT.set(outer);
            }
        }
        if (atCommit && askedForRedelivery(ack, channel, pubSub) && appliedByCopy(o, consumer, listener, delivery)) {
            return duplicateAfterRollback(listener, delivery, ack, pubSub);
        }
        if (ack != null) {
            ack.settle(outcome.status() == Outcome.Status.DUPLICATE);
        }
        if (pubSub != null) {
            pubSub.settle(true);
        }
        if (outcome.status() == Outcome.Status.DUPLICATE) {
            log.debug(
                    "event '{}' is a duplicate for consumer '{}': body skipped",
                    delivery.eventId(),
                    listener.consumer());
            return null;
        }
        return call.result;
    }

    /** The body nacked, or refused the message on its channel. */
    private static boolean askedForRedelivery(
            AfterCommitAcknowledgment ack, AfterCommitChannel channel, AfterCommitPubSub pubSub) {
        return (ack != null && ack.nacked() != null)
                || (channel != null && channel.refused())
                || (pubSub != null && pubSub.nacked());
    }

    /** A call that did not commit: logged, the Pub/Sub message nacked, and what the container must hear. */
    private static Throwable failure(
            ListenerMethod listener, Delivery delivery, Throwable thrown, AfterCommitPubSub pubSub) {
        Throwable failure;
        if (thrown instanceof Failed f) {
            failure = f.outcome.failure() != null
                    ? f.outcome.failure()
                    : new IllegalStateException("event '" + delivery.eventId() + "' " + f.outcome.tag());
            failed(listener, delivery, f.outcome.status().name(), failure);
        } else {
            // the transaction itself failed: the claim's statement, the commit, the connection
            failure = thrown;
            failed(listener, delivery, "failed", failure);
        }
        if (pubSub != null) {
            pubSub.settle(false);
        }
        return failure;
    }

    /**
     * With the claim at commit, a call that rolled back (the claim found the id taken, the body failed on
     * the work a copy had committed, or the body asked for redelivery) is a copy of an applied event when
     * the inbox holds its claim: read after the transaction, on a connection of its own.
     */
    private static boolean appliedByCopy(
            OnceSpring o, IdempotentConsumer consumer, ListenerMethod listener, Delivery delivery) {
        try (Connection c = o.dataSource().getConnection()) {
            return !consumer.inbox()
                    .claimedAmong(c, listener.consumer(), List.of(delivery.eventId()))
                    .isEmpty();
        } catch (SQLException e) {
            log.warn(
                    "consumer '{}' could not read whether event '{}' was applied by another delivery ({}): it is"
                            + " not acknowledged",
                    listener.consumer(),
                    delivery.eventId(),
                    e.toString());
            return false;
        }
    }

    /** A copy found applied after its body ran and rolled back: acknowledged, whatever the body asked. */
    private static Object duplicateAfterRollback(
            ListenerMethod listener, Delivery delivery, AfterCommitAcknowledgment ack, AfterCommitPubSub pubSub) {
        if (ack != null) {
            ack.acknowledgeDuplicate();
        }
        if (pubSub != null) {
            pubSub.settleDuplicate();
        }
        log.debug(
                "event '{}' is a duplicate for consumer '{}': its body ran and rolled back",
                delivery.eventId(),
                listener.consumer());
        return null;
    }

    /**
     * Every failed delivery is logged here, at ERROR with the consumer's name: the container's error handler
     * may retry it quietly and a dead-letter recoverer keeps the reason only in the record's headers, so
     * without this line a schema gone missing or a body that always throws is invisible in the log.
     */
    private static void failed(ListenerMethod listener, Delivery delivery, String outcome, Throwable failure) {
        log.error(
                "consumer '{}' failed event '{}' ({}; rolled back, not acknowledged: the container's error handler"
                        + " retries or dead-letters it)",
                listener.consumer(),
                delivery.eventId(),
                outcome.toLowerCase(java.util.Locale.ROOT),
                failure);
    }

    /** Carries a failed outcome out of the transaction callback, so the template rolls back. */
    private static final class Failed extends RuntimeException {
        final transient Outcome outcome;

        Failed(Outcome outcome) {
            super(null, null, false, false);
            this.outcome = outcome;
        }
    }

    private Object batch(ProxyMethodInvocation invocation, ListenerMethod listener) throws Throwable {
        Object[] args = invocation.getArguments();
        List<?> records = (List<?>) args[listener.batchIndex()];
        List<Delivery> deliveries = new ArrayList<>(records.size());
        int invalid = -1;
        for (int i = 0; i < records.size(); i++) {
            try {
                deliveries.add(listener.delivery(records.get(i)));
            } catch (InvalidDeliveryException e) {
                invalid = i;
                break;
            }
        }
        if (invalid < 0 && !records.isEmpty()) {
            try {
                return wholeBatch(invocation, listener, records, deliveries);
            } catch (Throwable e) {
                log.debug(
                        "batch of {} for consumer '{}' rolled back ({}); retrying one record per transaction",
                        records.size(),
                        listener.consumer(),
                        e.toString());
            }
        }
        // One record per transaction, in order, so everything before the failing record is committed when
        // the error handler hears of it: it commits exactly those offsets (spring-kafka issue 4436 is a
        // BatchListenerFailedException thrown from a batch whose one transaction rolled them all back).
        AfterCommitAcknowledgment batchAck = AfterCommitAcknowledgment.wrap(listener, args.clone());
        for (int i = 0; i < records.size(); i++) {
            try {
                Delivery d = i < deliveries.size() ? deliveries.get(i) : listener.delivery(records.get(i));
                Object[] single = args.clone();
                single[listener.batchIndex()] = List.of(records.get(i));
                if (listener.ackIndex() >= 0) {
                    single[listener.ackIndex()] = AfterCommitAcknowledgment.IGNORED;
                }
                one(invocation, listener, d, single);
            } catch (Throwable e) {
                throw Kafka.failedAt(listener, records, i, e);
            }
        }
        if (batchAck != null) {
            batchAck.settle(true);
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
            ProxyMethodInvocation invocation, ListenerMethod listener, List<?> records, List<Delivery> deliveries)
            throws Throwable {
        Object[] args = invocation.getArguments().clone();
        AfterCommitAcknowledgment ack = AfterCommitAcknowledgment.wrap(listener, args);
        IdempotentConsumer consumer = batchConsumer(listener.consumer());
        OnceSpring o = once();
        Map<String, Object> firstRecord = new HashMap<>();
        for (int i = 0; i < records.size(); i++) {
            firstRecord.putIfAbsent(deliveries.get(i).eventId(), records.get(i));
        }
        BatchCall call = new BatchCall(invocation, args, listener.batchIndex(), firstRecord);
        BatchCall outer = CURRENT_BATCH.get();
        CURRENT_BATCH.set(call);
        try {
            o.transactionTemplate().execute(status -> {
                for (Outcome r : consumer.processBatch(deliveries)) {
                    if (!r.shouldAcknowledge()) {
                        throw new Failed(r);
                    }
                }
                return null;
            });
        } catch (Failed f) {
            throw f.outcome.failure() != null
                    ? f.outcome.failure()
                    : new IllegalStateException("event '" + f.outcome.eventId() + "' " + f.outcome.tag());
        } finally {
            if (outer == null) {
                CURRENT_BATCH.remove();
            } else {
                CURRENT_BATCH.set(outer);
            }
        }
        if (ack != null) {
            ack.settle(false);
        }
        return call.result;
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

    private IdempotentConsumer consumer(String name) {
        IdempotentConsumer known = consumers.get(name);
        return known != null
                ? known
                : consumers.computeIfAbsent(name, n -> once().consumer(n, IdempotentListenerInterceptor::handle));
    }

    void buildAtCommitConsumers() {
        for (ListenerMethod m : methods.values()) {
            if (m.atCommit()) {
                atCommitConsumer(m.consumer());
            }
        }
    }

    private IdempotentConsumer atCommitConsumer(String name) {
        IdempotentConsumer known = atCommitConsumers.get(name);
        return known != null
                ? known
                : atCommitConsumers.computeIfAbsent(
                        name, n -> once().atCommitConsumer(n, IdempotentListenerInterceptor::handle));
    }

    private IdempotentConsumer batchConsumer(String name) {
        return batchConsumers.computeIfAbsent(
                name,
                n -> once().consumerBuilder()
                        .consumer(n)
                        .batchHandler(IdempotentListenerInterceptor::handleBatch)
                        .build());
    }

    private OnceSpring once() {
        OnceSpring o = once;
        if (o == null) {
            o = beanFactory.getBean(OnceSpring.class);
            once = o;
        }
        return o;
    }

    /** Kafka-specific pieces, loaded only with spring-kafka on the class path. */
    static final class Kafka {
        static Exception failedAt(ListenerMethod listener, List<?> records, int index, Throwable cause) {
            if (!ListenerMessages.SPRING_KAFKA) {
                return cause instanceof Exception e ? e : new IllegalStateException(cause);
            }
            return new org.springframework.kafka.listener.BatchListenerFailedException(
                    "record " + index + " of "
                            + records.size() + " failed for consumer '" + listener.consumer() + "'; the " + index
                            + " before it are committed",
                    cause,
                    index);
        }
    }
}
