package dev.once;

import java.util.List;

/**
 * The business effect of a whole batch, applied set-wise: called once per transaction with the
 * deliveries that transaction claimed, so the effect can be one statement
 * ({@code UPDATE … FROM unnest(?::bigint[], ?::bigint[])}) or one JDBC batch instead of one round
 * trip per event. The alternative to the per-event {@link Handler} on
 * {@link IdempotentConsumerBuilder#batchHandler}; {@link IdempotentConsumer#process} calls it with
 * a list of one.
 *
 * <pre>{@code
 * BatchHandler credit = (claimed, tx) -> {
 *     TreeMap<Long, Long> perAccount = new TreeMap<>();          // pre-aggregated and sorted
 *     for (Delivery d : claimed) perAccount.merge(accountOf(d), amountOf(d), Long::sum);
 *     try (PreparedStatement ps = tx.connection().prepareStatement(
 *             "UPDATE account a SET balance = a.balance + d.amount"
 *             + " FROM unnest(?::bigint[], ?::bigint[]) AS d(id, amount) WHERE a.id = d.id")) {
 *         ps.setArray(1, tx.connection().createArrayOf("bigint", perAccount.keySet().toArray()));
 *         ps.setArray(2, tx.connection().createArrayOf("bigint", perAccount.values().toArray()));
 *         ps.executeUpdate();
 *     }
 * };
 * }</pre>
 *
 * <p>The list holds each claimed event once (in-batch copies and events an earlier transaction
 * applied are already removed), in delivery order, and is never empty. Everything written through
 * {@link BatchTx#connection()} commits with the claims of exactly these events, or not at all.
 *
 * <p>Failure contract: if the handler throws, the transaction is rolled back and the batch is
 * split in halves, each half in a transaction of its own, until the failing delivery stands
 * alone (about {@code 2·log2(n)} transactions for one poison message in {@code n}); the handler is
 * therefore called again with sublists of the same deliveries, and must not assume it sees a
 * delivery only once across calls (only once across commits). Throw
 * {@link PermanentFailureException} for a message that can never succeed; a deadlock or
 * serialization failure rolls back and retries the same list. Same rules as {@link Handler}:
 * no external calls (use {@link BatchTx#outbox(Delivery)}), no commit, rollback or close.
 */
@FunctionalInterface
public interface BatchHandler {

    void handle(List<Delivery> claimed, BatchTx tx) throws Exception;
}
