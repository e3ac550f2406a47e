package dev.once.spring;

import com.google.cloud.spring.pubsub.integration.inbound.PubSubInboundChannelAdapter;
import com.google.cloud.spring.pubsub.support.AcknowledgeablePubsubMessage;
import com.google.pubsub.v1.ProjectSubscriptionName;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.StreamPositions;
import dev.once.Tx;
import dev.once.adapter.AdapterDriver;
import io.awspring.cloud.sqs.listener.MessageListenerContainerRegistry;
import io.awspring.cloud.sqs.listener.SqsHeaders;
import io.awspring.cloud.sqs.listener.Visibility;
import java.lang.ref.WeakReference;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.amqp.rabbit.listener.RabbitListenerEndpointRegistry;
import org.springframework.aop.ProxyMethodInvocation;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.listener.AbstractMessageListenerContainer;
import org.springframework.kafka.listener.ConcurrentMessageListenerContainer;
import org.springframework.kafka.listener.MessageListenerContainer;
import org.springframework.messaging.Message;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.support.TransactionCallback;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

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
    private final Map<String, IdempotentConsumer> ownTransactionConsumers = new ConcurrentHashMap<>();
    private final BatchListenerCalls batches = new BatchListenerCalls(this::once, this::one);
    private volatile OnceSpring once;
    // the application context is stopping or closing (its lifecycle, pubSubWaits): Pub/Sub waits give up
    private volatile boolean contextStopping;

    IdempotentListenerInterceptor(BeanFactory beanFactory) {
        this.beanFactory = beanFactory;
    }

    /**
     * The context's lifecycle as the waits of Pub/Sub calls see it: stopped first when the context stops or closes
     * (the highest phase), before any subscriber or adapter, so that a call waiting for a holder gives up (its
     * message nacked) rather than hold up a subscriber's shutdown, which waits for the messages in hand. Registered
     * by {@link IdempotentListenerPostProcessor} with Spring Cloud GCP Pub/Sub present.
     */
    SmartLifecycle pubSubWaits() {
        return new SmartLifecycle() {
            private volatile boolean running;

            @Override
            public void start() {
                contextStopping = false;
                running = true;
            }

            @Override
            public void stop() {
                contextStopping = true;
                running = false;
            }

            @Override
            public boolean isRunning() {
                return running;
            }

            @Override
            public int getPhase() {
                return Integer.MAX_VALUE;
            }
        };
    }

    ListenerMethod method(Method method) {
        ListenerMethod known = methods.get(method); // no capturing lambda allocated on every call
        return known != null ? known : methods.computeIfAbsent(method, m -> ListenerMethod.of(m, beanFactory));
    }

    @Override
    public Object invoke(MethodInvocation invocation) throws Throwable {
        ListenerMethod listener = method(invocation.getMethod());
        if (listener.sqs()) {
            refuseSqsDeletesOnceCannotHold(listener, invocation.getArguments());
        }
        if (ListenerMessages.SPRING_PUBSUB
                && listener.messageIndex() >= 0
                && TransactionSynchronizationManager.isActualTransactionActive()
                && AfterCommitPubSub.ackedWhenTheFlowReturns(invocation.getArguments()[listener.messageIndex()])) {
            throw polledAckedBeforeTheCommit(listener);
        }
        if (listener.batchIndex() >= 0) {
            return batches.batch((ProxyMethodInvocation) invocation, listener);
        }
        Object[] args = invocation.getArguments();
        Delivery delivery;
        StreamPositions positions;
        try {
            delivery = listener.delivery(args);
            positions = listener.sqs() && listener.messageIndex() >= 0
                    ? sqsFifoPosition(listener, args[listener.messageIndex()])
                    : null;
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
        return one((ProxyMethodInvocation) invocation, listener, delivery, positions, args);
    }

    /**
     * Where the message of an {@code @SqsListener} call stands in its FIFO queue's message group, or null (a standard
     * queue's message: processed without a position, as before). Read before the claim.
     *
     * @throws InvalidConfigurationException, logged, for a FIFO queue's message its container fetched without its
     *     group or sequence number: applying it unfenced could apply it after its successors
     */
    static StreamPositions sqsFifoPosition(ListenerMethod listener, Object message) {
        try {
            return ListenerMessages.sqsFifoPosition(message);
        } catch (InvalidConfigurationException e) {
            throw refusal(listener, e.getMessage());
        }
    }

    /**
     * One listener call: the template's callback (claim, body and the outcome's verdict in the transaction),
     * and the state the engine's handler reads and sets on this thread, read again after the commit. One
     * object per call, where a callback lambda and a holder were two.
     */
    private static final class Call implements TransactionCallback<Outcome> {
        final ProxyMethodInvocation invocation;
        final Object[] args;
        final SpringTransactionProvider transactions;
        // the body runs confined to the engine's guarded connection (ConfinedConnectionHolder)
        final boolean confine;
        final boolean own;
        // The template's transaction is this call's alone and its commit follows the callback: once's state of
        // it is not one of Spring's synchronizations unless it must be (PhysicalTransaction.owned)
        final boolean drivesState;
        final IdempotentConsumer consumer;
        final Delivery delivery;
        // a FIFO queue's message: its place in its message group, moved in this transaction; else null
        final StreamPositions positions;
        final AfterCommitAcknowledgment ack;
        final AfterCommitChannel channel;
        final AfterCommitPubSub pubSub;
        // The invocation is proceeded itself once when the body gets its own arguments (nothing replaced
        // one): Spring's invocableClone copies the invocation and its attribute map on every call.
        boolean proceeded;
        Object result;
        PhysicalTransaction owned;
        // the state's before-commit step ran here and nothing else was registered: the commit decides alone
        boolean commitsAlone;

        Call(
                ProxyMethodInvocation invocation,
                Object[] args,
                SpringTransactionProvider transactions,
                boolean confine,
                boolean own,
                boolean drivesState,
                IdempotentConsumer consumer,
                Delivery delivery,
                StreamPositions positions,
                AfterCommitAcknowledgment ack,
                AfterCommitChannel channel,
                AfterCommitPubSub pubSub) {
            this.invocation = invocation;
            this.args = args;
            this.transactions = transactions;
            this.confine = confine;
            this.own = own;
            this.drivesState = drivesState;
            this.consumer = consumer;
            this.delivery = delivery;
            this.positions = positions;
            this.ack = ack;
            this.channel = channel;
            this.pubSub = pubSub;
        }

        @Override
        public Outcome doInTransaction(TransactionStatus status) {
            if (channel != null) {
                channel.settleAtEnd(transactions.stateKey());
            }
            if (drivesState) {
                owned = PhysicalTransaction.owned(transactions.stateKey());
            }
            // A FIFO queue's message moves its group's stored position in this transaction, and one the group has
            // already gone past is refused, FAILED_PERMANENT, not applied after its successors: this call held it past
            // its visibility timeout while SQS moved it to the dead-letter queue (its redrive policy) and handed out
            // the next messages of its group, which another call applied. Refused, it rolls back below and is not
            // deleted (ON_SUCCESS: the container deletes nothing for a call that throws; MANUAL: the deferred
            // acknowledgement is dropped): SQS has it in the dead-letter queue already, where it stays for an
            // operator, and its stale receipt handle could not delete it anyway. The claim here comes first, also
            // with ClaimTiming.AT_COMMIT: the ordered run claims before the body, in the position's transaction.
            Outcome r = positions == null
                    ? consumer.process(delivery)
                    : consumer.processInOrder(List.of(delivery), positions).get(0);
            if (channel != null) {
                channel.outcome(r);
            }
            if (!r.shouldAcknowledge() || (own && r.status() == Outcome.Status.DUPLICATE && status.isRollbackOnly())) {
                // rolls the transaction back; a failure is rethrown as the body's own exception, a
                // duplicate whose claim aborted the transaction is acknowledged after it
                throw new Failed(r);
            }
            if (askedForRedelivery(ack, channel, pubSub)) {
                // The body asked for redelivery: its writes and the claim must not commit.
                status.setRollbackOnly();
            }
            // The template commits right after this returns, unless the transaction is rollback-only (then it
            // rolls back, as it does when this throws): the state's outbox rows and claim checks go now.
            if (owned != null && !status.isRollbackOnly()) {
                commitsAlone = owned.beforeOwnersCommit();
            }
            return r;
        }

        /** Runs this call in {@code template}'s transaction and tells once's state how it ended. */
        Outcome run(TransactionTemplate template) {
            boolean committed = false;
            try {
                Outcome r = template.execute(this);
                committed = commitsAlone; // returned: the commit that decided alone succeeded
                return r;
            } finally {
                if (owned != null) {
                    owned.ownerEnded(committed);
                }
            }
        }

        /** The body, with the arguments it gets (the deferring wrappers in place). */
        Object proceed() throws Throwable {
            if (!proceeded && args == invocation.getArguments()) {
                proceeded = true;
                return invocation.proceed();
            }
            return invocation.invocableClone(args).proceed();
        }
    }

    /**
     * The handler of every listener consumer: proceeds with the call bound to this thread. The body's
     * {@link Tx} is kept with the physical transaction, where {@link OnceOutbox} finds it; a
     * {@code REQUIRES_NEW} step in the body runs in another transaction and does not see it.
     */
    private static void handle(Delivery delivery, Tx tx) throws Exception {
        Call call = CURRENT.get();
        // The state the call bound when it drives it (its own transaction): no look in Spring's resource map
        PhysicalTransaction state =
                call.owned != null ? call.owned : PhysicalTransaction.current(call.transactions.stateKey());
        Tx outer = state.listenerTx(tx);
        ConfinedConnectionHolder confined =
                call.confine ? ConfinedConnectionHolder.bind(call.transactions.key(), tx.connection(), state) : null;
        try {
            call.result = call.proceed();
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

    /**
     * @param positions a FIFO queue's message's place in its group ({@link #sqsFifoPosition}), else null
     */
    private Object one(
            ProxyMethodInvocation invocation,
            ListenerMethod listener,
            Delivery delivery,
            StreamPositions positions,
            Object[] given)
            throws Throwable {
        // A copy only for a listener with an argument a wrapper may replace: the body gets the container's
        // own arguments otherwise, and the invocation is proceeded as it is.
        Object[] args = replacesArguments(listener) ? given.clone() : given;
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
        // In its own transaction the claim may be the plain insert, after which a duplicate rolls back; not
        // for a Channel method, whose deferred acks settle a rolled-back delivery as one to redeliver.
        IdempotentConsumer consumer = atCommit
                ? atCommitConsumer(listener.consumer())
                : own && channel == null ? ownTransactionConsumer(listener.consumer()) : consumer(listener.consumer());
        // A Kafka record whose event another transaction holds (IN_PROGRESS: the claim's lock wait timed out) is
        // waited for here, in transactions of its own, instead of failing to the container's error handler: that
        // handler counts it as a failed attempt and, out of attempts, skips it, so the records after it in the
        // partition would be applied before it, and its offset committed even if the holder then rolls back. The
        // holder is typically a container evicted from the group (a body past max.poll.interval.ms) still
        // running the rest of its poll; without a lock timeout the claim waits for it the same way. A RabbitMQ
        // message is waited for too, kept unacknowledged (its container acks after the return): requeued, each try
        // would count toward a quorum queue's x-delivery-limit, at which the broker drops or dead-letters it while
        // the holder (a slow call whose channel a partition closed) may still roll back. Only in its own
        // transaction. With a Channel argument (MANUAL acks) a try that met the holder and sent nothing on the channel
        // (claim first: the body did not run) leaves the message unsettled at its end (AfterCommitChannel.held) and
        // the next try starts afresh; given up, it is requeued as before. A try whose body acked (claim at commit) is
        // nacked at its end as before and not waited for: its delivery tag is spent. An
        // @SqsListener message is waited for while its visibility is extended (Sqs.keepInvisible): visible again,
        // each receive would count toward its redrive policy's maxReceiveCount. Not a batch's (its other messages'
        // visibility would run out meanwhile). A Pub/Sub message too, kept leased: nacked, each try would be a delivery
        // attempt toward its subscription's dead-letter policy (max_delivery_attempts). A streaming subscriber's client
        // extends the lease of a message in hand itself; a pulled message's ack deadline is extended here.
        NestedListenerStep nested = own ? null : o.nestedStep(listener.kafka());
        boolean waitsForHolder = (listener.kafka() && (own || nested != null))
                || (own && listener.rabbit())
                || (own && listener.sqs() && listener.batchIndex() < 0 && listener.messageIndex() >= 0)
                || (own && pubSub != null && listener.batchIndex() < 0);
        if (waitsForHolder && channel != null) {
            channel.waitsForHolder();
        }
        // In a transaction the container began (its transactionManager: JDBC, Kafka or both chained), failing the
        // record hands it to the container's AfterRollbackProcessor, which skips it the same way once out of
        // attempts; and on PostgreSQL the timed-out claim aborted the container's whole transaction. So each try runs
        // NESTED there: a savepoint in the container's database transaction (a transaction of its own if the
        // container began none on this DataSource), rolled back to undo the timed-out claim alone, with the
        // rollback-only marks it left on the container's resources, before the claim is tried again in the same
        // transaction. The cost: a SAVEPOINT and a RELEASE per record, only in a container's database transaction.
        // Not where the transaction manager refuses NESTED (JPA's and JTA's as they come): the call joins there, and
        // IN_PROGRESS fails the record as before.
        TransactionTemplate template = nested != null ? nested.template() : o.transactionTemplate();
        HeldWait held = null; // set when a try met another holder
        long tryStarted = 0; // an @SqsListener's: how long a try takes is how long the message must stay invisible
        Call call;
        Outcome outcome;
        for (; ; ) {
            call = new Call(
                    invocation,
                    args,
                    o.transactions(),
                    own && o.confinesListeners(),
                    own,
                    own && o.confinesListeners() && channel == null,
                    consumer,
                    delivery,
                    positions,
                    ack,
                    channel,
                    pubSub);
            Call outer = CURRENT.get();
            CURRENT.set(call);
            if (nested != null) {
                nested.snapshot();
            }
            if (listener.sqs() || pubSub != null) {
                tryStarted = System.nanoTime();
            }
            try {
                outcome = call.run(template);
                break;
            } catch (RuntimeException | Error e) {
                if (e instanceof Failed f && f.outcome.status() == Outcome.Status.DUPLICATE) {
                    outcome = f.outcome; // the claim found the id taken and aborted the transaction: acknowledged
                    break;
                }
                boolean again = false;
                try {
                    again = waitsForHolder
                            && e instanceof Failed f
                            // not a holder this thread suspended, which ends only after this call: waiting would
                            // spin for ever
                            && AdapterDriver.heldElsewhere(f.outcome)
                            // a Channel method's try sent nothing at its end (its body acked nothing)
                            && (channel == null || channel.held())
                            && (nested == null || nested.undoMarks())
                            && (held = waitForHolder(listener, delivery, args, pubSub, held, tryStarted)) != null;
                } finally {
                    if (channel != null && again) {
                        channel.nextTry();
                    } else if (channel != null) {
                        channel.settleHeld(); // given up: requeued, as before
                    }
                }
                if (again) {
                    // tries again
                } else if (atCommit && appliedByCopy(o, consumer, listener, delivery)) {
                    return duplicateAfterRollback(listener, delivery, ack, pubSub);
                } else {
                    if (ack != null) {
                        ack.ended();
                    }
                    throw failure(listener, delivery, e, pubSub);
                }
            } finally {
                // set, not remove: the container thread keeps its entry (holding null between calls), so the
                // next call's get() finds it instead of creating one; a static ThreadLocal pins no class loader
                // through a null value
                CURRENT.set(outer);
            }
        }
        if (atCommit && askedForRedelivery(ack, channel, pubSub) && appliedByCopy(o, consumer, listener, delivery)) {
            return duplicateAfterRollback(listener, delivery, ack, pubSub);
        }
        if (ack != null) {
            ack.settle(
                    outcome.status() == Outcome.Status.DUPLICATE,
                    o.transactions().stateKey());
        }
        if (pubSub != null) {
            pubSub.settleAfterCommit(o.transactions().stateKey());
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
     * Before another try of a Kafka record, a RabbitMQ, SQS or Pub/Sub message whose event another transaction holds:
     * says so once per record (at WARN: for Kafka a container evicted from the group for a body past {@code
     * max.poll.interval.ms} is the usual holder, for the others a slow call whose channel, visibility or lease ran
     * out) and gives up when the thread is interrupted or its listener container (Pub/Sub: its subscriber) is
     * stopping, whose {@code stop()} would otherwise wait its shutdown timeout for a holder that may not end. Giving
     * up throws, so that the container acknowledges nothing: a Kafka container neither goes on with the records after
     * it (its error handler, or {@code AfterRollbackProcessor}, seeks back to it and whoever owns the partition next
     * gets it again), a RabbitMQ container requeues the message, a Pub/Sub message is nacked. A failure of its own
     * type, so that a Kafka error handler (which by default counts anew when the exception changes) takes it for a
     * first attempt rather than the last one of a count the record ran up before.
     *
     * @param held       the wait so far, null before the first
     * @param tryStarted when the try that met the holder began ({@code System.nanoTime()}, an {@code @SqsListener}'s
     *     or a Pub/Sub message's)
     * @return the wait, to try again; null to fail the message as before: an SQS message whose visibility, or a pulled
     *     Pub/Sub message whose ack deadline, cannot be extended ({@link Sqs#keepInvisible}, {@link PubSub#keepLeased})
     * @throws HolderWaitAbandonedException when the thread is interrupted or its container stopping
     */
    private HeldWait waitForHolder(
            ListenerMethod listener,
            Delivery delivery,
            Object[] args,
            AfterCommitPubSub pubSub,
            HeldWait held,
            long tryStarted) {
        Waiting kind = Waiting.of(listener, pubSub);
        boolean interrupted = Thread.currentThread().isInterrupted();
        Object message = listener.messageIndex() >= 0 ? args[listener.messageIndex()] : null;
        if (interrupted || stopping(kind, message, pubSub)) {
            HolderWaitAbandonedException abandoned = new HolderWaitAbandonedException(
                    listener.consumer(),
                    delivery.eventId(),
                    delivery.source(),
                    interrupted
                            ? HolderWaitAbandonedException.Reason.INTERRUPTED
                            : HolderWaitAbandonedException.Reason.CONTAINER_STOPPING);
            log.warn("{}", abandoned.getMessage());
            throw abandoned;
        }
        HeldWait wait = held != null ? held : new HeldWait();
        long tryNanos = System.nanoTime() - tryStarted;
        if ((kind == Waiting.SQS && !Sqs.keepInvisible(listener, delivery, message, wait, tryNanos))
                || (kind == Waiting.PUBSUB && !PubSub.keepLeased(listener, delivery, pubSub, wait, tryNanos))) {
            return null;
        }
        if (held == null) {
            log.warn(kind.waiting, listener.consumer(), delivery.eventId(), delivery.source());
        }
        return wait;
    }

    /** Whether the container (Pub/Sub: the subscriber) of a waiting call of {@code kind} is stopping. */
    private boolean stopping(Waiting kind, Object message, AfterCommitPubSub pubSub) {
        return switch (kind) {
            case KAFKA -> Kafka.containerStopping(beanFactory);
            case SQS -> Sqs.containerStopping(beanFactory, message);
            case RABBIT -> Rabbit.containerStopping(beanFactory, ListenerMessages.rabbitQueue(message));
            case PUBSUB -> contextStopping || PubSub.subscriberStopping(beanFactory, pubSub);
        };
    }

    /** The broker of a call waiting for a holder, with what the wait says (at WARN) when it begins. */
    private enum Waiting {
        KAFKA("consumer '{}': event '{}' ({}) is in progress in another transaction (a container evicted from the"
                + " group for a listener call past max.poll.interval.ms, still running its poll?); waiting for it to"
                + " end instead of failing the record, which the error handler could skip so that the records after"
                + " it are applied before it"),
        SQS("consumer '{}': event '{}' ({}) is in progress in another transaction (a call past the visibility"
                + " timeout?); waiting for it to end, the message kept invisible, instead of failing it: each receive"
                + " counts toward the redrive policy's maxReceiveCount, after which SQS moves the message to the"
                + " dead-letter queue"),
        RABBIT("consumer '{}': event '{}' ({}) is in progress in another transaction (a slow call whose channel was"
                + " closed?); waiting for it to end, the message unacknowledged, instead of requeueing it: each"
                + " requeue counts toward a quorum queue's x-delivery-limit, at which the broker drops or dead-letters"
                + " the message"),
        PUBSUB("consumer '{}': event '{}' ({}) is in progress in another transaction (a call past its ack"
                + " deadline?); waiting for it to end, the message leased, instead of nacking it: each nack is a"
                + " delivery attempt, after the dead-letter policy's max_delivery_attempts Pub/Sub forwards the"
                + " message to the dead-letter topic");

        final String waiting;

        Waiting(String waiting) {
            this.waiting = waiting;
        }

        static Waiting of(ListenerMethod listener, AfterCommitPubSub pubSub) {
            if (listener.kafka()) {
                return KAFKA;
            }
            if (listener.sqs()) {
                return SQS;
            }
            return pubSub != null ? PUBSUB : RABBIT;
        }
    }

    /**
     * A listener call waiting for another transaction's claim: what the tries so far left behind. A message whose
     * lease (SQS visibility, pulled Pub/Sub ack deadline) the wait extends is extended, when less than two tries' time
     * is left of it, to {@value #HELD_SECONDS} s or four tries, whichever is longer, within the broker's maximum: one
     * extension per such stretch, not per try; a try is as long as the claim's lock wait.
     */
    private static final class HeldWait {
        static final int HELD_SECONDS = 30;
        // until when the message is leased ({@code System.nanoTime()}), as last extended; unset before
        long invisibleUntil;
        boolean extended;

        /** How long to extend the lease by now, within {@code maxSeconds}; 0 when it has time enough left. */
        long due(long now, long tryNanos, long maxSeconds) {
            if (extended && invisibleUntil - now > 2 * tryNanos) {
                return 0;
            }
            return Math.min(maxSeconds, Math.max(HELD_SECONDS, 4 * TimeUnit.NANOSECONDS.toSeconds(tryNanos)));
        }

        void extendedAt(long now, long seconds) {
            extended = true;
            invisibleUntil = now + TimeUnit.SECONDS.toNanos(seconds);
        }
    }

    /** Spring Cloud AWS pieces, loaded only for an {@code @SqsListener}'s wait. */
    private static final class Sqs {
        /**
         * Keeps {@code message} invisible through the next try, so that SQS hands it to no one else meanwhile: when
         * due ({@link HeldWait#due}), its visibility is changed through the {@code Visibility} its container put on
         * it. One {@code ChangeMessageVisibility} call per such stretch, not per try.
         *
         * @return false, logged, when it cannot be: the message carries no {@code Visibility} (not from a listener
         *     container), or SQS refused the change (the total visibility of a message is at most 12 hours from its
         *     receive): the message then fails as before, and comes back when its visibility timeout runs out
         */
        static boolean keepInvisible(
                ListenerMethod listener, Delivery delivery, Object message, HeldWait wait, long tryNanos) {
            long now = System.nanoTime();
            long seconds = wait.due(now, tryNanos, Visibility.MAX_VISIBILITY_TIMEOUT_SECONDS);
            if (seconds == 0) {
                return true;
            }
            Object header = message instanceof Message<?> m
                    ? m.getHeaders().get(SqsHeaders.SQS_VISIBILITY_TIMEOUT_HEADER)
                    : null;
            try {
                if (!(header instanceof Visibility visibility)) {
                    throw new IllegalStateException(
                            "no Visibility header: the message is not from an SQS listener container");
                }
                visibility.changeTo((int) seconds);
            } catch (RuntimeException e) {
                log.warn(
                        "consumer '{}': event '{}' ({}) is in progress in another transaction, but its message's"
                                + " visibility could not be extended ({}): not waiting for it; the message comes back"
                                + " after its visibility timeout",
                        listener.consumer(),
                        delivery.eventId(),
                        delivery.source(),
                        e.toString());
                return false;
            }
            wait.extendedAt(now, seconds);
            return true;
        }

        /**
         * Whether the listener container of {@code message} is stopping: every container listening to its queue
         * (by name or URL) has been told to stop, as {@link Rabbit#containerStopping} decides for RabbitMQ. The
         * containers are those of the context's listener container registries and its container beans.
         */
        static boolean containerStopping(BeanFactory beanFactory, Object message) {
            if (!(beanFactory instanceof ListableBeanFactory beans) || !(message instanceof Message<?> m)) {
                return false;
            }
            Object name = m.getHeaders().get(SqsHeaders.SQS_QUEUE_NAME_HEADER);
            Object url = m.getHeaders().get(SqsHeaders.SQS_QUEUE_URL_HEADER);
            List<Object> all = new ArrayList<>();
            for (var registry : beans.getBeanProvider(MessageListenerContainerRegistry.class)) {
                all.addAll(registry.getListenerContainers());
            }
            beans.getBeanProvider(io.awspring.cloud.sqs.listener.AbstractMessageListenerContainer.class)
                    .forEach(all::add);
            boolean found = false;
            for (Object c : all) {
                if (c instanceof io.awspring.cloud.sqs.listener.AbstractMessageListenerContainer<?, ?, ?> a
                        && (a.getQueueNames().contains(name)
                                || a.getQueueNames().contains(url))) {
                    if (a.isRunning()) {
                        return false;
                    }
                    found = true;
                }
            }
            return found;
        }
    }

    /** Spring Cloud GCP pieces, loaded only for a Pub/Sub message's wait. */
    private static final class PubSub {
        /** Pub/Sub's longest ack deadline. */
        static final int MAX_ACK_DEADLINE_SECONDS = 600;

        // PubSubInboundChannelAdapter's subscription, which it has no getter for; null when it cannot be read
        private static final Field ADAPTER_SUBSCRIPTION = adapterSubscription();

        /**
         * Keeps the message of a waiting call leased through the next try, so that Pub/Sub hands it to no one else
         * meanwhile. A streaming subscriber's message ({@code PubSubTemplate.subscribe}, {@code
         * PubSubInboundChannelAdapter}) is leased by the client while the call holds it, up to its subscriber's
         * {@code maxAckExtensionPeriod} (60 min unless set): nothing to do. A pulled one ({@code
         * PubSubMessageSource}, {@code PubSubTemplate.pull}) has its ack deadline extended when due ({@link
         * HeldWait#due}), one {@code ModifyAckDeadline} per such stretch.
         *
         * @return false, logged, when the deadline could not be extended: the message is then nacked as before
         */
        static boolean keepLeased(
                ListenerMethod listener, Delivery delivery, AfterCommitPubSub pubSub, HeldWait wait, long tryNanos) {
            if (!(pubSub.message() instanceof AcknowledgeablePubsubMessage pulled)) {
                return true;
            }
            long now = System.nanoTime();
            long seconds = wait.due(now, tryNanos, MAX_ACK_DEADLINE_SECONDS);
            if (seconds == 0) {
                return true;
            }
            try {
                pulled.modifyAckDeadline((int) seconds).get(HeldWait.HELD_SECONDS, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt(); // the next look ends the wait
            } catch (Exception e) {
                log.warn(
                        "consumer '{}': event '{}' ({}) is in progress in another transaction, but its message's ack"
                                + " deadline could not be extended ({}): not waiting for it; the message is nacked",
                        listener.consumer(),
                        delivery.eventId(),
                        delivery.source(),
                        e.toString());
                return false;
            }
            wait.extendedAt(now, seconds);
            return true;
        }

        /**
         * Whether the subscriber of a waiting call's message is stopping: every {@code PubSubInboundChannelAdapter}
         * of the context on the message's subscription (every adapter, when its subscription cannot be read) is
         * stopped, and there is one. A subscriber of {@code PubSubTemplate.subscribe} is known to no one but its
         * caller: its calls give up when the context stops or closes, or their thread is interrupted (a polling
         * endpoint's stop interrupts its poll).
         */
        static boolean subscriberStopping(BeanFactory beanFactory, AfterCommitPubSub pubSub) {
            if (!ListenerMessages.SPRING_INTEGRATION || !(beanFactory instanceof ListableBeanFactory beans)) {
                return false;
            }
            ProjectSubscriptionName name = pubSub.message().getProjectSubscriptionName();
            boolean found = false;
            for (PubSubInboundChannelAdapter a : beans.getBeanProvider(PubSubInboundChannelAdapter.class)) {
                if (consumes(a, name)) {
                    if (a.isRunning()) {
                        return false;
                    }
                    found = true;
                }
            }
            return found;
        }

        private static boolean consumes(PubSubInboundChannelAdapter adapter, ProjectSubscriptionName name) {
            Object given;
            try {
                given = ADAPTER_SUBSCRIPTION == null || name == null ? null : ADAPTER_SUBSCRIPTION.get(adapter);
            } catch (ReflectiveOperationException | RuntimeException e) {
                given = null;
            }
            return !(given instanceof String s) || s.equals(name.getSubscription()) || s.equals(name.toString());
        }

        private static Field adapterSubscription() {
            try {
                Field f = PubSubInboundChannelAdapter.class.getDeclaredField("subscriptionName");
                f.setAccessible(true);
                return f;
            } catch (ReflectiveOperationException | RuntimeException e) {
                return null;
            }
        }
    }

    /** Spring AMQP pieces, loaded only for a RabbitMQ listener's wait. */
    private static final class Rabbit {
        /**
         * Whether the listener container of a message from {@code queue} is stopping: every container that consumes
         * {@code queue} (every container, when the queue is not known: the method takes no message) has begun to
         * stop or is stopped. A call does not know its container; while another container on the queue is active,
         * the wait goes on until the stopping one interrupts the thread at its shutdown timeout. The containers are
         * those of the {@code @RabbitListener} registries and the context's container beans.
         */
        static boolean containerStopping(BeanFactory beanFactory, String queue) {
            if (!(beanFactory instanceof ListableBeanFactory beans)) {
                return false;
            }
            List<Object> all = new ArrayList<>();
            for (var registry : beans.getBeanProvider(RabbitListenerEndpointRegistry.class)) {
                all.addAll(registry.getListenerContainers());
            }
            beans.getBeanProvider(org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.class)
                    .forEach(all::add);
            boolean found = false;
            for (var c : all) {
                if (c instanceof org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer a
                        && (queue == null || Arrays.asList(a.getQueueNames()).contains(queue))) {
                    if (a.isActive()) {
                        return false;
                    }
                    found = true;
                }
            }
            return found;
        }
    }

    /** Kafka-specific pieces, loaded only for a Kafka listener's wait. */
    private static final class Kafka {
        /**
         * The listener container this consumer thread was last found to run for. A consumer thread runs one
         * container's consumer for its whole life, so the registries are walked once per thread rather than at every
         * try of a waiting record; weak, so that a thread of an application's executor pins no container.
         */
        private static final ThreadLocal<WeakReference<AbstractMessageListenerContainer<?, ?>>> CONTAINER =
                new ThreadLocal<>();

        /**
         * Whether the listener container whose consumer thread this is has been told to stop. The thread is
         * recognised by the name spring-kafka gives it ({@code <container bean name>-C-<n>}); on a thread of a
         * listener task executor of the application's, the container is not found and only an interrupt ends the
         * wait. The container found is kept for the thread: while it runs, that is the answer; once it does not, the
         * registries are walked again, in case the thread now serves another container of the same name (a thread
         * of an executor reused after a restart).
         */
        static boolean containerStopping(BeanFactory beanFactory) {
            WeakReference<AbstractMessageListenerContainer<?, ?>> known = CONTAINER.get();
            AbstractMessageListenerContainer<?, ?> cached = known == null ? null : known.get();
            if (cached != null && cached.isRunning()) {
                return false;
            }
            AbstractMessageListenerContainer<?, ?> found = find(beanFactory);
            if (found == null) {
                CONTAINER.remove();
                return false;
            }
            if (found != cached) {
                CONTAINER.set(new WeakReference<>(found));
            }
            return !found.isRunning();
        }

        private static AbstractMessageListenerContainer<?, ?> find(BeanFactory beanFactory) {
            if (!(beanFactory instanceof ListableBeanFactory beans)) {
                return null;
            }
            String thread = Thread.currentThread().getName();
            for (KafkaListenerEndpointRegistry registry : beans.getBeanProvider(KafkaListenerEndpointRegistry.class)) {
                for (MessageListenerContainer c : registry.getAllListenerContainers()) {
                    List<? extends MessageListenerContainer> children =
                            c instanceof ConcurrentMessageListenerContainer<?, ?> concurrent
                                    ? concurrent.getContainers()
                                    : List.of(c);
                    for (MessageListenerContainer child : children) {
                        if (child instanceof AbstractMessageListenerContainer<?, ?> a
                                && a.getBeanName() != null
                                && thread.startsWith(a.getBeanName() + "-C-")) {
                            return a;
                        }
                    }
                }
            }
            return null;
        }
    }

    /** Whether a deferring wrapper may take the place of one of {@code listener}'s arguments. */
    private static boolean replacesArguments(ListenerMethod listener) {
        return listener.ackIndex() >= 0
                || listener.channelIndex() >= 0
                || (ListenerMessages.SPRING_PUBSUB && (listener.pubSubIndex() >= 0 || listener.messageIndex() >= 0))
                || (listener.sqs() && listener.messageIndex() >= 0);
    }

    /**
     * Refuses, before the claim, an {@code @SqsListener} call whose deletes once cannot hold back until the commit, as
     * its container set the call up ({@link ListenerMethod#sqsDeletedByListener}): a container-deleting mode in a
     * transaction still open at the return, and a batch in MANUAL mode, whose body deletes the messages at once
     * (the mode may be the factory's, unknown at startup).
     */
    private static void refuseSqsDeletesOnceCannotHold(ListenerMethod listener, Object[] args) {
        boolean byListener = listener.sqsDeletedByListener(args);
        if (byListener && listener.batchIndex() >= 0) {
            throw refusal(
                    listener,
                    "is a batch @SqsListener whose container is in acknowledgementMode MANUAL (set on its container"
                            + " factory): once cannot hold each message's delete back until its claim commits; refused,"
                            + " the messages come back after their visibility timeout. Use a container factory in"
                            + " ON_SUCCESS mode for it (the container deletes the batch after the method returned, so"
                            + " after the commit), or take one Message<?> per call");
        }
        if (!byListener && TransactionSynchronizationManager.isActualTransactionActive()) {
            throw deletedBeforeTheCallersCommit(listener);
        }
    }

    /**
     * An {@code @SqsListener} whose container deletes the message when the method returns ({@code ON_SUCCESS}),
     * called in a transaction it did not begin (a caller's {@code @Transactional}, one a message interceptor began):
     * refused before the claim, and so before the body. Its claim and effect would commit with that transaction,
     * after the container's delete: a caller that then rolled back, wholly or to a savepoint around the call, or
     * whose commit failed, would lose the message, and once cannot hold a container's delete back (its
     * acknowledgement stage follows the method's return, with a callback no argument carries). Refused, the message
     * is not deleted and comes back when its visibility timeout runs out (to the queue's dead-letter queue after
     * its redrive policy's receives). In MANUAL mode the body's {@code Acknowledgement} is the delete, and once
     * defers it to that transaction's commit: the fix this names. Not refused at startup: the same listener called
     * by its container outside any transaction (once's own, committed before the method returns) is safe.
     */
    private static InvalidConfigurationException deletedBeforeTheCallersCommit(ListenerMethod listener) {
        return refusal(
                listener,
                "is an @SqsListener whose container deletes the message when the method returns (its message carries"
                        + " no acknowledgement callback: acknowledgementMode ON_SUCCESS or ALWAYS), but it was called in"
                        + " a transaction that is still open then, so the message would be deleted before its claim and"
                        + " effect commit; refused, the message comes back after its visibility timeout. Set"
                        + " @SqsListener(acknowledgementMode = \"MANUAL\") (or MANUAL on its container factory) and"
                        + " acknowledge through an Acknowledgement parameter or Acknowledgement.acknowledge(message)"
                        + " (once deletes the message after that transaction commits), or call the listener outside"
                        + " any transaction");
    }

    /**
     * A message polled by a {@code PubSubMessageSource} in {@code AckMode.AUTO} or {@code AUTO_ACK}, whose adapter
     * acks it when the flow returns (through the callback on the message, unless acknowledged by then), handed to
     * the method in a transaction still open at that return (a transactional poller's, a caller's): refused before
     * the claim, and so before the body. The claim and effect would commit after that ack, so a rollback or a failed
     * commit would lose the message, and a body's nack would be followed by the adapter's ack. Once cannot hold the
     * ack back: settling the callback itself is sending it, and the Pub/Sub callback cannot turn auto-ack off
     * ({@code noAutoAck} is unsupported). Refused, the adapter nacks the message in {@code AUTO} (in {@code
     * AUTO_ACK} it comes back when its ack deadline lapses). Outside a transaction once commits its own before the
     * return and settles the message through the callback, which the adapter then leaves alone.
     */
    private static InvalidConfigurationException polledAckedBeforeTheCommit(ListenerMethod listener) {
        return refusal(
                listener,
                "got a message from a PubSubMessageSource in AckMode AUTO or AUTO_ACK, whose polling adapter acks it"
                        + " when the flow returns, but it was called in a transaction still open then (a transactional"
                        + " poller's, or a caller's), so the message would be acked before its claim and effect commit;"
                        + " refused, the message is not acked. Set PubSubMessageSource.setAckMode(AckMode.MANUAL) (once"
                        + " acks it after that transaction commits and nacks it after a rollback), or poll without a"
                        + " transaction (once commits its own before the flow returns)");
    }

    /**
     * The refusal, logged, of a call of {@code listener} before its claim: the message names the listener and its
     * consumer, then says {@code why} (what the call is, what it would lose, the fix).
     */
    private static InvalidConfigurationException refusal(ListenerMethod listener, String why) {
        InvalidConfigurationException refused = new InvalidConfigurationException("@IdempotentListener "
                + listener.method().getDeclaringClass().getSimpleName() + "."
                + listener.method().getName()
                + " (consumer '" + listener.consumer() + "') " + why);
        log.error("{}", refused.getMessage());
        return refused;
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
                outcome.toLowerCase(Locale.ROOT),
                failure);
    }

    /** Carries a failed outcome out of the transaction callback, so the template rolls back. */
    static final class Failed extends RuntimeException {
        final transient Outcome outcome;

        Failed(Outcome outcome) {
            super(null, null, false, false);
            this.outcome = outcome;
        }
    }

    private IdempotentConsumer consumer(String name) {
        return built(consumers, name, (o, n) -> o.consumer(n, IdempotentListenerInterceptor::handle));
    }

    private IdempotentConsumer ownTransactionConsumer(String name) {
        return built(
                ownTransactionConsumers,
                name,
                (o, n) -> o.ownTransactionConsumer(n, IdempotentListenerInterceptor::handle));
    }

    void buildAtCommitConsumers() {
        for (ListenerMethod m : methods.values()) {
            if (m.atCommit()) {
                atCommitConsumer(m.consumer());
            }
        }
    }

    private IdempotentConsumer atCommitConsumer(String name) {
        return built(atCommitConsumers, name, (o, n) -> o.atCommitConsumer(n, IdempotentListenerInterceptor::handle));
    }

    /** The consumer {@code name} of {@code cache}, made by {@code make} on first use. */
    private IdempotentConsumer built(
            Map<String, IdempotentConsumer> cache,
            String name,
            BiFunction<OnceSpring, String, IdempotentConsumer> make) {
        IdempotentConsumer known = cache.get(name); // no capturing lambda allocated on every call
        return known != null ? known : cache.computeIfAbsent(name, n -> make.apply(once(), n));
    }

    private OnceSpring once() {
        OnceSpring o = once;
        if (o == null) {
            o = beanFactory.getBean(OnceSpring.class);
            once = o;
        }
        return o;
    }
}
