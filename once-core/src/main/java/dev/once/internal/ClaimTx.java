package dev.once.internal;

import dev.once.internal.fence.TakenFence;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;

/**
 * What {@link DefaultTx} and {@link DefaultBatchTx} share: the claim transaction's connection, which
 * the handler gets guarded against transaction control, and the fence check on it. Not API.
 */
abstract class ClaimTx {

    final Connection raw;
    final String prefix;
    final String consumer;
    final Clock clock;
    final ClaimWatch watch;
    private final GuardedConnection guarded;

    ClaimTx(Connection raw, ClaimWatch watch, String prefix, String consumer, Clock clock) {
        this.raw = raw;
        this.watch = watch;
        this.guarded = new GuardedConnection(raw, watch);
        this.prefix = prefix;
        this.consumer = consumer;
        this.clock = clock;
    }

    /** The refused transaction-control call, or null. */
    public String misuse() {
        return guarded.misuse();
    }

    public Connection connection() {
        return guarded;
    }

    public String consumer() {
        return consumer;
    }

    public void fence(String resource, long token) throws SQLException {
        TakenFence fence = new TakenFence(watch.dialect(), prefix, resource, token, clock);
        watch.fenced(fence); // checked again before the commit, see ClaimWatch#fenceAgain
        try {
            // not Fence.check: a Spring integration would check it again at the physical commit as well, where
            // the engine's own check (last before the claim commits) already stands for it
            fence.checkOn(raw);
        } catch (SQLException e) {
            throw watch.failed(e); // on the raw connection, so the guard would not see it
        }
    }
}
