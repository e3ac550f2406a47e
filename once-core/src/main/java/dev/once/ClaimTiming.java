package dev.once;

/**
 * When a transaction the engine owns claims the event id: before the handler (the default) or with
 * the commit. Set with {@link IdempotentConsumerBuilder#claimTiming}; it applies to
 * {@link IdempotentConsumer#process}. A batch ({@code processBatch}, {@code processInOrder}) always
 * claims first: its one claim statement is shared by the whole batch.
 */
public enum ClaimTiming {
    /**
     * Claim, then run the handler, then commit: a duplicate is found before the handler runs, so
     * the handler runs only for a delivery that holds the claim, and whatever it does outside the
     * database (an HTTP call without an idempotency key, an e-mail) happens only then. Three round
     * trips per delivery on PostgreSQL (the claim with {@code BEGIN}, the handler's, the
     * {@code COMMIT}). The default.
     */
    BEFORE_HANDLER,
    /**
     * Run the handler first, then send the claim as a plain insert in the commit's own round trip
     * ({@code INSERT …; COMMIT} on PostgreSQL): a delivery costs the handler's round trips and one
     * more, one fewer than {@link #BEFORE_HANDLER}. A copy claimed before makes the insert fail on
     * the inbox's key, and its transaction, with everything its handler wrote and the outbox rows
     * it added, rolls back; a copy running at the same time waits on the key and then fails the same
     * way. Whenever a delivery does not commit (its handler threw, a statement failed, the insert or
     * the commit was refused), the engine reads the inbox once: a claim there means another copy
     * committed the event, and the delivery is {@link Outcome.Status#DUPLICATE}, not a failure (a
     * handler that throws because the work already exists, a row with the same business key, is
     * the expected case). Only a claim seen there makes a DUPLICATE.
     *
     * <p>The contract this asks of the handler: <b>every effect is a statement on
     * {@link Tx#connection()} or a row added to {@link Tx#outbox()}</b>, because the handler of a
     * duplicate runs and only the transaction's rollback undoes it. An external call made from the
     * handler is made again for every copy; a procedure that commits on its own (MariaDB allows one)
     * commits the handler's work without the claim. Refused at {@link IdempotentConsumerBuilder#build()}
     * where it cannot hold: with a joined transaction (a duplicate found at the caller's commit would
     * roll back the caller's work), unless its provider begins one for each delivery alone
     * ({@link dev.once.tx.TransactionProvider#dedicated()}, as Spring's {@code @IdempotentListener} with
     * this setting does, on PostgreSQL only), with a {@linkplain IdempotentConsumerBuilder#lockTimeout lock timeout}
     * (it bounds the claim's wait before the handler) and with a {@link MismatchPolicy} other than
     * {@link MismatchPolicy#OFF} (the stored fingerprint is read when the claim finds the id taken).
     */
    AT_COMMIT
}
