package dev.once.internal;

import dev.once.BatchTx;
import dev.once.Delivery;
import dev.once.Outbox;
import dev.once.jdbc.Dialect;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The {@link BatchTx} of one batch transaction. Not API. */
public final class DefaultBatchTx extends ClaimTx implements BatchTx {

    private final Map<String, Delivery> claimed = new HashMap<>();
    // One outbox per cause, so each cause numbers its rows #1, #2, ... as the per-event Tx does.
    private final Map<String, JdbcOutbox> outboxes = new LinkedHashMap<>();

    public DefaultBatchTx(
            Connection raw, Dialect dialect, String prefix, String consumer, List<Delivery> claimed, Clock clock) {
        super(raw, dialect, prefix, consumer, clock);
        for (Delivery d : claimed) {
            this.claimed.put(d.eventId(), d);
        }
    }

    @Override
    public Outbox outbox(Delivery cause) {
        if (cause == null || !claimed.containsKey(cause.eventId())) {
            throw new IllegalArgumentException("outbox(cause) takes one of the deliveries this transaction claimed,"
                    + " but was " + (cause == null ? "null" : "event '" + cause.eventId() + "'")
                    + ": rows are stamped with an event id derived from their cause");
        }
        return outboxes.computeIfAbsent(
                cause.eventId(), id -> new JdbcOutbox(raw, dialect, prefix, consumer, id, clock));
    }

    /** Writes the rows every cause's outbox buffered, before the commit. */
    public void flushOutbox() throws SQLException {
        for (JdbcOutbox outbox : outboxes.values()) {
            outbox.flush();
        }
    }
}
