package dev.once.spring;

import java.lang.reflect.Method;

/**
 * Spring Cloud GCP's acknowledgeable Pub/Sub message, settled by once after the transaction: acked
 * after a commit (applied or duplicate), nacked after a rollback, so a message is never acked before
 * its effect is durable and a failed one comes again at once instead of when its lease runs out.
 * Pub/Sub's template and channel adapter hand the same message to nobody else to settle: with
 * {@code PubSubTemplate.subscribe} nothing would, with a {@code PubSubInboundChannelAdapter} in
 * {@code AckMode.AUTO} its own ack or nack after the listener returns is a no-op in the client
 * (the first reply of a message wins). The body sees a message whose {@code ack()} is deferred to
 * the commit and whose {@code nack()} rolls the transaction back; as an argument, and as the
 * {@code gcp_pubsub_original_message} header of a {@code Message} argument
 * ({@code GcpPubSubHeaders.getOriginalMessage}, the {@code AckMode.MANUAL} recipe). Their futures
 * are complete when returned, as the client's own are: they record the reply, they do not wait for
 * the server.
 *
 * <p>A message polled by a {@code PubSubMessageSource} also carries the source's {@code AcknowledgmentCallback}
 * (header {@code acknowledgmentCallback}), through which the polling adapter acks the message when the flow returns
 * ({@code AckMode.AUTO} and {@code AUTO_ACK}), unless the callback is acknowledged by then. Pulled messages are acked
 * one request each, so that ack would follow once's nack (the message lost) or repeat its ack; once therefore settles
 * such a message through that callback, which the adapter then leaves alone, and the body sees a callback whose
 * {@code acknowledge} is deferred like {@code ack()} ({@code ACCEPT}) or rolls back like {@code nack()}. The callback
 * settles as its mode says: in {@code AUTO_ACK} a rollback is not nacked, the message comes back when its ack
 * deadline lapses.
 */
final class AfterCommitPubSub implements java.lang.reflect.InvocationHandler {
    private final com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage message;
    // the polling source's AcknowledgmentCallback for the message (SourceCallback), or null
    private final Object callback;
    private volatile boolean nacked;
    private boolean settled;

    private AfterCommitPubSub(
            com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage message, Object callback) {
        this.message = message;
        this.callback = callback;
    }

    /** Replaces the Pub/Sub message in {@code args} (argument or header) with a deferring one; null if none. */
    static AfterCommitPubSub wrap(ListenerMethod listener, Object[] args) {
        if (!ListenerMessages.SPRING_PUBSUB) {
            return null;
        }
        Object handle = listener.pubSubIndex() >= 0
                ? args[listener.pubSubIndex()]
                : listener.messageIndex() >= 0 ? ListenerMessages.pubSubHandle(args[listener.messageIndex()]) : null;
        if (!(handle instanceof com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage m)) {
            return null;
        }
        Object spring = listener.messageIndex() >= 0 ? args[listener.messageIndex()] : null;
        Object callback = ListenerMessages.SPRING_INTEGRATION ? SourceCallback.of(spring, m) : null;
        AfterCommitPubSub a = new AfterCommitPubSub(m, callback);
        Object proxy = java.lang.reflect.Proxy.newProxyInstance(
                m.getClass().getClassLoader(),
                org.springframework.util.ClassUtils.getAllInterfacesForClass(m.getClass()),
                a);
        if (listener.pubSubIndex() >= 0) {
            args[listener.pubSubIndex()] = proxy;
        }
        if (listener.messageIndex() >= 0
                && listener.messageIndex() != listener.pubSubIndex()
                && spring instanceof org.springframework.messaging.Message<?> given
                && given.getHeaders().get(com.google.cloud.spring.pubsub.support.GcpPubSubHeaders.ORIGINAL_MESSAGE)
                        == m) {
            var replaced = org.springframework.messaging.support.MessageBuilder.fromMessage(given)
                    .setHeader(com.google.cloud.spring.pubsub.support.GcpPubSubHeaders.ORIGINAL_MESSAGE, proxy);
            if (callback != null) {
                replaced.setHeader(SourceCallback.HEADER, SourceCallback.deferring(a, callback));
            }
            args[listener.messageIndex()] = replaced.build();
        }
        return a;
    }

    /**
     * True when {@code message} was polled by a source whose adapter acks it when the flow returns (its
     * {@code AcknowledgmentCallback} auto-acks: {@code PubSubMessageSource} in {@code AckMode.AUTO} or
     * {@code AUTO_ACK}): once cannot hold that ack back past the return, so not to a transaction still open then.
     */
    static boolean ackedWhenTheFlowReturns(Object message) {
        return ListenerMessages.SPRING_INTEGRATION
                && message != null
                && ListenerMessages.pubSubHandle(message)
                        instanceof com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage m
                && SourceCallback.autoAcks(SourceCallback.of(message, m));
    }

