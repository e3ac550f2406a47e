package dev.once.spring;

import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The acknowledgement a body sees, Spring Kafka's {@code Acknowledgment} or Spring Cloud AWS's SQS
 * {@code Acknowledgement}: {@code acknowledge()} takes effect after the transaction commits (and never when it rolls
 * back); Kafka's {@code nack} rolls the transaction back, then nacks.
 *
 * <p>The body's {@code acknowledge()} is only noted; the call {@link #settle settles} it once it returned. In a
 * transaction the call began, that is after the commit: the acknowledgement is made then. In a transaction the
 * call joined (a container's, a caller's {@code @Transactional}), it waits for that transaction's end in once's
 * state of it, which follows its savepoints: a Spring {@code afterCommit} synchronization registered by the body
 * (as before) outlived a rollback to a savepoint (the call's own NESTED step when the body failed after
 * acknowledging, a batch rolled back before its records were retried one by one, a caller's NESTED scope rolled
 * back around the call), so a record whose claim was undone was acknowledged when the outer transaction
 * committed; and a duplicate of a claim the open transaction held was acknowledged at once, before that
 * transaction committed or rolled back ({@code SpringCallerTransactionPropertyTest}).
 *
 * <p>SQS ({@code @SqsListener} with {@code acknowledgementMode = MANUAL}): the {@code Acknowledgement} argument, its
 * {@code acknowledgeAsync()} (whose future is complete when returned: it records the acknowledgement, the delete
 * follows the commit) and {@code Acknowledgement.acknowledge(message)} on the {@code Message} argument (whose
 * {@code AcknowledgementCallback} header is replaced) are deferred alike. Made at once, they deleted the message
 * before the claim and the effect committed: a body that acknowledged and then failed, a commit that failed, or a
 * caller's scope rolled back around the call lost the message, which SQS never hands out again
 * ({@code SqsAcknowledgementCallerTransactionPropertyTest}). A duplicate, whose body never acknowledges, is deleted by
 * once after the commit, in MANUAL mode only (a call that carries the callback, wherever the mode was set): in the
 * container-acknowledged modes the container deletes it.
 */
final class AfterCommitAcknowledgment {
    static final Object IGNORED = ListenerMessages.SPRING_KAFKA ? KafkaAck.ignored() : null;

    // the listener path logs under one name, as it did when this class was nested in the interceptor
    private static final Logger log = LoggerFactory.getLogger(IdempotentListenerInterceptor.class);

    /** The acknowledgement as the container would have made it. */
    private final Runnable send;
    // Kafka's Acknowledgment, for a nack; null for SQS
    private final Object kafka;
    // a duplicate, whose body never ran, is acknowledged by once: the container would not delete it
    private final boolean acknowledgesDuplicate;
    volatile boolean acknowledged;
    // the call returned or failed: an acknowledge() now (an application's asynchronous one) goes through as made
    volatile boolean settled;
    volatile Duration nack;

    private AfterCommitAcknowledgment(Runnable send, Object kafka, boolean acknowledgesDuplicate) {
        this.send = send;
        this.kafka = kafka;
        this.acknowledgesDuplicate = acknowledgesDuplicate;
    }

    /** Replaces the acknowledgement argument (or header) in {@code args} with a deferring one; null if there is none. */
    static AfterCommitAcknowledgment wrap(ListenerMethod listener, Object[] args) {
        Object delegate = listener.ackIndex() >= 0 ? args[listener.ackIndex()] : null;
        if (delegate != null && delegate != IGNORED && ListenerMessages.SPRING_KAFKA && KafkaAck.isKafka(delegate)) {
            AfterCommitAcknowledgment a = new AfterCommitAcknowledgment(KafkaAck.sender(delegate), delegate, true);
            args[listener.ackIndex()] = new KafkaAck(a, delegate);
            return a;
        }
        if (ListenerMessages.SPRING_SQS && (delegate != null || listener.sqs())) {
            return Sqs.wrap(listener, args);
        }
        return null;
    }

    Duration nacked() {
        return nack;
    }

    /** The body acknowledged: noted until the call settles, made as called after it. */
    void acknowledge() {
        if (settled) {
            send.run();
        } else {
            acknowledged = true; // made by settle, once the call returned
        }
    }

    /**
     * After the call returned: forwards a nack, or acknowledges what the body acknowledged (and a duplicate, whose
     * body never ran, when {@code duplicate}): now if the call's transaction has ended (it was the call's own), at
     * the end of the joined transaction otherwise, only if it commits and no rollback to a savepoint undid the call.
     *
     * @param key once's state of transactions on the listener's {@code DataSource}
     */
    void settle(boolean duplicate, PhysicalTransaction.Key key) {
        settled = true;
        if (nack != null) {
            ((org.springframework.kafka.support.Acknowledgment) kafka).nack(nack);
        } else if ((duplicate && acknowledgesDuplicate) || acknowledged) {
            PhysicalTransaction.afterCallCommits(key, committed -> {
                if (committed) {
                    send.run();
                }
            });
        }
    }

    /** The call ended without settling (it failed): a later {@code acknowledge()} is the application's own, made as called. */
    void ended() {
        settled = true;
    }

    /**
     * A copy found applied after its body ran and rolled back ({@link IdempotentListener#claimTiming()}):
     * acknowledged now, whatever the body asked (its {@code acknowledge()} waited for a commit that did not
     * come, its {@code nack} asked to see again a message that is done).
     */
    void acknowledgeDuplicate() {
        settled = true;
        if (acknowledgesDuplicate) {
            send.run();
        }
    }

