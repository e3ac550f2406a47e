package dev.once.spring;

import dev.once.Outcome;
import dev.once.tx.TransactionHandle;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
 *
 * <p>Settled at the end of the transaction in once's state of it ({@link PhysicalTransaction}), which follows its
 * savepoints: "committed" means the transaction committed and no rollback to a savepoint undid the call. As a
 * Spring synchronization of its own it heard only the physical transaction's end, so a call in a caller's
 * {@code NESTED} step that rolled back (or a body that acknowledged and then failed there, Spring's rollback to
 * the step's savepoint clearing the failure's rollback-only mark) was acknowledged when the outer transaction
 * committed without its claim: the message was lost ({@code RabbitChannelCallerTransactionPropertyTest}).
 */
final class AfterCommitChannel implements java.lang.reflect.InvocationHandler, TransactionHandle.CompletionCallback {
    // the listener path logs under one name, as it did when this class was nested in the interceptor
    private static final Logger log = LoggerFactory.getLogger(IdempotentListenerInterceptor.class);

    private final com.rabbitmq.client.Channel channel;
    private final long tag;
    private final List<Object[]> acks = new ArrayList<>(); // {deliveryTag, multiple}
    private final List<Runnable> refusals = new ArrayList<>();
    private Outcome outcome;
    // the call waits for another transaction's claim (IN_PROGRESS) with the message in hand: a try that met it and
    // left nothing to send settles nothing at its end, the interceptor decides after it (nextTry or settleHeld)
    private boolean waits;
    private boolean held;

    private AfterCommitChannel(com.rabbitmq.client.Channel channel, long tag) {
        this.channel = channel;
        this.tag = tag;
    }

    /** Replaces the Channel argument in {@code args} with a deferring one; null if there is none. */
    static AfterCommitChannel wrap(ListenerMethod listener, Object[] args) {
        if (!(args[listener.channelIndex()] instanceof com.rabbitmq.client.Channel c)) {
            return null;
        }
        AfterCommitChannel a = new AfterCommitChannel(c, ListenerMessages.deliveryTag(args[listener.messageIndex()]));
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

    /** The call tries a message whose claim another transaction holds again, keeping it unsettled meanwhile. */
    void waitsForHolder() {
        waits = true;
    }

    /** True when the last try ended IN_PROGRESS with nothing to send: the message is still in hand, unsettled. */
    boolean held() {
        return held;
    }

    /** Another try follows the one that left the message in hand: it starts with nothing recorded. */
    void nextTry() {
        held = false;
        outcome = null;
        acks.clear();
        refusals.clear();
    }

    /** No try follows the one that left the message in hand: requeued now, as that try's end would have. */
    void settleHeld() {
        if (held) {
            held = false;
            send(() -> channel.basicNack(tag, false, true));
        }
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
                    refusals.add(
                            () -> send(() -> channel.basicNack((long) args[0], (boolean) args[1], (boolean) args[2])));
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

    /** Registers the settlement at the end of the current transaction, where the call's claim is made next. */
    void settleAtEnd(PhysicalTransaction.Key key) {
        PhysicalTransaction.current(key).joined().afterCompletion(this);
    }

    /** @param committed the transaction committed and no rollback to a savepoint undid the call */
    @Override
    public void completed(boolean committed) {
        if (!refusals.isEmpty()) {
            refusals.forEach(Runnable::run);
        } else if (committed) {
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
        } else if (waits && outcome != null && outcome.status() == Outcome.Status.IN_PROGRESS) {
            held = true; // the body did not run, or sent nothing: the interceptor tries again or settles it
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
