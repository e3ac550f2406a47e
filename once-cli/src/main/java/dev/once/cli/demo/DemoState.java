package dev.once.cli.demo;

import java.util.List;

/**
 * What the page shows, at one moment: the truth (what customers paid), and per lane what its
 * ledger holds and what the provider charged. Serialized to JSON for the page. Immutable.
 *
 * @param charged    dollars customers really paid: each payment once
 * @param payments   payments made
 * @param delivered  deliveries the broker made to the once lane's consumers
 * @param duplicated deliveries of an event that had already been delivered to that lane
 * @param settled    every delivery processed and committed, every outbox row sent: the numbers are final
 * @param naive      the naive lane
 * @param once       the once lane
 * @param story      what the buttons did, newest first, one line each
 */
public record DemoState(
        long charged,
        int payments,
        long delivered,
        long duplicated,
        boolean settled,
        LaneState naive,
        LaneState once,
        List<String> story) {

    /**
     * One lane.
     *
     * @param deliveries       deliveries its consumers received
     * @param ledger           dollars in its ledger
     * @param overcount        dollars counted more than once
     * @param deduped          dollars of discarded duplicate deliveries
     * @param dedupedCount     discarded duplicate deliveries
     * @param providerCharges  cards charged at the provider on this lane's behalf
     * @param providerReplays  requests the provider answered from its idempotency record instead of charging
     * @param crashes          consumers that crashed in the ack gap and were replaced
     * @param refusedCommits   offset commits refused because the group had rebalanced
     * @param log              what its workers just did, newest first
     * @param discarded        duplicate deliveries it discarded, newest first
     */
    public record LaneState(
            long deliveries,
            long ledger,
            long overcount,
            long deduped,
            long dedupedCount,
            int providerCharges,
            int providerReplays,
            int crashes,
            int refusedCommits,
            List<String> log,
            List<Discarded> discarded) {}

    /** A discarded duplicate delivery. */
    public record Discarded(String payment, String reason, String worker) {}
}
