package dev.once.outbox;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.PermanentFailureException;
import dev.once.StaleFencingTokenException;
import dev.once.internal.PgListener;
import dev.once.internal.JdbcSettings;
import dev.once.internal.JdbcTarget;
import dev.once.jdbc.Dialect;
import dev.once.lease.Fence;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

import javax.sql.DataSource;
import java.lang.management.ManagementFactory;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Pattern;

/**
 * Sends what handlers put in the transactional outbox, after their transactions commit.
 *
 * <pre>{@code
 * OutboxRelay relay = OutboxRelay.builder()
 *     .dataSource(ds)
 *     .publisher(HttpPublisher.builder().build())   // or a broker adapter's publisher
 *     .build();
 * relay.start();   // background thread; relay.close() stops it
 * }</pre>
 *
 * <p><b>How it sends.</b> One transaction per batch: lock the next rows with
 * {@code SELECT … FOR UPDATE SKIP LOCKED} in id order, publish each, then mark it sent (or delete
 * it, {@link Builder#deleteSent}) or schedule its retry, and commit. Many relays can run against
 * one table at once: a row locked by one is skipped by the others, so no row is sent twice while
 * it is locked. Only the oldest pending row of each key is taken, so a key is sent by one relay at
 * a time and in id order, and a failing row holds back its own key and no other. Rows without a key
 * are independent.
 *
 * <p><b>Delivery guarantee.</b> At least once, with the same event id and idempotency key on every
 * send: a relay that dies after publishing and before its commit leaves the row pending, and it is
 * sent again. The receiver deduplicates (an {@link dev.once.IdempotentConsumer}, an
 * {@code Idempotency-Key}-aware API).
 *
 * <p><b>Failures.</b> A retryable failure increments the row's attempts and makes it available
 * again after an exponential backoff ({@link Builder#initialBackoff} doubled per attempt, at most
 * {@link Builder#maxBackoff}); after {@link Builder#maxAttempts} attempts, or at once for a
 * permanent failure, the row goes to {@code dead}, where {@link OutboxAdmin} lists and replays it.
 *
 * <p><b>Wake-up.</b> On PostgreSQL a started relay {@code LISTEN}s on the outbox channel (the
 * schema's trigger notifies when a row becomes pending) and sends within milliseconds of a commit;
 * it also polls every {@link Builder#pollInterval}, which is the only wake-up elsewhere and the
 * fallback when the listening connection breaks.
 *
 * <p><b>Exclusive mode.</b> With {@link Builder#lease}, the relay sends only while it holds the named
 * lease, and every batch commits only after {@link Fence#check} of the lease's fencing token: a relay
 * paused past its lease (GC, SIGSTOP) while another took over cannot mark rows when it resumes; its
 * batch rolls back and the rows are sent by the new holder.
 *
 * <p><b>Metrics</b> (tag {@code relay}): {@code once.outbox.sent}, {@code once.outbox.retried},
 * {@code once.outbox.dead} counters; {@code once.outbox.pending} and {@code once.outbox.lag}
 * (seconds since the oldest pending row was written) gauges, refreshed every poll;
 * {@code once.fence.rejections}.
 *
 * <p>Thread-safe: {@link #relayOnce} may be called from several threads, though one started relay
 * per process is the usual shape (run more processes to send faster).
 */
public final class OutboxRelay implements AutoCloseable {

    /** Rows per transaction unless configured. */
    public static final int DEFAULT_BATCH_SIZE = 100;
    /** How often a relay looks for rows without a wake-up, unless configured. */
    public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofSeconds(1);
    /** Sends tried before a row goes to dead, unless configured. */
    public static final int DEFAULT_MAX_ATTEMPTS = 10;
    /** Delay before the first retry, doubled per further attempt, unless configured. */
    public static final Duration DEFAULT_INITIAL_BACKOFF = Duration.ofSeconds(1);
    /** Longest delay between retries unless configured. */
    public static final Duration DEFAULT_MAX_BACKOFF = Duration.ofMinutes(5);
    /** Lease time to live in exclusive mode unless configured. */
    public static final Duration DEFAULT_LEASE_TTL = Duration.ofSeconds(30);

    private static final Logger log = LoggerFactory.getLogger(OutboxRelay.class);
    private static final Pattern NAME = Pattern.compile("[a-z0-9._-]{1,100}");
    private static final int MAX_ERROR = 4000;

