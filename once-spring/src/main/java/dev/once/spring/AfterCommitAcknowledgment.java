package dev.once.spring;

import java.time.Duration;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The {@code Acknowledgment} a body sees: {@code acknowledge()} takes effect after the transaction
 * commits (and never when it rolls back); {@code nack} rolls the transaction back, then nacks.
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

    /** After the transaction: acknowledge a duplicate (its body never ran), forward a nack. */
    void settle(boolean acknowledge) {
        if (proxy.nack != null) {
            ((org.springframework.kafka.support.Acknowledgment) delegate).nack(proxy.nack);
        } else if (acknowledge && !proxy.acknowledged) {
            ((org.springframework.kafka.support.Acknowledgment) delegate).acknowledge();
        }
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
