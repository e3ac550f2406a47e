package dev.once.spring;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.Tx;
import dev.once.tx.TransactionHandle;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aop.ProxyMethodInvocation;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.transaction.support.TransactionSynchronization;
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
    private volatile OnceSpring once;

    IdempotentListenerInterceptor(BeanFactory beanFactory) {
        this.beanFactory = beanFactory;
    }

    ListenerMethod method(Method method) {
        return methods.computeIfAbsent(method, m -> ListenerMethod.of(m, beanFactory));
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
            throw e;
        }
        return one((ProxyMethodInvocation) invocation, listener, delivery, args);
    }

    /** The mutable state of one listener call: set by the engine's handler, read after commit. */
    private static final class Call {
        final ProxyMethodInvocation invocation;
        final Object[] args;
        final javax.sql.DataSource dataSource;
        Object result;
        boolean ran;
        Duration nack;

        Call(ProxyMethodInvocation invocation, Object[] args, javax.sql.DataSource dataSource) {
            this.invocation = invocation;
            this.args = args;
            this.dataSource = dataSource;
        }
    }

    /**
     * The handler of every listener consumer: proceeds with the call bound to this thread. The body's
     * {@link Tx} is kept with the physical transaction, where {@link OnceOutbox} finds it; a
     * {@code REQUIRES_NEW} step in the body runs in another transaction and does not see it.
     */
    private static void handle(Delivery delivery, Tx tx) throws Exception {
        Call call = CURRENT.get();
        call.ran = true;
        PhysicalTransaction state = PhysicalTransaction.current(call.dataSource);
        Tx outer = state.listenerTx(tx);
        try {
            call.result = call.invocation.invocableClone(call.args).proceed();
        } catch (Exception | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        } finally {
            state.listenerTx(outer);
        }
    }

    private Object one(ProxyMethodInvocation invocation, ListenerMethod listener, Delivery delivery, Object[] given)
            throws Throwable {
        Object[] args = given.clone();
        AfterCommitAcknowledgment ack = AfterCommitAcknowledgment.wrap(listener, args);
        AfterCommitChannel channel = listener.channelIndex() >= 0 ? AfterCommitChannel.wrap(listener, args) : null;
        OnceSpring o = once();
        Call call = new Call(invocation, args, o.transactions().key());
        IdempotentConsumer consumer = consumer(listener.consumer());
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
                if ((ack != null && ack.nacked() != null) || (channel != null && channel.refused())) {
                    // The body asked for redelivery: its writes and the claim must not commit.
                    status.setRollbackOnly();
                }
                return r;
            });
        } catch (Failed f) {
            Throwable failure = f.outcome.failure() != null
                    ? f.outcome.failure()
                    : new IllegalStateException("event '" + delivery.eventId() + "' " + f.outcome.tag());
            failed(listener, delivery, f.outcome.status().name(), failure);
            throw failure;
        } catch (RuntimeException | Error e) {
            // the transaction itself failed: the claim's statement, the commit, the connection
            failed(listener, delivery, "failed", e);
            throw e;
        } finally {
            if (outer == null) {
                CURRENT.remove();
            } else {
                CURRENT.set(outer);
            }
        }
        if (ack != null) {
            ack.settle(outcome.status() == Outcome.Status.DUPLICATE);
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

    private Object wholeBatch(
            ProxyMethodInvocation invocation, ListenerMethod listener, List<?> records, List<Delivery> deliveries)
            throws Throwable {
        Object[] args = invocation.getArguments().clone();
        AfterCommitAcknowledgment ack = AfterCommitAcknowledgment.wrap(listener, args);
        IdempotentConsumer consumer = consumer(listener.consumer());
        OnceSpring o = once();
        Object result;
        try {
            result = o.transactionTemplate().execute(status -> {
                try (TransactionHandle handle = o.transactions().begin()) {
                    Set<String> claimed = consumer.inbox()
                            .claimAll(
                                    handle.connection(),
                                    listener.consumer(),
                                    deliveries.stream().map(Delivery::eventId).toList());
                    List<Object> fresh = new ArrayList<>(claimed.size());
                    Set<String> seen = new HashSet<>();
                    for (int i = 0; i < records.size(); i++) {
                        String id = deliveries.get(i).eventId();
                        if (claimed.contains(id) && seen.add(id)) {
                            fresh.add(records.get(i));
                        }
                    }
                    if (fresh.isEmpty()) {
                        return null;
                    }
                    args[listener.batchIndex()] = fresh;
                    return invocation.invocableClone(args).proceed();
                } catch (RuntimeException | Error e) {
                    throw e;
                } catch (Throwable e) {
                    throw new BatchFailed(e);
                }
            });
        } catch (BatchFailed f) {
            throw f.getCause();
        }
        if (ack != null) {
            ack.settle(false);
        }
        return result;
    }

    private static final class BatchFailed extends RuntimeException {
        BatchFailed(Throwable cause) {
            super(cause);
        }
    }

    private IdempotentConsumer consumer(String name) {
        return consumers.computeIfAbsent(name, n -> once().consumer(n, IdempotentListenerInterceptor::handle));
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

    /**
     * The {@code Acknowledgment} a body sees: {@code acknowledge()} takes effect after the transaction
     * commits (and never when it rolls back); {@code nack} rolls the transaction back, then nacks.
     */
    static final class AfterCommitAcknowledgment {
        static final Object IGNORED = ListenerMessages.SPRING_KAFKA ? KafkaAck.ignored() : null;

        private final Object delegate;
        private final KafkaAck proxy;

        private AfterCommitAcknowledgment(Object delegate) {
            this.delegate = delegate;
            this.proxy = new KafkaAck(delegate);
        }

        /** Replaces the Acknowledgment argument in {@code args} with a deferring one; null if there is none. */
        static AfterCommitAcknowledgment wrap(ListenerMethod listener, Object[] args) {
            if (listener.ackIndex() < 0 || args[listener.ackIndex()] == null || args[listener.ackIndex()] == IGNORED) {
                return null;
            }
            AfterCommitAcknowledgment a = new AfterCommitAcknowledgment(args[listener.ackIndex()]);
            args[listener.ackIndex()] = a.proxy;
            return a;
        }

        Duration nacked() {
            return proxy.nack;
        }

        /** After the transaction: acknowledge a duplicate (its body never ran), forward a nack. */
        void settle(boolean acknowledge) {
            if (proxy.nack != null) {
                ((org.springframework.kafka.support.Acknowledgment) delegate).nack(proxy.nack);
            } else if (acknowledge && !proxy.acknowledged) {
                ((org.springframework.kafka.support.Acknowledgment) delegate).acknowledge();
            }
        }
    }

    /**
     * The RabbitMQ {@code Channel} a MANUAL-ack body sees: {@code basicAck}, {@code basicNack} and
     * {@code basicReject} are recorded and sent after the transaction completes. After a commit they
     * go out as called (a duplicate, whose body never ran, is acked by once). After a rollback or a
     * failed commit, an ack would lose a message whose effect did not commit: it is sent as a
     * {@code basicNack} with requeue instead, so the message comes back. A nack or reject rolls the
     * transaction back and is sent as called. Every other method goes straight to the channel.
     *
     * <p>A delivery that did not commit and that the body did not settle is settled by once, as the
     * {@code once-rabbitmq} consumer settles it: rejected without requeue (to the queue's dead-letter
     * exchange) when permanently failed, else nacked with requeue. In MANUAL mode the container
     * settles nothing when the listener throws, so the message would otherwise wait, unacknowledged,
     * until the channel closes. The exception is an {@code AmqpRejectAndDontRequeueException} with
     * {@code rejectManual}, which the container rejects itself.
     */
    static final class AfterCommitChannel implements java.lang.reflect.InvocationHandler, TransactionSynchronization {
        private final com.rabbitmq.client.Channel channel;
        private final long tag;
        private final List<Object[]> acks = new ArrayList<>(); // {deliveryTag, multiple}
        private final List<Runnable> refusals = new ArrayList<>();
        private Outcome outcome;

        private AfterCommitChannel(com.rabbitmq.client.Channel channel, long tag) {
            this.channel = channel;
            this.tag = tag;
        }

        /** Replaces the Channel argument in {@code args} with a deferring one; null if there is none. */
        static AfterCommitChannel wrap(ListenerMethod listener, Object[] args) {
            if (!(args[listener.channelIndex()] instanceof com.rabbitmq.client.Channel c)) {
                return null;
            }
            AfterCommitChannel a =
                    new AfterCommitChannel(c, ListenerMessages.deliveryTag(args[listener.messageIndex()]));
            args[listener.channelIndex()] = java.lang.reflect.Proxy.newProxyInstance(
                    com.rabbitmq.client.Channel.class.getClassLoader(),
                    new Class<?>[] {com.rabbitmq.client.Channel.class},
                    a);
            return a;
        }

        /** Records the delivery's outcome: a duplicate is acked after commit, a failure settled after rollback. */
        void outcome(Outcome outcome) {
            this.outcome = outcome;
        }

        /** True when the body refused the message ({@code basicNack} or {@code basicReject}). */
        boolean refused() {
            return !refusals.isEmpty();
        }

        @Override
        public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
            Class<?>[] p = method.getParameterTypes();
            switch (method.getName()) {
                case "basicAck" -> {
                    if (p.length == 2) {
                        acks.add(new Object[] {args[0], args[1]});
                        return null;
                    }
                }
                case "basicNack" -> {
                    if (p.length == 3) {
                        refusals.add(() ->
                                send(() -> channel.basicNack((long) args[0], (boolean) args[1], (boolean) args[2])));
                        return null;
                    }
                }
                case "basicReject" -> {
                    if (p.length == 2) {
                        refusals.add(() -> send(() -> channel.basicReject((long) args[0], (boolean) args[1])));
                        return null;
                    }
                }
                case "equals" -> {
                    if (p.length == 1) {
                        return proxy == args[0];
                    }
                }
                case "hashCode" -> {
                    if (p.length == 0) {
                        return System.identityHashCode(proxy);
                    }
                }
                default -> {}
            }
            try {
                return method.invoke(channel, args);
            } catch (java.lang.reflect.InvocationTargetException e) {
                throw e.getCause();
            }
        }

        @Override
        public void afterCompletion(int status) {
            if (!refusals.isEmpty()) {
                refusals.forEach(Runnable::run);
            } else if (status == STATUS_COMMITTED) {
                if (acks.isEmpty() && outcome != null && outcome.status() == Outcome.Status.DUPLICATE) {
                    send(() -> channel.basicAck(tag, false));
                }
                for (Object[] a : acks) {
                    send(() -> channel.basicAck((long) a[0], (boolean) a[1]));
                }
            } else if (!acks.isEmpty()) {
                for (Object[] a : acks) {
                    send(() -> channel.basicNack((long) a[0], (boolean) a[1], true));
                }
            } else if (outcome != null && outcome.status() == Outcome.Status.FAILED_PERMANENT) {
                if (!rejectedByContainer(outcome.failure())) {
                    send(() -> channel.basicReject(tag, false));
                }
            } else if (outcome == null || !rejectedByContainer(outcome.failure())) {
                // retryable, in progress elsewhere, or applied but the commit failed: back to the queue
                send(() -> channel.basicNack(tag, false, true));
            }
        }

        private static boolean rejectedByContainer(Throwable failure) {
            return failure instanceof org.springframework.amqp.AmqpRejectAndDontRequeueException reject
                    && reject.isRejectManual();
        }

        private interface ChannelCall {
            void run() throws java.io.IOException;
        }

        private static void send(ChannelCall call) {
            try {
                call.run();
            } catch (java.io.IOException | RuntimeException e) {
                // The channel is gone: the broker gives the unacknowledged message back, once absorbs the copy.
                log.warn("deferred RabbitMQ acknowledgement failed: {}", e.toString());
            }
        }
    }

    private static final class KafkaAck implements org.springframework.kafka.support.Acknowledgment {
        private final org.springframework.kafka.support.Acknowledgment delegate;
        volatile boolean acknowledged;
        volatile Duration nack;

        KafkaAck(Object delegate) {
            this.delegate = (org.springframework.kafka.support.Acknowledgment) delegate;
        }

        static Object ignored() {
            return new org.springframework.kafka.support.Acknowledgment() {
                @Override
                public void acknowledge() {
                    // a batch retried one record per transaction is acknowledged whole at its end
                }
            };
        }

        @Override
        public void acknowledge() {
            acknowledged = true;
            if (TransactionSynchronizationManager.isSynchronizationActive()) {
                TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                    @Override
                    public void afterCommit() {
                        delegate.acknowledge();
                    }
                });
            } else {
                delegate.acknowledge();
            }
        }

        @Override
        public void nack(Duration sleep) {
            this.nack = sleep;
        }

        @Override
        public boolean isOutOfOrderCommit() {
            return delegate.isOutOfOrderCommit();
        }
    }
}
