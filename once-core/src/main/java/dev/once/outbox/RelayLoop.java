package dev.once.outbox;

import dev.once.internal.PgListener;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.function.IntSupplier;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The background thread of a started relay: sends batches while there are rows to send, then waits
 * for a {@code LISTEN} wake-up (PostgreSQL) or the poll interval. Owns its listening connection.
 * Started once, stopped once.
 */
final class RelayLoop {

    private static final Logger log = LoggerFactory.getLogger(RelayLoop.class);
    // Slices keep stop() prompt: the driver's wait for a notification cannot be interrupted.
    private static final Duration SLICE = Duration.ofMillis(250);
    // A LISTEN connection that broke is opened again at once, but no sooner than this after the one before it was
    // opened (a connection killed as soon as it LISTENs costs an open and a poll a second, not a busy loop); one that
    // could not be opened is tried again after this, doubling up to ten poll intervals.
    private static final Duration LISTEN_RETRY = Duration.ofSeconds(1);

    private final String relay;
    private final DataSource dataSource;
    private final String listenSql;
    private final String table;
    private final Duration pollInterval;
    private final Duration statsInterval;
    private final IntSupplier batch;
    private final Runnable refreshStats;
    private final Object wake = new Object();
    private final Thread thread;
    private volatile boolean running = true;
    // Owned by the loop's thread: when to open the LISTEN connection next, and how long to wait after a failed open.
    private Instant nextListen = Instant.MIN;
    private Duration listenRetry = LISTEN_RETRY;

    /**
     * @param listenSql    the dialect's LISTEN statement, or null to poll only
     * @param table        the outbox table, quoted: the listener wakes only for its schema's rows
     * @param batch        sends one batch and returns the rows it handled
     * @param statsInterval how often to refresh the gauges at most
     * @param refreshStats refreshes the gauges
     */
    RelayLoop(
            String relay,
            DataSource dataSource,
            String listenSql,
            String table,
            Duration pollInterval,
            Duration statsInterval,
            IntSupplier batch,
            Runnable refreshStats) {
        this.relay = relay;
        this.dataSource = dataSource;
        this.listenSql = listenSql;
        this.table = table;
        this.pollInterval = pollInterval;
        this.statsInterval = statsInterval;
        this.batch = batch;
        this.refreshStats = refreshStats;
        this.thread = new Thread(this::run, "once-relay-" + relay);
        this.thread.setDaemon(true);
    }

    void start() {
        thread.start();
    }

    /** Stops the thread, waiting up to 30 s for the batch in flight. */
    void stop() {
        running = false;
        synchronized (wake) {
            wake.notifyAll();
        }
        try {
            thread.join(Duration.ofSeconds(30).toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void run() {
        PgListener listener = null;
        Instant nextStats = Instant.MIN;
        try {
            while (running) {
                if (listener == null && listenSql != null && !Instant.now().isBefore(nextListen)) {
                    // Then the batch below polls: it finds the rows committed while nobody listened.
                    listener = open();
                }
                boolean more;
                try {
                    listener = drain(listener);
                    more = batch.getAsInt() > 0;
                    if (!Instant.now().isBefore(nextStats)) {
                        refreshStats.run();
                        nextStats = Instant.now().plus(statsInterval);
                    }
                } catch (RuntimeException e) {
                    log.warn("relay {}: batch failed, trying again in {}", relay, pollInterval, e);
                    more = false;
                }
                if (more || !running) {
                    continue;
                }
                try {
                    listener = await(listener);
                } catch (InterruptedException e) {
                    return;
                }
            }
        } finally {
            if (listener != null) {
                listener.close();
            }
        }
    }

    // The notifications that arrived during the last batch announce commits this poll sees: taken
    // now, they do not wake the relay again after it (an empty poll: a lock query and a commit).
    private PgListener drain(PgListener listener) {
        if (listener == null) {
            return null;
        }
        try {
            listener.drain();
            return listener;
        } catch (SQLException e) {
            return broken(listener, e);
        }
    }

    private PgListener open() {
        Instant now = Instant.now();
        PgListener listener = PgListener.open(dataSource, listenSql, table);
        if (listener == null) {
            nextListen = now.plus(listenRetry);
            Duration doubled = listenRetry.multipliedBy(2);
            Duration tenPolls = pollInterval.multipliedBy(10);
            Duration longest = tenPolls.compareTo(LISTEN_RETRY) > 0 ? tenPolls : LISTEN_RETRY;
            listenRetry = doubled.compareTo(longest) > 0 ? longest : doubled;
        } else {
            nextListen = now.plus(LISTEN_RETRY);
            listenRetry = LISTEN_RETRY;
        }
        return listener;
    }

    // A listener that broke is opened again at once (no sooner than LISTEN_RETRY after it was): until then every
    // commit's notification is lost, and with it the rows' wake-up; they would wait for the poll interval, an hour if
    // so configured. It used to be reopened ten poll intervals after it was opened.
    private PgListener broken(PgListener listener, SQLException e) {
        log.info("relay {}: LISTEN connection failed ({}), opening it again", relay, e.toString());
        listener.close();
        return null;
    }

    /**
     * Waits for a notification or the poll interval, whichever first, or without a listener until it is time to open
     * one again; returns the listener still usable.
     */
    private PgListener await(PgListener listener) throws InterruptedException {
        long deadline = System.nanoTime() + pollInterval.toNanos();
        while (running) {
            long left = deadline - System.nanoTime();
            if (left <= 0
                    || (listener == null && listenSql != null && !Instant.now().isBefore(nextListen))) {
                return listener;
            }
            Duration slice = Duration.ofNanos(Math.min(left, SLICE.toNanos()));
            if (listener != null) {
                try {
                    if (listener.await(slice)) {
                        return listener;
                    }
                } catch (SQLException e) {
                    listener = broken(listener, e);
                }
            } else {
                synchronized (wake) {
                    wake.wait(Math.max(1, slice.toMillis()));
                }
            }
        }
        return listener;
    }
}
