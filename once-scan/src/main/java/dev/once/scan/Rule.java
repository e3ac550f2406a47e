package dev.once.scan;

/**
 * The checks of {@code once scan}. Each has a stable id (SARIF {@code ruleId}), a one-line
 * description, the help that names the {@code once} API that fixes it, and the precision
 * measured over the fixture corpus (SARIF {@code properties.precision}).
 */
public enum Rule {
    DUPLICATE_EFFECT(
            "once/duplicate-effect",
            "Effect applied again on redelivery",
            "The consumer applies this effect before it acknowledges and records no dedupe, so a crash, timeout or"
                    + " rebalance in the ack gap delivers the message again and the effect runs twice.",
            "Claim the producer's event id with `IdempotentConsumer` (or `Inbox.claim` in your transaction) in the"
                    + " same transaction as the effect; send external calls through `tx.outbox()` with an idempotency key.",
            "high"),
    ACK_BEFORE_EFFECT(
            "once/ack-before-effect",
            "Message acknowledged before its effect",
            "The message is acknowledged (offset committed, message deleted, basicAck) before the effect is applied:"
                    + " a crash in between loses the effect for good.",
            "Acknowledge only after the database commit: call `IdempotentConsumer.process` and ack when"
                    + " `Outcome.shouldAcknowledge()` says so.",
            "high"),
    AUTO_ACK(
            "once/auto-ack",
            "Acknowledgement not tied to the effect",
            "Auto-commit, autoAck=true, acknowledge-mode none or a delete-always policy acknowledges on a timer or on"
                    + " receipt, whatever the handler did: a crash loses messages and a rebalance replays applied ones.",
            "Turn auto-acknowledgement off and acknowledge after commit: the once adapters (`KafkaConsumerRunner`,"
                    + " `RabbitConsumer`, `SqsConsumer`, `NatsConsumer`) commit only after `IdempotentConsumer` committed.",
            "high"),
    CHECK_THEN_ACT(
            "once/check-then-act",
            "Dedupe by check-then-act is a race",
            "The handler checks whether the event was seen (existsBy…, findBy….isPresent()) and then writes: two"
                    + " concurrent deliveries both pass the check and both apply the effect.",
            "Replace the check with a claim under a unique constraint: `Inbox.claim(connection, consumer, eventId)`"
                    + " or `IdempotentConsumer`, in the same transaction as the write.",
            "high"),
    WEAK_DEDUPE(
            "once/weak-dedupe",
            "Dedupe committed apart from the effect",
            "A dedupe is present but its record is not committed atomically with the effect (in-memory store, a"
                    + " separate metadata store, a duplicate detector switched off): a crash between the two re-applies"
                    + " or drops the effect.",
            "Record the event id in the same transaction as the effect: `IdempotentConsumer` claims it there.",
            "medium"),
    DUAL_WRITE(
            "once/dual-write",
            "Database write and publish without an outbox",
            "The handler writes to its database and publishes a message in two separate steps: a crash between them"
                    + " loses the message, a redelivery publishes it again with a new identity.",
            "Write the message with `tx.outbox().add(…)` in the same transaction; `OutboxRelay` publishes it after"
                    + " commit with a stable event id.",
            "high"),
    REMOTE_CALL_IN_TRANSACTION(
            "once/remote-call-in-transaction",
            "Remote call while a database transaction is open",
            "An HTTP or other remote call runs inside an open database transaction: it holds a connection and row"
                    + " locks for the length of the call, and a rollback after it cannot take the call back.",
            "Move the call out of the transaction: `tx.outbox().add(…)` records it and the relay makes it after commit"
                    + " with an idempotency key.",
            "high"),
    SELF_INVOCATION(
            "once/transactional-self-invocation",
            "@Transactional method called on this",
            "A @Transactional method is called on `this`, which bypasses the Spring proxy: the method runs without"
                    + " the transaction its annotation promises.",
            "Call it through the proxy (another bean) or use `IdempotentConsumer`, whose transaction does not depend"
                    + " on a proxy.",
            "high"),
    SLOW_CALL_IN_LEASE(
            "once/slow-call-in-lease",
            "Call that can outlive the lease",
            "A call without a timeout (or a sleep) runs inside a poll loop or batch handler: if it hangs past"
                    + " max.poll.interval.ms or the visibility timeout, the broker hands the message to another consumer"
                    + " while this one still works on it.",
            "Give the client connect and read timeouts well inside the lease, and keep the effect behind"
                    + " `IdempotentConsumer` so the second delivery conflicts instead of applying again.",
            "medium"),
    BATCH_OUTLIVES_LEASE(
            "once/batch-outlives-lease",
            "Batch large against the lease",
            "The batch size and the lease (max.poll.interval.ms, visibility timeout) leave little time per message"
                    + " for a handler that makes remote calls.",
            "Shrink the batch or lengthen the lease; claims by `IdempotentConsumer` make the overrun harmless.",
            "medium");

    private final String id;
    private final String title;
    private final String description;
    private final String fix;
    private final String precision;

    Rule(String id, String title, String description, String fix, String precision) {
        this.id = id;
        this.title = title;
        this.description = description;
        this.fix = fix;
        this.precision = precision;
    }

    /** The stable id, e.g. {@code once/duplicate-effect}. */
    public String id() {
        return id;
    }

    /** A short title. */
    public String title() {
        return title;
    }

    /** What goes wrong, in two sentences. */
    public String description() {
        return description;
    }

    /** The fix, naming the {@code once} API. */
    public String fix() {
        return fix;
    }

    /** SARIF precision: {@code very-high}, {@code high}, {@code medium}, {@code low}. */
    public String precision() {
        return precision;
    }

    /** The rule with this id. */
    public static Rule byId(String id) {
        for (Rule r : values()) {
            if (r.id.equals(id)) {
                return r;
            }
        }
        throw new IllegalArgumentException("no rule '" + id + "'");
    }
}
