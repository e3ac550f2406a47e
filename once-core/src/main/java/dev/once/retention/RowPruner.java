package dev.once.retention;

import dev.once.OnceException;
import java.time.Clock;
import java.time.Duration;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;

/** What every pruner is: rows older than a retention, deleted chunk by chunk, now or on a schedule. */
abstract class RowPruner {

    final ChunkedPrune chunks;
    final Duration retention;
    final Clock clock;
    private final String table;

    RowPruner(ChunkedPrune chunks, Duration retention, Clock clock, String table) {
        this.chunks = chunks;
        this.retention = retention;
        this.clock = clock;
        this.table = table;
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
}
