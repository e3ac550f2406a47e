package dev.once.spring;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A consumer that joins the Spring transaction, called in a transaction of the template's own for
 * each delivery, exactly as an {@link IdempotentListener} method is: a failed outcome rolls it back,
 * and the outcome is the one after the commit (a commit that fails is {@code FAILED_RETRYABLE}).
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
        try {
            return template.execute(status -> {
                Outcome o = joined.process(delivery);
                if (!o.shouldAcknowledge()) {
                    status.setRollbackOnly(); // nothing of a failed delivery commits, the claim included
                }
                return o;
            });
        } catch (TransactionException | org.springframework.dao.DataAccessException e) {
            return new Outcome(delivery.eventId(), Outcome.Status.FAILED_RETRYABLE, e);
        }
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