    /** The container's message, as it came (not the deferring proxy the body sees). */
    com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage message() {
        return message;
    }

    boolean nacked() {
        return nacked;
    }

    /** After the transaction: ack after a commit, nack after a rollback or when the body nacked. */
    synchronized void settle(boolean committed) {
        if (settled) {
            return;
        }
        settled = true;
        boolean ack = committed && !nacked;
        if (callback != null) {
            SourceCallback.settle(callback, ack);
        } else if (ack) {
            message.ack();
        } else {
            message.nack();
        }
    }

    /**
     * After a call that returned (applied or duplicate): acked now if the call's transaction was its own and has
     * committed; in a transaction the call joined (a caller's {@code @Transactional}), at that transaction's end in
     * once's state of it, which follows its savepoints: acked if it commits and nothing undid the call, nacked
     * otherwise. Acked at once, as before, it was acked before the caller's commit, and lost if that rolled back.
     */
    void settleAfterCommit(PhysicalTransaction.Key key) {
        PhysicalTransaction.afterCallCommits(key, this::settle);
    }

    /** A copy found applied after its body ran and rolled back: acked, whatever the body asked. */
    synchronized void settleDuplicate() {
        if (!settled) {
            settled = true;
            if (callback != null) {
                SourceCallback.settle(callback, true);
            } else {
                message.ack();
            }
        }
    }

    @Override
    public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
        int arity = method.getParameterCount();
        switch (method.getName()) {
            case "ack" -> {
                if (arity == 0) {
                    return java.util.concurrent.CompletableFuture.completedFuture(null); // sent after commit
                }
            }
            case "nack" -> {
                if (arity == 0) {
                    nacked = true; // rolls the transaction back; sent after it
                    return java.util.concurrent.CompletableFuture.completedFuture(null);
                }
            }
            case "equals" -> {
                if (arity == 1) {
                    return proxy == args[0];
                }
            }
            case "hashCode" -> {
                if (arity == 0) {
                    return System.identityHashCode(proxy);
                }
            }
            default -> {}
        }
        try {
            return method.invoke(message, args);
        } catch (java.lang.reflect.InvocationTargetException e) {
            throw e.getCause();
        }
    }

    /** Spring Integration's acknowledgment callback, loaded only with spring-integration-core on the class path. */
    private static final class SourceCallback {
        // a compile-time constant: IntegrationMessageHeaderAccessor.ACKNOWLEDGMENT_CALLBACK
        static final String HEADER =
                org.springframework.integration.IntegrationMessageHeaderAccessor.ACKNOWLEDGMENT_CALLBACK;

        /** The callback a polling source put on {@code message} for the Pub/Sub message {@code original}, or null. */
        static Object of(Object message, Object original) {
            if (!(message instanceof org.springframework.messaging.Message<?> spring)) {
                return null;
            }
            var headers = spring.getHeaders();
            Object callback = headers.get(HEADER);
            return headers.get(com.google.cloud.spring.pubsub.support.GcpPubSubHeaders.ORIGINAL_MESSAGE) == original
                            && callback instanceof org.springframework.integration.acks.AcknowledgmentCallback
                    ? callback
                    : null;
        }

        static boolean autoAcks(Object callback) {
            return callback instanceof org.springframework.integration.acks.AcknowledgmentCallback c
                    && c.isAutoAck()
                    && !c.isAcknowledged();
        }

        static void settle(Object callback, boolean ack) {
            ((org.springframework.integration.acks.AcknowledgmentCallback) callback)
                    .acknowledge(
                            ack
                                    ? org.springframework.integration.acks.AcknowledgmentCallback.Status.ACCEPT
                                    : org.springframework.integration.acks.AcknowledgmentCallback.Status.REQUEUE);
        }

        /**
         * The callback the body sees: {@code ACCEPT} deferred to the commit (once acks after it), {@code REJECT} and
         * {@code REQUEUE} roll the transaction back, then nack. Acknowledged once the body called it, as the source's
         * would be; auto-ack as the source's.
         */
        static Object deferring(AfterCommitPubSub owner, Object callback) {
            var source = (org.springframework.integration.acks.AcknowledgmentCallback) callback;
            return new org.springframework.integration.acks.AcknowledgmentCallback() {
                private volatile boolean acknowledged;

                @Override
                public void acknowledge(Status status) {
                    if (status != Status.ACCEPT) {
                        owner.nacked = true;
                    }
                    acknowledged = true;
                }

                @Override
                public boolean isAcknowledged() {
                    return acknowledged;
                }

                @Override
                public boolean isAutoAck() {
                    return source.isAutoAck();
                }

                @Override
                public void noAutoAck() {
                    source.noAutoAck();
                }
            };
        }
    }
}
