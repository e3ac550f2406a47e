package dev.once.internal;

import dev.once.BatchTx;
import dev.once.Delivery;
import dev.once.Outbox;
import java.sql.Connection;
import java.time.Clock;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** The {@link BatchTx} of one batch transaction. Not API. */
public final class DefaultBatchTx extends ClaimTx implements BatchTx {

    private final List<Delivery> claimed;
    // The claimed ids, made at the first outbox(cause): a batch handler that writes no outbox row
    // (most of them) needs no map of a batch's thousands of ids.
    private Set<String> claimedIds;
    // One outbox per cause, so each cause numbers its rows #1, #2, ... as the per-event Tx does; all
    // of them write to the one buffer, flushed once by the engine.
    private final Map<String, JdbcOutbox> outboxes = new HashMap<>();

    public DefaultBatchTx(
            Connection raw, ClaimWatch watch, String prefix, String consumer, List<Delivery> claimed, Clock clock) {
        super(raw, watch, prefix, consumer, clock);
        this.claimed = claimed;
    }

    @Override
    public Outbox outbox(Delivery cause) {
        if (cause != null && claimedIds == null) {
            claimedIds = new HashSet<>();
            for (Delivery d : claimed) {
                claimedIds.add(d.eventId());
            }
        }
        if (cause == null || !claimedIds.contains(cause.eventId())) {
            throw new IllegalArgumentException("outbox(cause) takes one of the deliveries this transaction claimed,"
                    + " but was " + (cause == null ? "null" : "event '" + cause.eventId() + "'")
                    + ": rows are stamped with an event id derived from their cause");
        }
        return outboxes.computeIfAbsent(cause.eventId(), id -> new JdbcOutbox(watch.outbox(), consumer, id));
    }
}
