package dev.once.retention;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.internal.Transactions;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The loop every pruner runs: one bounded {@code DELETE} per short transaction until a chunk comes
 * back short, so a large backlog never holds locks long or bloats one transaction,
 * and a failure keeps the chunks already deleted (deleting old rows again later is harmless).
 * Where the dialect can walk the table, each chunk starts after the previous chunk's last row;
 * every run starts from the beginning again.
 */
final class ChunkedPrune {

    /** Sets the statement's leading binds (cutoffs) and returns the index of the chunk-size bind. */
    interface Binds {
        int bind(PreparedStatement ps) throws SQLException;
    }

    private static final Logger log = LoggerFactory.getLogger(ChunkedPrune.class);

    private final Transactions transactions;
    private final String begin;
    private final String sql;
    private final IntFunction<String> walkingSql;
    private final int chunkSize;
    /** The walking statement for this server once known, or "" when it cannot walk. */
    private volatile String walking;

    private final Counter deleted;

    /**
     * @param walkingSql the walking statement for a server's major version (null where it cannot), or null for a
     *     table no dialect walks: only the inbox is large enough to need the heap walk
     * @param begin run first in each chunk's transaction, or null ({@link dev.once.jdbc.Dialect#pruneChunkBegin})
     */
    ChunkedPrune(
            DataSource dataSource,
            String begin,
            String sql,
            IntFunction<String> walkingSql,
            int chunkSize,
            MeterRegistry registry,
            String table,
            String description) {
        this.transactions = Transactions.owning(dataSource);
        this.begin = begin;
        this.sql = sql;
        this.walkingSql = walkingSql == null ? version -> null : walkingSql;
        this.chunkSize = chunkSize;
        this.deleted = Counter.builder("once.retention.deleted")
                .description(description)
                .tag("table", table)
                .register(registry);
    }

    /**
     * Deletes chunk after chunk; {@code afterwards}, if not null, runs on the same connection once done.
     *
     * @param what the rows, for messages: "inbox rows processed before 2026-11-01T00:00:00Z"
     */
    long run(Binds binds, String what, ConnectionTask afterwards) {
        long total = 0;
        try {
            String walk = walking();
            String[] position = {null}; // the walk's first chunk starts before the first row
            int n;
            do {
                n = transactions.inTransaction(tx -> {
                    if (begin != null) {
                        try (Statement s = tx.connection().createStatement()) {
                            s.execute(begin);
                        }
                    }
                    try (PreparedStatement ps = tx.connection().prepareStatement(walk.isEmpty() ? sql : walk)) {
                        int next = binds.bind(ps); // the cutoffs come first
                        if (walk.isEmpty()) {
                            ps.setInt(next, chunkSize);
                            return ps.executeUpdate();
                        }
                        ps.setString(next, position[0]);
                        ps.setInt(next + 1, chunkSize);
                        try (ResultSet rs = ps.executeQuery()) {
                            rs.next();
                            String last = rs.getString(2);
                            if (last != null) {
                                position[0] = last;
                            }
                            return rs.getInt(1);
                        }
                    }
                });
                total += n;
                deleted.increment(n);
            } while (n == chunkSize);
            if (afterwards != null) {
                transactions.inTransaction(tx -> {
                    afterwards.run(tx.connection());
                    return null;
                });
            }
        } catch (SQLException e) {
            throw new OnceException("pruning " + what + " failed after " + total + " rows: " + e.getMessage(), e);
        }
        log.info("pruned {} {}", total, what);
        return total;
    }

    private String walking() throws SQLException {
        String w = walking;
        if (w == null) {
            w = transactions.inTransaction(tx -> {
                String statement =
                        walkingSql.apply(tx.connection().getMetaData().getDatabaseMajorVersion());
                return statement == null ? "" : statement;
            });
            walking = w;
        }
        return w;
    }

    /** Work on the pruner's connection after the last chunk. */
    interface ConnectionTask {
        void run(Connection c) throws SQLException;
    }

    /** Runs {@code prune} every {@code interval}; a failed run is logged and the next one tries again. */
    static ScheduledFuture<?> schedule(
            ScheduledExecutorService executor, Duration interval, Runnable prune, String what) {
        Objects.requireNonNull(executor, "executor");
        if (interval == null || interval.isNegative() || interval.isZero()) {
            throw new InvalidConfigurationException("prune interval must be positive, but was " + interval);
        }
        return executor.scheduleWithFixedDelay(
                () -> {
                    try {
                        prune.run();
                    } catch (RuntimeException e) {
                        log.warn("scheduled prune of {} failed, will try again in {}", what, interval, e);
                    }
                },
                interval.toMillis(),
                interval.toMillis(),
                TimeUnit.MILLISECONDS);
    }
}
