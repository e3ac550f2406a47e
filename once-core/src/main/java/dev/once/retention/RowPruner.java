package dev.once.retention;

import dev.once.OnceException;
import dev.once.internal.JdbcTarget;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.function.IntFunction;

/** What every pruner is: rows older than a retention, deleted chunk by chunk, now or on a schedule. */
abstract class RowPruner {

    /** The binds of a chunk's statement after the cutoff (bound at 1), for a run at {@code now}. */
    interface Binds {
        /** @return the index of the chunk-size bind */
        int bind(PreparedStatement ps, Instant now) throws SQLException;
    }

    /** A statement whose only bind before the chunk size is the cutoff. */
    static final Binds CUTOFF_ONLY = (ps, now) -> 2;

    private final ChunkedPrune chunks;
    private final Duration retention;
    private final Clock clock;
    private final String table;

    /**
     * @param table the table's name without the prefix: what the metrics' {@code table} tag and the log say, with it
     * @param sql the chunk's statement: binds 1 the cutoff, then those of {@link #pruneBefore}, then the chunk size
     * @param walkingSql the statement that walks the table for a server's major version (null where it cannot), or
     *     null for a table no dialect walks
     */
    RowPruner(
            JdbcTarget t,
            PrunerBuilder<?> b,
            String table,
            String sql,
            IntFunction<String> walkingSql,
            String description) {
        this.table = t.tablePrefix() + table;
        this.chunks = new ChunkedPrune(
                t.dataSource(),
                t.dialect().pruneChunkBegin(),
                sql,
                walkingSql,
                b.chunkSize,
                b.meterRegistry,
                this.table,
                description);
        this.retention = b.retention;
        this.clock = t.clock();
    }

    /** How long rows are kept. */
    public Duration retention() {
        return retention;
    }

    /**
     * Deletes the rows older than now minus the retention, chunk by chunk.
     *
     * @return rows deleted
     * @throws OnceException if the database fails; chunks already committed stay deleted, which is safe
     */
    public abstract long prune();

    /**
     * Runs {@link #prune()} every {@code interval} on {@code executor}; a failed run is logged and
     * the next one tries again. Cancel the returned future to stop.
     */
    public ScheduledFuture<?> schedule(ScheduledExecutorService executor, Duration interval) {
        return ChunkedPrune.schedule(executor, interval, this::prune, table);
    }

    /**
     * The chunks over the rows stamped before now minus the retention.
     *
     * @param what the rows, for messages: "inbox rows processed" (" before" the cutoff follows)
     * @param more the binds after the cutoff
     * @param afterwards if not null, runs on the same connection once done
     */
    final long pruneBefore(String what, Binds more, ChunkedPrune.ConnectionTask afterwards) {
        Instant now = clock.instant();
        Instant cutoff = now.minus(retention);
        return chunks.run(
                ps -> {
                    ps.setTimestamp(1, Timestamp.from(cutoff)); // 1 cutoff
                    return more.bind(ps, now);
                },
                what + " before " + cutoff,
                afterwards);
    }
}
