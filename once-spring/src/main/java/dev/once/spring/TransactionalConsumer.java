package dev.once.spring;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.springframework.transaction.IllegalTransactionStateException;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A consumer that joins the Spring transaction, called in a transaction of the template's own for
 * each delivery, exactly as an {@link IdempotentListener} method is: a failed outcome rolls it back,
 * and the outcome is the one after the commit (a commit that fails is {@code FAILED_RETRYABLE}).
 *
 * <p>Called inside a transaction of the same transaction manager, it refuses (nothing runs) rather
 * than join it, which would return an outcome the caller can still roll back, or suspend it for a
 * {@code REQUIRES_NEW} one, which would commit the delivery apart from the caller's writes, take a
 * second connection per thread, and wait forever on a row the suspended caller has locked.
 */
final class TransactionalConsumer implements IdempotentConsumer {

    private final IdempotentConsumer joined;
    private final TransactionTemplate template;

    TransactionalConsumer(IdempotentConsumer joined, TransactionTemplate template) {
        this.joined = joined;
        this.template = template;
    }

    @Override
    public String consumer() {
        return joined.consumer();
    }

    @Override
    public Inbox inbox() {
        return joined.inbox();
    }

    @Override
    public Outcome process(Delivery delivery) {
        Objects.requireNonNull(delivery, "delivery");
        Outcome outcome;
        try {
            outcome = template.execute(status -> {
                if (!status.isNewTransaction()) {
                    return null; // the caller's: nothing runs, the participation commits nothing, refused below
                }
                Outcome o = joined.process(delivery);
                if (!o.shouldAcknowledge()) {
                    status.setRollbackOnly(); // nothing of a failed delivery commits, the claim included
                }
                return o;
            });
        } catch (TransactionException | org.springframework.dao.DataAccessException e) {
            return new Outcome(delivery.eventId(), Outcome.Status.FAILED_RETRYABLE, e);
        }
        if (outcome == null) {
            throw new IllegalTransactionStateException("transactionalConsumer '" + joined.consumer()
                    + "' runs each delivery in a transaction of its own and returns the outcome after its commit,"
                    + " but it was called inside transaction '"
                    + TransactionSynchronizationManager.getCurrentTransactionName()
                    + "' of the same transaction manager, whose rollback would undo an outcome already returned;"
                    + " event '" + delivery.eventId() + "' was not processed. To process it as part of that"
                    + " transaction use OnceSpring.consumer(...) (the outcome is final at the caller's commit and"
                    + " reported to the outcome listener then); to commit it on its own, call this consumer"
                    + " outside any transaction");
        }
        return outcome;
    }

    /** One transaction per delivery, in order: a joined consumer cannot split a failed batch's transaction. */
    @Override
    public List<Outcome> processBatch(List<Delivery> deliveries) {
        List<Outcome> outcomes = new ArrayList<>(deliveries.size());
        for (Delivery d : deliveries) {
            outcomes.add(process(d));
        }
        return outcomes;
    }
}
