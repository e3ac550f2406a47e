package dev.once.cli.demo;

/** The real sources of duplicate deliveries the demo can cause, one per button after "deliver". */
enum Fault {
    /** The producer publishes the same event twice (a retry after a lost ack). */
    DOUBLE_PUBLISH("double publish"),
    /** The consumer commits to the database, then dies before committing its offset; its replacement re-reads. */
    CRASH_IN_ACK_GAP("redelivered after a crash in the ack gap"),
    /** A batch takes longer than max.poll.interval.ms: the group rebalances and another worker re-reads it. */
    SLOW_BATCH_REBALANCE("redelivered after a rebalance"),
    /** Two workers receive the same event at the same moment. */
    CONCURRENT("concurrent delivery");

    final String reason;

    Fault(String reason) {
        this.reason = reason;
    }
}
