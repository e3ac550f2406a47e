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
 */
final class AfterCommitPubSub implements java.lang.reflect.InvocationHandler {
    private final com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage message;
    private volatile boolean nacked;
    private boolean settled;

    private AfterCommitPubSub(com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage message) {
        this.message = message;
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
        AfterCommitPubSub a = new AfterCommitPubSub(m);
        Object proxy = java.lang.reflect.Proxy.newProxyInstance(
                m.getClass().getClassLoader(),
                org.springframework.util.ClassUtils.getAllInterfacesForClass(m.getClass()),
                a);
        if (listener.pubSubIndex() >= 0) {
            args[listener.pubSubIndex()] = proxy;
        }
        if (listener.messageIndex() >= 0
                && listener.messageIndex() != listener.pubSubIndex()
                && args[listener.messageIndex()] instanceof org.springframework.messaging.Message<?> spring
                && spring.getHeaders().get(com.google.cloud.spring.pubsub.support.GcpPubSubHeaders.ORIGINAL_MESSAGE)
                        == m) {
            args[listener.messageIndex()] = org.springframework.messaging.support.MessageBuilder.fromMessage(spring)
                    .setHeader(com.google.cloud.spring.pubsub.support.GcpPubSubHeaders.ORIGINAL_MESSAGE, proxy)
                    .build();
        }
        return a;
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
        if (committed && !nacked) {
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
            message.ack();
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
}
