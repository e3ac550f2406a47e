package dev.once.spring;

import java.time.Duration;

/**
 * The {@code Acknowledgment} a body sees: {@code acknowledge()} takes effect after the transaction
 * commits (and never when it rolls back); {@code nack} rolls the transaction back, then nacks.
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
 */
final class AfterCommitAcknowledgment {
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

    /**
     * After the call returned: forwards a nack, or acknowledges what the body acknowledged (and a duplicate, whose
     * body never ran, when {@code duplicate}): now if the call's transaction has ended (it was the call's own), at
     * the end of the joined transaction otherwise, only if it commits and no rollback to a savepoint undid the call.
     *
     * @param key once's state of transactions on the listener's {@code DataSource}
     */
    void settle(boolean duplicate, PhysicalTransaction.Key key) {
        proxy.settled = true;
        if (proxy.nack != null) {
            ((org.springframework.kafka.support.Acknowledgment) delegate).nack(proxy.nack);
        } else if (duplicate || proxy.acknowledged) {
            org.springframework.kafka.support.Acknowledgment ack =
                    (org.springframework.kafka.support.Acknowledgment) delegate;
            PhysicalTransaction.afterCallCommits(key, committed -> {
                if (committed) {
                    ack.acknowledge();
                }
            });
        }
    }

    /** The call ended without settling (it failed): a later {@code acknowledge()} is the application's own, made as called. */
    void ended() {
        proxy.settled = true;
    }

    /**
     * A copy found applied after its body ran and rolled back ({@link IdempotentListener#claimTiming()}):
     * acknowledged now, whatever the body asked (its {@code acknowledge()} waited for a commit that did not
     * come, its {@code nack} asked to see again a message that is done).
     */
    void acknowledgeDuplicate() {
        ((org.springframework.kafka.support.Acknowledgment) delegate).acknowledge();
    }

    private static final class KafkaAck implements org.springframework.kafka.support.Acknowledgment {
        private final org.springframework.kafka.support.Acknowledgment delegate;
        volatile boolean acknowledged;
        // the call returned or failed: an acknowledge() now (an application's asynchronous one) goes through as made
        volatile boolean settled;
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
            if (settled) {
                delegate.acknowledge();
            } else {
                acknowledged = true; // made by settle, once the call returned
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
