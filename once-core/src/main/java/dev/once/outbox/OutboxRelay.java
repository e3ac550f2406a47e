package dev.once.outbox;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.RetryPolicy;
import dev.once.StaleFencingTokenException;
import dev.once.internal.JdbcTarget;
import dev.once.internal.OutboxRepository;
import dev.once.jdbc.JdbcBuilder;
import dev.once.lease.Fence;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
 * {@code SELECT … FOR UPDATE SKIP LOCKED}, oldest available first, send them through
 * {@link Publisher#publishAll} (which may send them concurrently) in waves, wait for every send's
 * outcome, all within {@link Builder#sendTimeout}, then mark each row sent (or delete it,
 * {@link Builder#deleteSent}), schedule its retry or move it to dead, all in one statement, and
 * commit. Each row's outcome is its own: one failed or hung send never marks another row. Rows
 * waiting for a retry are not read by the lock query at all (an index on when they are available),
 * so a large backlog in backoff costs a poll nothing. Many relays can run against one table at
 * once: a row locked by one is skipped by the others, so no row is sent twice while it is locked.
 *
 * <p><b>Keys.</b> A key is sent in id order by one relay at a time. A batch takes a key's head (its
 * oldest row that is pending or dead) and the rows right after it, in id order, up to the batch size
 * (a key run: a key with a long backlog drains a batch's worth at a time); the run stops at a row held
 * by another relay or not taken by this batch, and a head that is dead, waits for its retry, or is
 * available later than the rows behind it goes without them. The first wave holds each key's first
 * row and the rows without a key, the n-th wave the n-th row of each key whose row before it was
 * sent, so no wave holds two rows of a key; a row whose key's row before it failed or hung is not
 * sent and stays as it was (pending, no attempt counted), and so do the rows of waves the send
 * timeout left no time for. A failing row holds back its own key and no other; a dead head holds
 * it back until {@link OutboxAdmin#replay} (it is then sent first) or {@link OutboxAdmin#discard}.
 * Rows without a key are independent.
 *
 * <p><b>Delivery guarantee.</b> At least once, with the same event id and idempotency key on every
 * send: a relay that dies after publishing and before its commit leaves the row pending, and it is
 * sent again. The receiver deduplicates (an {@link dev.once.IdempotentConsumer}, an
 * {@code Idempotency-Key}-aware API).
 *
 * <p><b>Failures.</b> A retryable failure increments the row's attempts and makes it available
 * again after the delay of its {@link Builder#retryPolicy} (exponential, capped, jittered so that rows
 * failing together do not retry together); once the policy allows no more retries, or at once for a
 * permanent failure, the row goes to {@code dead}, where {@link OutboxAdmin} lists and replays it.
 *
 * <p><b>Wake-up.</b> On PostgreSQL a started relay {@code LISTEN}s on the outbox channel (the
 * schema's trigger notifies when a row becomes pending) and sends within milliseconds of a commit;
 * it also polls every {@link Builder#pollInterval}, which is the only wake-up elsewhere, and no later than the first
 * pending row of its destinations falls due (a retry: nothing notifies then), on every database. A batch that failed
 * (its connection died, the database is down) is tried again after 1 s, doubling up to 30 s, or after the poll
 * interval if that is shorter. A listening connection that breaks is opened again at once (then the relay polls), one that cannot be opened
 * again after 1 s, doubling up to ten poll intervals; meanwhile the relay polls. The channel is the database's: with a schema per
 * tenant and the same table prefix in each, a relay wakes only for its own schema's rows (the
 * trigger names the schema, schema version 10).
 *
 * <p><b>Exclusive mode.</b> With {@link Builder#lease}, the relay sends only while it holds the named
 * lease, renewing it before each send once half its time to live has passed (so a batch may take
 * longer than the lease), and every batch commits only after {@link Fence#check} of the lease's
 * fencing token: a relay paused past its lease (GC, SIGSTOP) while another took over cannot mark
 * rows when it resumes; it stops at its next send, its batch rolls back and the rows are sent by the
 * new holder. A fenced batch still counts an attempt for each row it sent, so rows whose single
 * send outlives the lease go to {@code dead} when the retry policy is spent instead of being
 * re-sent by alternating relays forever.
 *
 * <p><b>Metrics</b> (tag {@code relay}): {@code once.outbox.sent}, {@code once.outbox.retried},
 * {@code once.outbox.dead} counters; {@code once.outbox.pending} and {@code once.outbox.lag}
 * (seconds since the oldest pending row was written) gauges, sampled by a started relay every
 * {@link Builder#statsInterval} (counting pending rows reads them all, so it is not done per poll)
 * and by every {@link #stats} call;
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
    /**
     * How failed sends are retried unless configured: 1 s doubling to 5 minutes, equal jitter (never
     * less than half the computed delay), 9 retries, so a row goes to dead after 10 attempts.
     */
    public static final RetryPolicy DEFAULT_RETRY_POLICY = RetryPolicy.builder()
            .initialDelay(Duration.ofSeconds(1))
            .maxDelay(Duration.ofMinutes(5))
            .jitter(RetryPolicy.Jitter.EQUAL)
            .maxRetries(9)
            .build();
    /** How long a batch's sends may take in all, unless configured. */
    public static final Duration DEFAULT_SEND_TIMEOUT = Duration.ofSeconds(60);
    /** How often a started relay counts pending rows for its gauges, unless configured. */
    public static final Duration DEFAULT_STATS_INTERVAL = Duration.ofSeconds(15);
    /** Lease time to live in exclusive mode unless configured. */
    public static final Duration DEFAULT_LEASE_TTL = Duration.ofSeconds(30);

    private static final Logger log = LoggerFactory.getLogger(OutboxRelay.class);
    private static final Pattern NAME = Pattern.compile("[a-z0-9._-]{1,100}");

    private final JdbcTarget target;
    private final OutboxRepository repository;
    private final String name;
    private final int batchSize;
    private final Duration pollInterval;
    private final Duration statsInterval;
    private final boolean deleteSent;
    private final String destinationPattern;
    private final Clock clock;
    private final RelayLease exclusive;
    private final RelaySends sends;
    private final RelayMarks marks;
    private final RelayMetrics metrics;

    private RelayLoop loop;

    private OutboxRelay(Builder b, JdbcTarget t) {
        this.target = t;
        this.repository = new OutboxRepository(t.dialect(), t.tablePrefix());
        this.name = b.name;
        this.batchSize = b.batchSize;
        this.pollInterval = b.pollInterval;
        this.statsInterval = b.statsInterval;
        this.deleteSent = b.deleteSent;
        this.destinationPattern = like(b.destinationPrefix);
        this.clock = t.clock();
        this.exclusive = b.leaseName == null ? null : new RelayLease(name, b.leaseName, b.leaseTtl, t);
        this.sends = new RelaySends(name, b.publisher, b.sendTimeout, b.leaseTtl.dividedBy(4));
        this.marks = new RelayMarks(name, b.retryPolicy, clock, repository);
        this.metrics = new RelayMetrics(name, b.meterRegistry);
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
        return Optional.ofNullable(exclusive == null ? null : exclusive.held());
    }

    /**
     * Pending rows, lag and dead rows, read now; also refreshes the gauges.
     *
     * @throws OnceException if the database fails
     */
    public OutboxStats stats() {
        try {
            OutboxStats s = target.inTransaction(c -> repository.stats(c, clock.instant()));
            metrics.stats(s);
            return s;
        } catch (SQLException e) {
            throw new OnceException("relay " + name + ": reading outbox stats failed: " + e.getMessage(), e);
        }
    }

    /**
     * Sends one batch, in this thread: the rows sendable now, at most the batch size.
     *
     * @return rows handled (sent, scheduled for retry or moved to dead; not the rows of a key left
     *         behind its failed row); 0 when there was nothing
     *         to send, or in exclusive mode when the lease is held by another relay or was lost
     * @throws OnceException if the database fails; the batch rolled back and its rows will be sent again
     */
    public int relayOnce() {
        return batch(false).rows();
    }

    // One batch of the started relay; with readDue, when it handled no row, also how long until the first pending row
    // falls due (see untilDue): read in the batch's transaction (OutboxRepository#lockBatchOrNextAvailable), where
    // it was a transaction of its own after every batch that sent rows. Without a batch transaction (a standby in
    // exclusive mode, a fenced batch), read apart as before.
    private RelayLoop.Polled batch(boolean readDue) {
        Lease lease = null;
        if (exclusive != null) {
            lease = exclusive.current();
            if (lease == null) {
                return new RelayLoop.Polled(0, readDue ? untilDue() : null);
            }
        }
        Lease under = lease;
        List<OutboxMessage> attempted = new ArrayList<>();
        try {
            Batch batch = target.inTransaction(c -> sendBatch(c, under, attempted, readDue));
            metrics.count(batch.marks());
            if (!batch.marks().isEmpty() || !readDue) {
                return new RelayLoop.Polled(batch.marks().size(), null);
            }
            return new RelayLoop.Polled(
                    0,
                    batch.nextAvailable()
                            .map(at -> Duration.between(clock.instant(), at))
                            .orElse(null));
        } catch (StaleFencingTokenException | HeldLease.Lost e) {
            exclusive.lost(under);
            metrics.fenced();
            log.warn(
                    "relay {} lost its lease '{}' (token {}) during a batch; the batch rolled back after {} send(s),"
                            + " which the new holder sends again",
                    name,
                    exclusive.name(),
                    under.token(),
                    attempted.size());
            countFenced(attempted, under);
            return new RelayLoop.Polled(0, readDue ? untilDue() : null);
        } catch (SQLException e) {
            throw new OnceException(
                    "relay " + name + ": batch rolled back, database error (SQLState " + e.getSQLState() + "): "
                            + e.getMessage(),
                    e);
        }
    }

    // The marks of a batch; when it had no row to send and the next-due time was asked, that time, if a row waits.
    private record Batch(List<OutboxRepository.Mark> marks, Optional<Instant> nextAvailable) {}

    private Batch sendBatch(Connection c, Lease lease, List<OutboxMessage> attempted, boolean readDue)
            throws SQLException {
        Instant now = clock.instant();
        List<OutboxMessage> rows;
        if (readDue) {
            OutboxRepository.Locked locked = repository.lockBatchOrNextAvailable(c, now, destinationPattern, batchSize);
            if (locked.rows().isEmpty()) {
                return new Batch(List.of(), locked.nextAvailable());
            }
            rows = locked.rows();
        } else {
            rows = repository.lockBatch(c, now, destinationPattern, batchSize);
            if (rows.isEmpty()) {
                return new Batch(List.of(), Optional.empty());
            }
        }
        HeldLease held = new HeldLease(exclusive, lease);
        List<RelaySends.Attempt> attempts = sends.send(rows, held, attempted);
        sends.interrupted();
        List<OutboxRepository.Mark> marked = new ArrayList<>(rows.size());
        for (int i = 0; i < rows.size(); i++) {
            if (attempts.get(i) != null) { // else not sent (its key's row before it failed): left as it was
                marked.add(marks.of(rows.get(i), attempts.get(i)));
            }
        }
        repository.mark(c, marked, deleteSent);
        if (held.lease() != null) {
            held.keep();
            // Last before commit: a relay paused past its lease finds a newer token here and rolls back.
            exclusive.fence(c, held.lease());
        }
        return new Batch(marked, Optional.empty());
    }

    // How long until the first pending row this relay sends falls due, null when none waits: the started relay polls
    // then at the latest. A retry scheduled by a batch (this relay's or another's) is announced by no NOTIFY when it
    // falls due, and MariaDB has none at all: without this, a 200 ms retry waited for the poll interval.
    private Duration untilDue() {
        try {
            Instant now = clock.instant();
            return target.inTransaction(c -> repository.nextAvailable(c, now, destinationPattern))
                    .map(at -> Duration.between(now, at))
                    .orElse(null);
        } catch (SQLException e) {
            throw new OnceException(
                    "relay " + name + ": reading when the next row falls due failed: " + e.getMessage(), e);
        }
    }

    // A fenced batch still counts an attempt for each row it sent (see RelayMarks#countFenced), in a
    // transaction of its own: the batch's rolled back.
    private void countFenced(List<OutboxMessage> attempted, Lease lease) {
        if (attempted.isEmpty()) {
            return;
        }
        String error = "relay " + name + " lost lease '" + exclusive.name() + "' (token " + lease.token()
                + ") during its batch, after sending; the send is repeated by the new holder";
        try {
            metrics.count(target.inTransaction(c -> marks.countFenced(c, attempted, error)));
        } catch (SQLException | RuntimeException e) {
            log.warn("relay {}: counting the attempts of its fenced batch failed; they are not counted", name, e);
        }
    }

    /**
     * Starts sending in a background thread named {@code once-relay-<name>}: batches while rows are
     * sendable, then waits for a wake-up or the poll interval.
     *
     * @throws IllegalStateException if already started
     */
    public synchronized void start() {
        if (loop != null) {
            throw new IllegalStateException("relay " + name + " is already started");
        }
        loop = new RelayLoop(
                name,
                target.dataSource(),
                target.dialect().outboxListen(target.tablePrefix()),
                target.dialect().quote(target.tablePrefix() + "outbox"),
                pollInterval,
                statsInterval,
                this::batch,
                this::stats);
        loop.start();
    }

    /** Stops the background thread, waiting for the batch in flight; releases the lease in exclusive mode. */
    @Override
    public void close() {
        RelayLoop l;
        synchronized (this) {
            l = loop;
            loop = null;
        }
        if (l != null) {
            l.stop();
        }
        if (exclusive != null) {
            exclusive.release();
        }
    }

    // Prefix match with LIKE: escape its wildcards so "https://a_b" means itself.
    private static String like(String prefix) {
        return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%";
    }

    /** Builds an {@link OutboxRelay}; {@code dataSource} and {@code publisher} are required. Not thread-safe. */
    public static final class Builder extends JdbcBuilder<Builder> {
        private Publisher publisher;
        private String name = "relay";
        private int batchSize = DEFAULT_BATCH_SIZE;
        private Duration pollInterval = DEFAULT_POLL_INTERVAL;
        private Duration sendTimeout = DEFAULT_SEND_TIMEOUT;
        private Duration statsInterval = DEFAULT_STATS_INTERVAL;
        private RetryPolicy retryPolicy = DEFAULT_RETRY_POLICY;
        private boolean deleteSent;
        private String destinationPrefix = "";
        private MeterRegistry meterRegistry = Metrics.globalRegistry;
        private String leaseName;
        private Duration leaseTtl = DEFAULT_LEASE_TTL;

        private Builder() {}

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
            if (pollInterval == null
                    || pollInterval.toMillis() < 10
                    || pollInterval.compareTo(Duration.ofHours(1)) > 0) {
                throw new InvalidConfigurationException(
                        "pollInterval must be between 10ms and 1h, but was " + pollInterval);
            }
            this.pollInterval = pollInterval;
            return this;
        }

        /**
         * How long the sends of one batch may take in all, 1 ms to 1 hour; default
         * {@link #DEFAULT_SEND_TIMEOUT}. A send still unanswered then counts as a retryable failure:
         * one hung send delays its batch, it never holds the other rows' outcomes or locks for
         * longer. A key's later rows in the batch go in later waves, each started only while time
         * is left; the rows of a wave not started stay pending, untouched. It bounds the wait for {@link Publisher#publishAll}'s stages; a publisher that sends
         * in the calling thread (the sequential default) is bounded by its own timeouts.
         */
        public Builder sendTimeout(Duration sendTimeout) {
            if (sendTimeout == null || sendTimeout.toMillis() < 1 || sendTimeout.compareTo(Duration.ofHours(1)) > 0) {
                throw new InvalidConfigurationException(
                        "sendTimeout must be between 1ms and 1h, but was " + sendTimeout);
            }
            this.sendTimeout = sendTimeout;
            return this;
        }

        /**
         * How often a started relay reads the outbox statistics behind its {@code once.outbox.pending}
         * and {@code once.outbox.lag} gauges, 100 ms to 1 hour; default
         * {@link #DEFAULT_STATS_INTERVAL}. Counting pending rows reads every one of them, so it is
         * sampled rather than run at every poll; the gauges are at most this old.
         */
        public Builder statsInterval(Duration statsInterval) {
            if (statsInterval == null
                    || statsInterval.toMillis() < 100
                    || statsInterval.compareTo(Duration.ofHours(1)) > 0) {
                throw new InvalidConfigurationException(
                        "statsInterval must be between 100ms and 1h, but was " + statsInterval);
            }
            this.statsInterval = statsInterval;
            return this;
        }

        /**
         * How failed sends are retried: the delay before each retry, and how many retries a row gets
         * before it goes to dead (attempts = {@link RetryPolicy#maxRetries()} + 1); default
         * {@link #DEFAULT_RETRY_POLICY}. The relay retries rows, not calls: the delay is when the row
         * becomes available again.
         */
        public Builder retryPolicy(RetryPolicy retryPolicy) {
            this.retryPolicy = Objects.requireNonNull(retryPolicy, "retryPolicy");
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
                throw new InvalidConfigurationException(
                        "lease ttl must be between 1s and " + Leases.MAX_TTL + ", but was " + ttl);
            }
            this.leaseName = leaseName;
            this.leaseTtl = ttl;
            return this;
        }

        /**
         * @throws InvalidConfigurationException naming what is missing, or if the dialect cannot be
         *         detected or lacks leases in exclusive mode
         */
        public OutboxRelay build() {
            if (!hasDataSource() || publisher == null) {
                throw new InvalidConfigurationException("dataSource and publisher are required, but "
                        + (hasDataSource() ? "" : "dataSource ") + (publisher == null ? "publisher " : "")
                        + "was not set");
            }
            return new OutboxRelay(this, JdbcTarget.of(settings()));
        }
    }
}
