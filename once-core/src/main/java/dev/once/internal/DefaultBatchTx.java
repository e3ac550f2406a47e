package dev.once.internal;

import dev.once.BatchTx;
import dev.once.Delivery;
import dev.once.Outbox;
import dev.once.jdbc.Dialect;
import dev.once.lease.Fence;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** The {@link BatchTx} of one batch transaction. Not API. */
public final class DefaultBatchTx implements BatchTx {

    private final GuardedConnection guarded;
    private final Connection raw;
    private final Dialect dialect;
    private final String prefix;
    private final String consumer;
    private final Map<String, Delivery> claimed = new HashMap<>();
    private final Clock clock;
    private final OutboxBuffer outboxBuffer;
    // One outbox per cause, so each cause numbers its rows #1, #2, ... as the per-event Tx does; all
    // of them write to the one buffer, flushed once by the engine.
    private final Map<String, JdbcOutbox> outboxes = new HashMap<>();

    public DefaultBatchTx(
            Connection raw,
            Dialect dialect,
            String prefix,
            String consumer,
            List<Delivery> claimed,
            Clock clock,
            OutboxBuffer outboxBuffer) {
        this.raw = raw;
        this.guarded = new GuardedConnection(raw, dialect.mysqlLexing());
        this.dialect = dialect;
        this.prefix = prefix;
        this.consumer = consumer;
        for (Delivery d : claimed) {
            this.claimed.put(d.eventId(), d);
        }
        this.clock = clock;
        this.outboxBuffer = outboxBuffer;
    }

    /** The refused transaction-control call, or null. */
    public String misuse() {
        return guarded.misuse();
    }

    @Override
    public Connection connection() {
        return guarded;
    }

    @Override
    public String consumer() {
        return consumer;
    }

    @Override
    public Outbox outbox(Delivery cause) {
        if (cause == null || !claimed.containsKey(cause.eventId())) {
            throw new IllegalArgumentException("outbox(cause) takes one of the deliveries this transaction claimed,"
                    + " but was " + (cause == null ? "null" : "event '" + cause.eventId() + "'")
                    + ": rows are stamped with an event id derived from their cause");
        }
        return outboxes.computeIfAbsent(cause.eventId(), id -> new JdbcOutbox(outboxBuffer, consumer, id));
    }

    @Override
    public void fence(String resource, long token) throws SQLException {
        Fence.check(raw, dialect, prefix, resource, token, clock);
    }
}
