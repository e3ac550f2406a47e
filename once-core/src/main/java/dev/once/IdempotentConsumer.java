package dev.once;

import java.util.ArrayList;
import java.util.List;

/**
 * Processes deliveries so that each event's effect is applied exactly once, however often the
 * broker delivers it. The one rule, in one transaction:
 *
 * <pre>
 *     claim the producer's event id  ─┐
 *     apply the business effect       ├─ one database transaction
 *     enqueue external effects (outbox)┘
 *     commit  →  then, and only then, the caller acknowledges (by the returned {@link Outcome})
 * </pre>
 *
 * <p>Invariants the engine keeps:
 * <ul>
 *   <li>The claim is an atomic insert under the primary key {@code (consumer, event_id)}, never a
 *       preliminary read; a concurrent duplicate waits on it and then finds it taken.</li>
 *   <li>{@code APPLIED} is reported only for a transaction the database committed with the claim in
 *       it: after the handler the engine checks that its claim is still part of the open
 *       transaction (PostgreSQL: in the commit's own round trip), so a swallowed failed statement, a
 *       deadlock that rolled the claim back, or a commit behind its back is never acknowledged. With
 *       {@link ClaimTiming#AT_COMMIT} the claim is the last statement before the commit instead, and a
 *       delivery that did not commit is reported a duplicate only when the inbox holds the claim.</li>
 *   <li>The handler cannot end the transaction: transaction control through {@link Tx#connection()}
 *       is refused (see there for the list) and the delivery rolled back.</li>
 *   <li>Any failure rolls back claim and effect together; nothing is half-applied. Deadlocks and
 *       serialization failures are retried by a {@link RetryPolicy}.</li>
 *   <li>Every transaction goes through one seam ({@link dev.once.tx.TransactionProvider}): owned
 *       ({@code dataSource(ds)}), or joined to the caller's, where outcomes are final only after the
 *       caller's commit and reach the {@link OutcomeListener} from it.</li>
 * </ul>
 *
 * <pre>{@code
 * IdempotentConsumer billing = IdempotentConsumer.builder()
 *     .dataSource(ds).consumer("billing").handler((d, tx) -> credit(tx.connection(), d))
 *     .build();
 * Outcome o = billing.process(delivery);
 * if (o.shouldAcknowledge()) ack(); else if (o.retryable()) nack(); else deadLetter();
 * }</pre>
 *
 * <p>Thread-safe: any number of threads may call it at once. It holds no resources of its own;
 * connections come from the {@code DataSource} (or the provider) for one transaction at a time.
 */
public interface IdempotentConsumer {

    /** Starts a builder; {@code dataSource}, {@code consumer} and {@code handler} are required. */
    static IdempotentConsumerBuilder builder() {
        return new IdempotentConsumerBuilder();
    }

    /** The consumer name that scopes the claims. */
    String consumer();

    /** The claim primitive this consumer uses, for callers that manage a transaction themselves. */
    Inbox inbox();

    /**
     * Processes one delivery in one transaction. Never throws for a failure of the handler or
     * the database: those become {@link Outcome.Status#FAILED_RETRYABLE} or
     * {@link Outcome.Status#FAILED_PERMANENT} with the cause attached, with nothing applied.
     *
     * @throws NullPointerException if {@code delivery} is null
     */
    Outcome process(Delivery delivery);

    /**
     * Processes deliveries in one transaction: ids deduplicated in memory (the first occurrence
     * wins, later copies are {@link Outcome.Status#DUPLICATE} of it), claimed with one statement
     * in sorted order, the handler run for the claimed ones in delivery order (or the
     * {@link BatchHandler} once with all of them), one commit. If the handler fails or a claim
     * waits too long, the batch is rolled back and split (around the failing delivery when the
     * per-event handler names it, else in halves), each part in a transaction of its own, until
     * the failing delivery stands alone: a poison message fails alone in about {@code 2·log2(n)}
     * transactions and nothing is applied twice.
     *
     * @return one outcome per delivery, in the order given
     */
    List<Outcome> processBatch(List<Delivery> deliveries);

    /**
     * As {@link #processBatch}, for deliveries whose effects must follow the list order (the
     * messages of one FIFO message group): the longest prefix that goes through is applied, in
     * transactions that take the batch whole or split it as {@code processBatch} does, and nothing
     * after the first delivery that is not {@linkplain Outcome#shouldAcknowledge() acknowledged}
     * runs: those after it come back {@link Outcome.Status#FAILED_RETRYABLE} ("held back"), later
     * copies of an event included (they do not take their first's outcome), so no effect ever precedes
     * that of an earlier delivery and the caller, settling that delivery alone and running the rest
     * again, counts each of the rest once. This default runs one delivery per
     * transaction; the engine's own consumer runs the batch in one.
     *
     * @return one outcome per delivery, in the order given
     */
    default List<Outcome> processInOrder(List<Delivery> deliveries) {
        List<Outcome> outcomes = new ArrayList<>(deliveries.size());
        Outcome stop = null;
        for (Delivery d : deliveries) {
            if (stop != null) {
                outcomes.add(heldBack(d, stop));
                continue;
            }
            Outcome o = process(d);
            outcomes.add(o);
            if (!o.shouldAcknowledge()) {
                stop = o;
            }
        }
        return outcomes;
    }

    /**
     * As {@link #processInOrder(List)}, and nothing is applied at or behind {@code positions}' stream's stored
     * position: the engine stores, in the transaction that applies deliveries of the run, the position of the
     * last of them, and refuses one whose position the stream has already passed with
     * {@link Outcome.Status#FAILED_PERMANENT} (the queue gave up on it and its successors were applied; it
     * is not applied after them). Duplicates are duplicates wherever they stand. In a transaction the caller
     * opened, the run is one transaction as with {@link #processInOrder(List)}, and a refusal rolls it back. This
     * default, for an implementation without the engine's tables, does not keep positions.
     *
     * @param positions one per delivery
     * @return one outcome per delivery, in the order given
     * @throws IllegalArgumentException if {@code positions} has not one position per delivery
     * @throws IllegalStateException (the engine's consumer) when another transaction of the calling thread,
     *     open but not the one this run takes place in (suspended by Spring's {@code REQUIRES_NEW} or {@code
     *     NOT_SUPPORTED} inside it, or the caller's around a consumer of its own transactions), moved the same
     *     stream: it holds the position's row lock until it ends (or rolls back to a savepoint set before the
     *     move), so the run would wait for ever; nothing ran
     */
    default List<Outcome> processInOrder(List<Delivery> deliveries, StreamPositions positions) {
        if (positions.positions().size() != deliveries.size()) {
            throw new IllegalArgumentException(positions.positions().size() + " positions of stream '"
                    + positions.stream() + "' for " + deliveries.size() + " deliveries: expected one per delivery");
        }
        return processInOrder(deliveries);
    }

    /** The outcome of a delivery not run because {@code first}, earlier in its ordered list, was not acknowledged. */
    private static Outcome heldBack(Delivery d, Outcome first) {
        return new Outcome(
                d.eventId(),
                Outcome.Status.FAILED_RETRYABLE,
                new RetryableException(
                        "held back: '" + first.eventId() + "' before it was not acknowledged (" + first.tag()
                                + "); ordered deliveries take effect in order",
                        first.failure()));
    }
}