    private static final class KafkaAck implements org.springframework.kafka.support.Acknowledgment {
        private final AfterCommitAcknowledgment deferred;
        private final org.springframework.kafka.support.Acknowledgment delegate;

        KafkaAck(AfterCommitAcknowledgment deferred, Object delegate) {
            this.deferred = deferred;
            this.delegate = (org.springframework.kafka.support.Acknowledgment) delegate;
        }

        static boolean isKafka(Object argument) {
            return argument instanceof org.springframework.kafka.support.Acknowledgment;
        }

        static Runnable sender(Object delegate) {
            return ((org.springframework.kafka.support.Acknowledgment) delegate)::acknowledge;
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
            deferred.acknowledge();
        }

        @Override
        public void nack(Duration sleep) {
            deferred.nack = sleep;
        }

        @Override
        public boolean isOutOfOrderCommit() {
            return delegate.isOutOfOrderCommit();
        }
    }

    /** Spring Cloud AWS SQS, loaded only with spring-cloud-aws-sqs on the class path. */
    private static final class Sqs {
        private static final String CALLBACK = io.awspring.cloud.sqs.MessagingHeaders.ACKNOWLEDGMENT_CALLBACK_HEADER;

        /**
         * Defers the {@code Acknowledgement} argument and the {@code AcknowledgementCallback} header of the
         * {@code Message} argument; null when the call has neither.
         */
        @SuppressWarnings("unchecked")
        static AfterCommitAcknowledgment wrap(ListenerMethod listener, Object[] args) {
            Object ack = listener.ackIndex() >= 0 ? args[listener.ackIndex()] : null;
            Object message = listener.messageIndex() >= 0 ? args[listener.messageIndex()] : null;
            var original = message instanceof org.springframework.messaging.Message<?> m
                            && m.getHeaders().get(CALLBACK)
                                    instanceof
                                    io.awspring.cloud.sqs.listener.acknowledgement.AcknowledgementCallback<?> c
                    ? (io.awspring.cloud.sqs.listener.acknowledgement.AcknowledgementCallback<Object>) c
                    : null;
            Runnable send;
            if (ack instanceof io.awspring.cloud.sqs.listener.acknowledgement.Acknowledgement a) {
                send = () -> sent(a.acknowledgeAsync());
            } else if (original != null) {
                var m = (org.springframework.messaging.Message<Object>) message;
                send = () -> sent(original.onAcknowledge(m));
            } else {
                return null;
            }
            // An Acknowledgement or the callback header: the container is in MANUAL mode (it resolves and sets them
            // in no other), so it deletes nothing itself, a duplicate included: once does, after the commit.
            AfterCommitAcknowledgment deferred = new AfterCommitAcknowledgment(send, null, true);
            if (ack instanceof io.awspring.cloud.sqs.listener.acknowledgement.Acknowledgement) {
                args[listener.ackIndex()] = new io.awspring.cloud.sqs.listener.acknowledgement.Acknowledgement() {
                    @Override
                    public void acknowledge() {
                        deferred.acknowledge();
                    }

                    @Override
                    public java.util.concurrent.CompletableFuture<Void> acknowledgeAsync() {
                        deferred.acknowledge();
                        return java.util.concurrent.CompletableFuture.completedFuture(null);
                    }
                };
            }
            if (original != null) {
                args[listener.messageIndex()] =
                        withCallback((org.springframework.messaging.Message<?>) message, deferred);
            }
            return deferred;
        }

        /**
         * {@code message} with an {@code AcknowledgementCallback} header that defers to {@code deferred}, and the
         * same id: Spring Cloud AWS's id is the SQS message id ({@code MessageBuilder} would make a new one).
         */
        private static org.springframework.messaging.Message<?> withCallback(
                org.springframework.messaging.Message<?> message, AfterCommitAcknowledgment deferred) {
            java.util.Map<String, Object> headers = new java.util.HashMap<>(message.getHeaders());
            headers.put(CALLBACK, new io.awspring.cloud.sqs.listener.acknowledgement.AcknowledgementCallback<Object>() {
                @Override
                public java.util.concurrent.CompletableFuture<Void> onAcknowledge(
                        org.springframework.messaging.Message<Object> m) {
                    deferred.acknowledge();
                    return java.util.concurrent.CompletableFuture.completedFuture(null);
                }

                @Override
                public java.util.concurrent.CompletableFuture<Void> onAcknowledge(
                        java.util.Collection<org.springframework.messaging.Message<Object>> messages) {
                    deferred.acknowledge(); // the one message of this call (a batch listener is refused)
                    return java.util.concurrent.CompletableFuture.completedFuture(null);
                }
            });
            org.springframework.messaging.MessageHeaders same = new org.springframework.messaging.MessageHeaders(
                    headers, message.getHeaders().getId(), message.getHeaders().getTimestamp()) {};
            return org.springframework.messaging.support.MessageBuilder.createMessage(message.getPayload(), same);
        }

        private static void sent(java.util.concurrent.CompletableFuture<Void> delete) {
            delete.whenComplete((ok, e) -> {
                if (e != null) {
                    // the message comes back when its visibility timeout runs out; once absorbs the copy
                    log.warn("deferred SQS acknowledgement failed: {}", e.toString());
                }
            });
        }
    }
}