    private final DataSource dataSource;
    private final Dialect dialect;
    private final String prefix;
    private final Publisher publisher;
    private final String name;
    private final int batchSize;
    private final Duration pollInterval;
    private final int maxAttempts;
    private final Duration initialBackoff;
    private final Duration maxBackoff;
    private final boolean deleteSent;
    private final String destinationPattern;
    private final Clock clock;
    private final OutboxAdmin admin;
    private final Leases leases;
    private final String leaseName;
    private final String leaseOwner;
    private final Duration leaseTtl;

    private final String lockSql;
    private final String sentSql;
    private final String deleteSql;
    private final String retrySql;
    private final String deadSql;

    private final Counter sent;
    private final Counter retried;
    private final Counter dead;
    private final Counter fenceRejections;
    private final AtomicReference<OutboxStats> lastStats = new AtomicReference<>(new OutboxStats(0, Duration.ZERO, 0));

    private final Object wake = new Object();
    private final AtomicReference<Lease> lease = new AtomicReference<>();
    private volatile boolean running;
    private Thread thread;

    private OutboxRelay(Builder b, JdbcTarget t) {
        Dialect dialect = t.dialect();
        this.dataSource = t.dataSource();
        this.dialect = dialect;
        this.prefix = t.tablePrefix();
        this.publisher = b.publisher;
        this.name = b.name;
        this.batchSize = b.batchSize;
        this.pollInterval = b.pollInterval;
        this.maxAttempts = b.maxAttempts;
        this.initialBackoff = b.initialBackoff;
        this.maxBackoff = b.maxBackoff;
        this.deleteSent = b.deleteSent;
        this.destinationPattern = like(b.destinationPrefix);
        this.clock = t.clock();
        this.admin = OutboxAdmin.builder().dataSource(dataSource).dialect(dialect).tablePrefix(prefix)
                .clock(clock).build();
        this.leaseName = b.leaseName;
        this.leaseTtl = b.leaseTtl;
        this.leaseOwner = b.name + "@" + ManagementFactory.getRuntimeMXBean().getName() + "/"
                + UUID.randomUUID().toString().substring(0, 8);
        this.leases = b.leaseName == null ? null
                : Leases.builder().dataSource(dataSource).dialect(dialect).tablePrefix(prefix).clock(clock).build();
        this.lockSql = dialect.outboxLockBatch(prefix);
        this.sentSql = dialect.outboxMarkSent(prefix);
        this.deleteSql = dialect.outboxDelete(prefix);
        this.retrySql = dialect.outboxRetry(prefix);
        this.deadSql = dialect.outboxDead(prefix);
        MeterRegistry r = b.meterRegistry;
        this.sent = Counter.builder("once.outbox.sent").description("outbox rows sent").tag("relay", name).register(r);
        this.retried = Counter.builder("once.outbox.retried").description("failed sends scheduled for a retry")
                .tag("relay", name).register(r);
        this.dead = Counter.builder("once.outbox.dead").description("rows moved to dead").tag("relay", name)
                .register(r);
        this.fenceRejections = Counter.builder("once.fence.rejections")
                .description("batches rolled back because the relay's lease was taken over").tag("relay", name)
                .register(r);
        Gauge.builder("once.outbox.pending", lastStats, s -> s.get().pending()).description("pending outbox rows")
                .tag("relay", name).register(r);
        Gauge.builder("once.outbox.lag", lastStats, s -> s.get().oldestPendingAge().toMillis() / 1000.0)
                .description("seconds the oldest pending outbox row has waited").baseUnit("seconds")
                .tag("relay", name).register(r);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The relay's name, its metrics tag and thread name. */
    public String name() {
        return name;
    }

    /** The lease this relay holds in exclusive mode, if any right now. */
    public Optional<Lease> lease() {
        return Optional.ofNullable(lease.get());
    }

    /**
     * Pending rows, lag and dead rows, read now; also refreshes the gauges.
     *
     * @throws OnceException if the database fails
     */
    public OutboxStats stats() {
        OutboxStats s = admin.stats();
        lastStats.set(s);
        return s;
    }

    /**
     * Sends one batch, in this thread: the rows sendable now, at most the batch size.
     *
     * @return rows handled (sent, scheduled for retry or moved to dead); 0 when there was nothing
     *         to send, or in exclusive mode when the lease is held by another relay or was lost
     * @throws OnceException if the database fails; the batch rolled back and its rows will be sent again
     */
    public int relayOnce() {
        Lease held = null;
        if (leaseName != null) {
            held = currentLease();
            if (held == null) {
                return 0;
            }
        }
        try (Connection c = dataSource.getConnection()) {
            boolean autoCommit = c.getAutoCommit();
            c.setAutoCommit(false);
            try {
                int n = relayBatch(c, held);
                return n;
            } catch (StaleFencingTokenException e) {
                rollbackQuietly(c);
                lease.compareAndSet(held, null);
                fenceRejections.increment();
                log.warn("relay {} lost its lease '{}' (token {}, newest {}); its batch rolled back and will be sent"
                        + " by the new holder", name, leaseName, e.token(), e.newest());
                return 0;
            } catch (SQLException | RuntimeException e) {
                rollbackQuietly(c);
                throw e;
            } finally {
                c.setAutoCommit(autoCommit);
            }
        } catch (SQLException e) {
            throw new OnceException("relay " + name + ": batch rolled back, database error (SQLState "
                    + e.getSQLState() + "): " + e.getMessage(), e);
        }
    }

    private record Result(OutboxMessage message, Receipt receipt, Throwable failure, boolean permanent) {
    }

    private int relayBatch(Connection c, Lease held) throws SQLException {
        Instant now = clock.instant();
        List<OutboxMessage> rows = new ArrayList<>();
        try (PreparedStatement ps = c.prepareStatement(lockSql)) {
            ps.setTimestamp(1, Timestamp.from(now));   // 1 now: rows available by then
            ps.setString(2, destinationPattern);        // 2 destination LIKE pattern
            ps.setInt(3, batchSize);                    // 3 limit
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    rows.add(Rows.message(rs));
                }
            }
        }
        if (rows.isEmpty()) {
            c.commit();
            return 0;
        }
        List<Result> results = new ArrayList<>(rows.size());
        for (OutboxMessage m : rows) {
            if (Thread.currentThread().isInterrupted()) {
                throw new OnceException("relay " + name + " interrupted; batch rolled back, its rows will be sent again");
            }
            results.add(publish(m));
        }
        int sentRows = 0;
        int retriedRows = 0;
        int deadRows = 0;
        Instant done = clock.instant();
        try (PreparedStatement ok = c.prepareStatement(deleteSent ? deleteSql : sentSql);
             PreparedStatement retry = c.prepareStatement(retrySql);
             PreparedStatement give = c.prepareStatement(deadSql)) {
            for (Result r : results) {
                long id = r.message().id();
                Receipt receipt = r.receipt();
                if (r.failure() == null) {
                    if (deleteSent) {
                        ok.setLong(1, id);                                             // 1 id
                    } else {
                        ok.setTimestamp(1, Timestamp.from(done));                      // 1 sent_at
                        setReceipt(ok, 2, receipt);                                    // 2 status, 3 response
                        ok.setLong(4, id);                                             // 4 id
                    }
                    ok.addBatch();
                    sentRows++;
                    continue;
                }
                int attempts = r.message().attempts() + 1;
                String error = Rows.truncate(String.valueOf(r.failure()), MAX_ERROR);
                if (r.permanent() || attempts >= maxAttempts) {
                    give.setString(1, error);                                          // 1 last_error
                    setReceipt(give, 2, receipt);                                      // 2 status, 3 response
                    give.setLong(4, id);                                               // 4 id
                    give.addBatch();
                    deadRows++;
                    log.warn("relay {}: row {} (event {}) is dead after {} attempt(s): {}", name, id,
                            r.message().eventId(), attempts, error);
                } else {
                    Instant next = done.plus(backoff(attempts));
                    retry.setTimestamp(1, Timestamp.from(next));                       // 1 available_at
                    retry.setString(2, error);                                         // 2 last_error
                    setReceipt(retry, 3, receipt);                                     // 3 status, 4 response
                    retry.setLong(5, id);                                              // 5 id
                    retry.addBatch();
                    retriedRows++;
                    log.info("relay {}: row {} (event {}) failed attempt {}, next at {}: {}", name, id,
                            r.message().eventId(), attempts, next, error);
                }
            }
            if (sentRows > 0) {
                ok.executeBatch();
            }
            if (retriedRows > 0) {
                retry.executeBatch();
            }
            if (deadRows > 0) {
                give.executeBatch();
            }
        }
        if (held != null) {
            // Last before commit: a relay paused past its lease finds a newer token here and rolls back.
            Fence.check(c, dialect, prefix, fenceResource(), held.token(), clock);
        }
        c.commit();
        sent.increment(sentRows);
        retried.increment(retriedRows);
        dead.increment(deadRows);
        return rows.size();
    }

    private Result publish(OutboxMessage m) {
        MDC.put("once.outbox.id", Long.toString(m.id()));
        MDC.put("once.event_id", m.eventId());
        try {
            Receipt receipt = publisher.publish(m);
            return new Result(m, receipt == null ? Receipt.NONE : receipt, null, false);
        } catch (PublishFailure e) {
            return new Result(m, e.receipt(), e, !e.retryable());
        } catch (PermanentFailureException e) {
            return new Result(m, null, e, true);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Result(m, null, e, false);
        } catch (Exception e) {
            return new Result(m, null, e, false);
        } finally {
            MDC.remove("once.outbox.id");
            MDC.remove("once.event_id");
        }
    }

    private static void setReceipt(PreparedStatement ps, int index, Receipt receipt) throws SQLException {
        if (receipt == null) {
            ps.setNull(index, java.sql.Types.INTEGER);
            ps.setNull(index + 1, java.sql.Types.VARCHAR);
        } else {
            ps.setInt(index, receipt.status());
            ps.setString(index + 1, receipt.body());
        }
    }

    /** The delay before attempt {@code attempts + 1}: initial × 2^(attempts − 1), at most the maximum. */
    Duration backoff(int attempts) {
        int doublings = Math.min(attempts - 1, 30);
        Duration d = initialBackoff.multipliedBy(1L << doublings);
        return d.compareTo(maxBackoff) > 0 ? maxBackoff : d;
    }

    private String fenceResource() {
        return "outbox-relay:" + leaseName;
    }

    /** The lease to send under: held and renewed at half its time to live, or newly acquired; null if another holds it. */
    private Lease currentLease() {
        Lease held = lease.get();
        Instant now = clock.instant();
        if (held != null && now.isBefore(held.expiresAt().minus(leaseTtl.dividedBy(2)))) {
            return held;
        }
        if (held != null) {
            Lease renewed = leases.renew(held, leaseTtl).orElse(null);
            if (renewed != null) {
                lease.set(renewed);
                return renewed;
            }
            log.warn("relay {} lost its lease '{}' (token {}): another relay acquired it", name, leaseName,
                    held.token());
            lease.set(null);
        }
        Lease acquired = leases.acquire(leaseName, leaseOwner, leaseTtl).orElse(null);
        if (acquired != null) {
            takeOver(acquired);
            log.info("relay {} acquired lease '{}' with token {}", name, leaseName, acquired.token());
        }
        lease.set(acquired);
        return acquired;
    }

    // Records the new token at the fence at once, not at this relay's first batch: from here on the
    // previous holder's batches are rejected even while this relay has nothing to send.
    private void takeOver(Lease acquired) {
        try (Connection c = dataSource.getConnection()) {
            boolean autoCommit = c.getAutoCommit();
            c.setAutoCommit(false);
            try {
                Fence.check(c, dialect, prefix, fenceResource(), acquired.token(), clock);
                c.commit();
            } catch (SQLException | RuntimeException e) {
                rollbackQuietly(c);
                throw e;
            } finally {
                c.setAutoCommit(autoCommit);
            }
        } catch (SQLException e) {
            throw new OnceException("relay " + name + ": recording lease token " + acquired.token() + " of '"
                    + leaseName + "' at the fence failed: " + e.getMessage(), e);
        }
    }

    /**
     * Starts sending in a background thread named {@code once-relay-<name>}: batches while rows are
     * sendable, then waits for a wake-up or the poll interval.
     *
     * @throws IllegalStateException if already started
     */
    public synchronized void start() {
        if (thread != null) {
            throw new IllegalStateException("relay " + name + " is already started");
        }
        running = true;
        thread = new Thread(this::loop, "once-relay-" + name);
        thread.setDaemon(true);
        thread.start();
    }

    private void loop() {
        String listen = dialect.outboxListen(prefix);
        PgListener listener = null;
        Instant nextListen = Instant.MIN;
        Instant nextStats = Instant.MIN;
        try {
            while (running) {
                if (listener == null && listen != null && !Instant.now().isBefore(nextListen)) {
                    listener = PgListener.open(dataSource, listen);
                    nextListen = Instant.now().plus(pollInterval.multipliedBy(10));
                }
                boolean more;
                try {
                    more = relayOnce() > 0;
                    // The gauges' query runs at most once per poll interval, not after every batch.
                    if (!Instant.now().isBefore(nextStats)) {
                        stats();
                        nextStats = Instant.now().plus(pollInterval);
                    }
                } catch (RuntimeException e) {
                    log.warn("relay {}: batch failed, trying again in {}", name, pollInterval, e);
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

    /** Waits for a notification or the poll interval, whichever first; returns the listener still usable. */
    private PgListener await(PgListener listener) throws InterruptedException {
        long deadline = System.nanoTime() + pollInterval.toNanos();
        while (running) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return listener;
            }
            // Slices keep close() prompt: the driver's wait cannot be interrupted.
            Duration slice = Duration.ofNanos(Math.min(left, Duration.ofMillis(250).toNanos()));
            if (listener != null) {
                try {
                    if (listener.await(slice)) {
                        return listener;
                    }
                } catch (SQLException e) {
                    log.info("relay {}: LISTEN connection failed ({}), polling until it is back", name, e.toString());
                    listener.close();
                    listener = null;
                }
            } else {
                synchronized (wake) {
                    wake.wait(Math.max(1, slice.toMillis()));
                }
            }
        }
        return listener;
    }

    /** Stops the background thread, waiting for the batch in flight; releases the lease in exclusive mode. */
    @Override
    public void close() {
        Thread t;
        synchronized (this) {
            running = false;
            t = thread;
            thread = null;
        }
        synchronized (wake) {
            wake.notifyAll();
        }
        if (t != null) {
            try {
                t.join(Duration.ofSeconds(30).toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        Lease held = lease.getAndSet(null);
        if (held != null) {
            try {
                leases.release(held);
            } catch (RuntimeException e) {
                log.debug("releasing lease '{}' failed; it lapses after its ttl", leaseName, e);
            }
        }
    }

    private static void rollbackQuietly(Connection c) {
        try {
            c.rollback();
        } catch (SQLException e) {
            log.debug("rollback failed", e);
        }
    }

    // Prefix match with LIKE: escape its wildcards so "https://a_b" means itself.
    private static String like(String prefix) {
        return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%";
    }

    /** Builds an {@link OutboxRelay}; {@code dataSource} and {@code publisher} are required. Not thread-safe. */
    public static final class Builder extends JdbcSettings<Builder> {
        private Publisher publisher;
        private String name = "relay";
        private int batchSize = DEFAULT_BATCH_SIZE;
        private Duration pollInterval = DEFAULT_POLL_INTERVAL;
        private int maxAttempts = DEFAULT_MAX_ATTEMPTS;
        private Duration initialBackoff = DEFAULT_INITIAL_BACKOFF;
        private Duration maxBackoff = DEFAULT_MAX_BACKOFF;
        private boolean deleteSent;
        private String destinationPrefix = "";
        private MeterRegistry meterRegistry = Metrics.globalRegistry;
        private String leaseName;
        private Duration leaseTtl = DEFAULT_LEASE_TTL;

        private Builder() {
        }

        @Override
        protected Builder self() {
            return this;
        }

        /** What sends a row. Required. */
        public Builder publisher(Publisher publisher) {
            this.publisher = Objects.requireNonNull(publisher, "publisher");
            return this;
        }

        /** The relay's name, matching {@code [a-z0-9._-]{1,100}}: metrics tag, thread name, lease owner; default {@code relay}. */
        public Builder name(String name) {
            if (name == null || !NAME.matcher(name).matches()) {
                throw new InvalidConfigurationException("relay name must match " + NAME.pattern() + ", but was "
                        + (name == null ? "null" : "'" + name + "'"));
            }
            this.name = name;
            return this;
        }

        /** Rows per transaction, 1 to 10000; default {@value #DEFAULT_BATCH_SIZE}. Rows stay locked while the batch is sent. */
        public Builder batchSize(int batchSize) {
            if (batchSize < 1 || batchSize > 10_000) {
                throw new InvalidConfigurationException("batchSize must be between 1 and 10000, but was " + batchSize);
            }
            this.batchSize = batchSize;
            return this;
        }

        /** How often to look for rows without a wake-up, 10 ms to 1 hour; default {@link #DEFAULT_POLL_INTERVAL}. */
        public Builder pollInterval(Duration pollInterval) {
            if (pollInterval == null || pollInterval.toMillis() < 10 || pollInterval.compareTo(Duration.ofHours(1)) > 0) {
                throw new InvalidConfigurationException("pollInterval must be between 10ms and 1h, but was "
                        + pollInterval);
            }
            this.pollInterval = pollInterval;
            return this;
        }

        /** Sends tried before a row goes to dead, 1 to 1000; default {@value #DEFAULT_MAX_ATTEMPTS}. */
        public Builder maxAttempts(int maxAttempts) {
            if (maxAttempts < 1 || maxAttempts > 1000) {
                throw new InvalidConfigurationException("maxAttempts must be between 1 and 1000, but was "
                        + maxAttempts);
            }
            this.maxAttempts = maxAttempts;
            return this;
        }

        /** Delay before the first retry, 1 ms to 1 day; default {@link #DEFAULT_INITIAL_BACKOFF}. */
        public Builder initialBackoff(Duration initialBackoff) {
            this.initialBackoff = positive("initialBackoff", initialBackoff);
            return this;
        }

        /** Longest delay between retries, 1 ms to 1 day; default {@link #DEFAULT_MAX_BACKOFF}. */
        public Builder maxBackoff(Duration maxBackoff) {
            this.maxBackoff = positive("maxBackoff", maxBackoff);
            return this;
        }

        /** True: delete rows once sent (no history, no recorded response); default false: mark them {@code sent}. */
        public Builder deleteSent(boolean deleteSent) {
            this.deleteSent = deleteSent;
            return this;
        }

        /**
         * Send only rows whose destination starts with this, such as {@code https://} for an HTTP
         * relay beside a Kafka relay; default empty (every row). A key's order spans destinations:
         * a row waits for older rows of its key whichever relay sends them.
         */
        public Builder destinationPrefix(String destinationPrefix) {
            this.destinationPrefix = Objects.requireNonNull(destinationPrefix, "destinationPrefix");
            return this;
        }

        public Builder meterRegistry(MeterRegistry meterRegistry) {
            this.meterRegistry = Objects.requireNonNull(meterRegistry, "meterRegistry");
            return this;
        }

        /**
         * Exclusive mode: send only while holding the lease {@code leaseName} (one active relay per
         * name, the others stand by), fencing every batch with its token. PostgreSQL only.
         *
         * @param ttl how long the lease lasts unless renewed (renewed at half), 1 s to 1 day
         */
        public Builder lease(String leaseName, Duration ttl) {
            if (leaseName == null || leaseName.isBlank() || leaseName.length() > 200) {
                throw new InvalidConfigurationException("leaseName must be 1 to 200 non-blank characters, but was "
                        + (leaseName == null ? "null" : "'" + leaseName + "'"));
            }
            if (ttl == null || ttl.compareTo(Duration.ofSeconds(1)) < 0 || ttl.compareTo(Leases.MAX_TTL) > 0) {
                throw new InvalidConfigurationException("lease ttl must be between 1s and " + Leases.MAX_TTL
                        + ", but was " + ttl);
            }
            this.leaseName = leaseName;
            this.leaseTtl = ttl;
            return this;
        }

        private static Duration positive(String what, Duration d) {
            if (d == null || d.toMillis() < 1 || d.compareTo(Duration.ofDays(1)) > 0) {
                throw new InvalidConfigurationException(what + " must be between 1ms and 1d, but was " + d);
            }
            return d;
        }

        /**
         * @throws InvalidConfigurationException naming what is missing, if maxBackoff is below
         *         initialBackoff, or if the dialect cannot be detected or lacks leases in exclusive mode
         */
        public OutboxRelay build() {
            if (!hasDataSource() || publisher == null) {
                throw new InvalidConfigurationException("dataSource and publisher are required, but "
                        + (hasDataSource() ? "" : "dataSource ") + (publisher == null ? "publisher " : "")
                        + "was not set");
            }
            if (maxBackoff.compareTo(initialBackoff) < 0) {
                throw new InvalidConfigurationException("maxBackoff " + maxBackoff + " is shorter than initialBackoff "
                        + initialBackoff + "; raise maxBackoff or lower initialBackoff");
            }
            return new OutboxRelay(this, target());
        }
    }
}
