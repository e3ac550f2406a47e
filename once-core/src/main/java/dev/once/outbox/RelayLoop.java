package dev.once.outbox;

import dev.once.internal.PgListener;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The background thread of a started relay: sends batches while there are rows to send, then waits
 * for a {@code LISTEN} wake-up (PostgreSQL), the poll interval, the first pending row's retry falling due, or after a
 * failed batch its backoff, whichever comes first. Owns its listening connection.
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
    // A failed batch (its connection died, its transaction failed, the database is down) is tried again after 1 s,
    // doubling to 30 s, or after the poll interval if that is shorter: its rows are pending and its wake-ups were
    // drained before it, so waiting for the poll interval (an hour if so configured) left them waiting that long; a
    // database that stays down gets one batch (a connection attempt) per 30 s, or per poll interval if shorter (as
    // before), not a busy loop.
    private static final Duration BATCH_RETRY = Duration.ofSeconds(1);
    private static final Duration BATCH_RETRY_MAX = Duration.ofSeconds(30);

    private final String relay;
    private final DataSource dataSource;
    private final String listenSql;
    private final String table;
    private final Duration pollInterval;
    private final Duration statsInterval;
    private final Batch batch;
    private final Runnable refreshStats;
    private final Object wake = new Object();
    private final Thread thread;
    private volatile boolean running = true;
    // Owned by the loop's thread: when to open the LISTEN connection next, and how long to wait after a failed open.
    private Instant nextListen = Instant.MIN;
    private Duration listenRetry = LISTEN_RETRY;
    // Owned by the loop's thread: the wait after the next failed batch.
    private Duration batchRetry = BATCH_RETRY;

    /**
     * @param listenSql    the dialect's LISTEN statement, or null to poll only
     * @param table        the outbox table, quoted: the listener wakes only for its schema's rows
     * @param batch        sends one batch
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
            Batch batch,
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

    /** One batch of the relay. */
    @FunctionalInterface
    interface Batch {
        /**
         * Sends one batch; when it handled no row and {@code readDue}, also reads how long until the first pending row
         * falls due.
         */
        Polled send(boolean readDue);
    }

    /**
     * What a batch did: the rows it handled and, when it handled none and was asked, how long until the first pending
     * row falls due (null when none waits, or when not asked).
     */
    record Polled(int rows, Duration untilDue) {}

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
        // When the first pending row falls due (System.nanoTime), if one does, and whether that must be read again
        // before the next wait: after a batch that handled rows (it may have scheduled retries), after a failed one,
        // and once that moment has passed (the row was taken: the next one is due next). Not after a wake-up by a
        // notification or the poll interval that found nothing to send: the herd's empty polls, and a polling-only
        // relay's (MariaDB), cost no extra query; a retry another relay scheduled is that relay's to wake for.
        Long due = null;
        boolean stale = true;
        try {
            while (running) {
                if (listener == null && listenSql != null && !Instant.now().isBefore(nextListen)) {
                    // Then the batch below polls: it finds the rows committed while nobody listened.
                    listener = open();
                }
                boolean more;
                Duration retry = null;
                try {
                    listener = drain(listener);
                    // Read with the batch when stale: in its transaction, on pgjdbc in its lock query's round trip.
                    Polled polled = batch.send(stale);
                    more = polled.rows() > 0;
                    if (more) {
                        stale = true;
                    } else if (stale) {
                        Duration until = polled.untilDue();
                        due = until == null ? null : System.nanoTime() + Math.max(0, until.toNanos());
                        stale = false;
                    }
                    if (!Instant.now().isBefore(nextStats)) {
                        refreshStats.run();
                        nextStats = Instant.now().plus(statsInterval);
                    }
                    batchRetry = BATCH_RETRY;
                } catch (RuntimeException e) {
                    retry = failed();
                    log.warn("relay {}: batch failed, trying again in {}", relay, retry, e);
                    more = false;
                    stale = true;
                }
                if (more || !running) {
                    continue;
                }
                long deadline = System.nanoTime() + (retry != null ? retry : pollInterval).toNanos();
                if (retry == null && due != null && due - deadline < 0) {
                    deadline = due;
                }
                try {
                    listener = await(listener, deadline);
                } catch (InterruptedException e) {
                    return;
                }
                if (due != null && due - System.nanoTime() <= 0) {
                    stale = true;
                }
            }
        } finally {
            if (listener != null) {
                listener.close();
            }
        }
    }

    // The wait after this failed batch (see BATCH_RETRY); doubles the next one's.
    private Duration failed() {
        Duration wait = batchRetry.compareTo(pollInterval) < 0 ? batchRetry : pollInterval;
        Duration doubled = batchRetry.multipliedBy(2);
        batchRetry = doubled.compareTo(BATCH_RETRY_MAX) < 0 ? doubled : BATCH_RETRY_MAX;
        return wait;
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
     * Waits for a notification or until {@code deadline} (System.nanoTime), whichever first, or without a listener
     * until it is time to open one again; returns the listener still usable.
     */
    private PgListener await(PgListener listener, long deadline) throws InterruptedException {
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
