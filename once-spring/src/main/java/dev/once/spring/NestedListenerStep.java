package dev.once.spring;

import java.util.List;
import org.springframework.transaction.support.ResourceHolderSupport;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A Kafka {@link IdempotentListener} call (or a batch listener's batch) in a transaction already open on this thread
 * (a container's, a caller's), run as a {@code NESTED} step: a savepoint, rolled back to undo a try alone (a claim
 * that timed out waiting for another holder, a batch that failed before its records are retried one by one). Spring
 * resets the JDBC connection's rollback-only mark on a rollback to a savepoint, not the marks once's failed try set
 * on the other resources bound (a container's Kafka transaction among them, which would then abort at commit):
 * {@link #snapshot()} before each try notes the holders not marked yet, {@link #undoMarks()} after a rolled-back try
 * clears what it marked. Made by {@link OnceSpring#nestedStep}, one per call; used by the call's thread.
 */
final class NestedListenerStep {

    private final TransactionTemplate template;
    private List<ResourceHolderSupport> unmarked = List.of();

    NestedListenerStep(TransactionTemplate template) {
        this.template = template;
    }

    /** Propagation NESTED on once's transaction manager. */
    TransactionTemplate template() {
        return template;
    }

    /** Before a try: the holders bound now that are not rollback-only, the ones a failed try's marks are undone on. */
    void snapshot() {
        unmarked = SpringTransactionProvider.unmarkedHolders();
    }

    /**
     * After a try rolled back to its savepoint: clears the rollback-only marks it set on the holders of the last
     * {@link #snapshot()}.
     *
     * @return false if a mark cannot be cleared (a JPA transaction marked rollback-only stays so): the open
     *     transaction must roll back, and the call fail
     */
    boolean undoMarks() {
        return SpringTransactionProvider.unmark(unmarked);
    }
}
