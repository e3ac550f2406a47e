package dev.once.keys;

import dev.once.InvalidConfigurationException;
import dev.once.OnceException;
import dev.once.OutboxHeaders;
import dev.once.StaleFencingTokenException;
import dev.once.internal.ClaimWatch;
import dev.once.internal.GuardedConnection;
import dev.once.internal.HarmlessSql;
import dev.once.internal.JdbcTarget;
import dev.once.internal.OutboxRepository;
import dev.once.internal.Transactions;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.JdbcBuilder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.HexFormat;
import java.util.Objects;

/**
 * Stripe-style idempotency keys on the {@code once_idempotency_key} table: the first request with
 * a key does the work and saves its result; a retry with the same key gets that result back
 * instead of doing the work again.
 *
 * <pre>{@code
 * IdempotencyKeys keys = IdempotencyKeys.builder().dataSource(ds).build();
 * BeginResult r = keys.begin("tenant-7", requestKey, IdempotencyKeys.fingerprint(method, path, body));
 * if (r instanceof BeginResult.Started s) {
 *     try {
 *         byte[] result = charge(...);           // the external effect, with the same key downstream
 *         keys.complete(s, 201, result);
 *     } catch (ProviderUnavailable e) {
 *         keys.fail(s, true, 503, null);          // retryable: the next request with the key starts again
 *     }
 * }
 * }</pre>
 *
 * <p><b>Contract.</b> {@link #begin} is one atomic decision: of any number of concurrent callers
 * of one key exactly one gets {@link BeginResult.Started}. A claim lasts {@link Builder#lockDuration};
 * after that another caller may take the key over with a larger fencing token, and the first
 * caller's {@link #complete}/{@link #fail} is then refused ({@link StaleFencingTokenException}), so a
 * stalled worker can never overwrite its successor's result. Keys live in a scope (tenant,
 * consumer, API client): one scope never sees another's results. A key reused with a different
 * request fingerprint answers {@link BeginResult.Mismatch}.
 *
 * <p>Expired keys are deleted by {@link dev.once.retention.IdempotencyKeyPruner}.
 *
 * <p><b>The effect and its result in one transaction.</b> Where the request's effect is a write to
 * this store's database, run it in {@link #transaction}: the effect and the saved result then commit
 * together, so no crash leaves the effect applied and the key re-runnable, and a takeover after the
 * claim lapsed cannot apply the effect twice (the stale caller's result is refused and its
 * transaction, effect included, rolls back). {@link #complete(Connection, BeginResult.Started, int, byte[])}
 * does the same inside a transaction the caller runs. An effect elsewhere (another database, an
 * external API) cannot be covered so: pass the key on to it, so that it deduplicates a re-run, or
 * send it through the outbox.
 *
 * <p>Immutable and thread-safe. Each call is one short transaction of its own, or runs in the
 * caller's transaction where a {@link Connection} is passed.
 */
public final class IdempotencyKeys {

    /** How long a started claim excludes others before it can be taken over, unless configured. */
    public static final Duration DEFAULT_LOCK_DURATION = Duration.ofMinutes(1);
    /**
     * How long a call waits for another transaction holding a key's row, unless configured. A
     * healthy holder keeps it for milliseconds (a concurrent begin, a finish until its commit), so
     * this lets a begin replay a result that is being committed instead of answering in progress,
     * while a request thread never waits much longer than a second for a transaction left open
     * (MariaDB's least wait, too: it counts whole seconds).
     */
    public static final Duration DEFAULT_LOCK_WAIT = Duration.ofSeconds(1);
    /** Largest saved result, in bytes, unless configured. */
    public static final int DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;
    /** Longest idempotency key, in characters (Stripe's limit, and the column size). */
    public static final int MAX_KEY_LENGTH = 255;
    /** Longest scope, in characters. */
    public static final int MAX_SCOPE_LENGTH = 100;
    /** Longest request fingerprint, in characters. */
    public static final int MAX_FINGERPRINT_LENGTH = 128;

    static final String PROCESSING = "processing";
    static final String SUCCEEDED = "succeeded";
    static final String FAILED = "failed";
    static final String RETRYABLE = "retryable";

    private final JdbcTarget target;
    private final Dialect dialect;
    private final Clock clock;
    private final Duration lockDuration;
    private final Duration lockWait;
    private final int maxResultBytes;
    private final String insertSql;
    private final String selectSql;
    private final String restartSql;
    private final String finishSql;
    private final String finishOwnSql;
    private final String tokenSql;
    // What each request's watch shares (its outbox part unused: a key's transaction has no outbox).
    private final ClaimWatch.Consumer watchConsumer;

    private IdempotencyKeys(Builder b, JdbcTarget t) {
        Dialect dialect = t.dialect();
        this.target = t;
        this.dialect = dialect;
        this.clock = t.clock();
        this.lockDuration = b.lockDuration;
        this.lockWait = b.lockWait;
        this.maxResultBytes = b.maxResultBytes;
        this.insertSql = dialect.keyInsert(t.tablePrefix(), lockWait);
        this.selectSql = dialect.keySelectForUpdate(t.tablePrefix(), lockWait);
        this.restartSql = dialect.keyRestart(t.tablePrefix());
        // In the caller's transaction its session's timeout governs, as for the consumer's handler.
        this.finishSql = dialect.keyFinish(t.tablePrefix(), null);
        this.finishOwnSql = dialect.keyFinish(t.tablePrefix(), lockWait);
        this.tokenSql = dialect.keyToken(t.tablePrefix());
        this.watchConsumer = new ClaimWatch.Consumer(
                dialect,
                ClaimWatch.inboxTable(t.tablePrefix()),
                new HarmlessSql(),
                new OutboxRepository(dialect, t.tablePrefix()),
                clock,
                OutboxHeaders.NONE);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The largest result {@link #complete} and {@link #fail} save. */
    public int maxResultBytes() {
        return maxResultBytes;
    }

    /**
     * A request fingerprint: the SHA-256 (hex) of the parts, each length-prefixed so that
     * {@code ("ab", "c")} and {@code ("a", "bc")} differ. Use the method, the path and the body,
     * and whatever else makes two requests "the same request".
     */
    public static String fingerprint(byte[]... parts) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            for (byte[] part : parts) {
                byte[] p = part == null ? new byte[0] : part;
                sha.update(Integer.toString(p.length).getBytes(StandardCharsets.US_ASCII));
                sha.update((byte) ':');
                sha.update(p);
            }
            return HexFormat.of().formatHex(sha.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java platform has SHA-256", e);
        }
    }

    /** {@link #fingerprint(byte[]...)} of UTF-8 strings. */
    public static String fingerprint(String... parts) {
        byte[][] bytes = new byte[parts.length][];
        for (int i = 0; i < parts.length; i++) {
            bytes[i] = parts[i] == null ? new byte[0] : parts[i].getBytes(StandardCharsets.UTF_8);
        }
        return fingerprint(bytes);
    }

    /**
     * Claims {@code key} in {@code scope} for a request with {@code fingerprint}, or reports why not.
     *
     * <p>Waits at most {@link Builder#lockWait} for another transaction that holds the key's row: a
     * concurrent begin of the key, or a caller's transaction that finished it
     * ({@link #complete(Connection, BeginResult.Started, int, byte[])}) and has not ended. Past that it
     * answers {@link BeginResult.InProgress}, whose {@code lockedUntil} is then now plus the lock wait:
     * that transaction is finishing the key, so a retry soon replays its result, or, if it rolled back,
     * meets the claim as it was. Each of its statements is bounded so (a new key's insert, an existing
     * key's read), and the wait is over once one times out.
     *
     * @return {@link BeginResult.Started} (do the work, then {@link #complete} or {@link #fail}),
     *         {@link BeginResult.Replay} (the saved result), {@link BeginResult.InProgress} (another
     *         caller holds it, or another transaction held its row past the lock wait), or
     *         {@link BeginResult.Mismatch} (the key belongs to another request)
     * @throws InvalidIdempotencyKeyException if scope, key or fingerprint is blank, too long or has control characters
     * @throws OnceException if the database fails; nothing was claimed, the caller may retry
     */
    public BeginResult begin(String scope, String key, String fingerprint) {
        validate("scope", scope, MAX_SCOPE_LENGTH);
        validate("idempotency key", key, MAX_KEY_LENGTH);
        validate("request fingerprint", fingerprint, MAX_FINGERPRINT_LENGTH);
        SQLException last = null;
        // A key pruned between the insert and the read, or a deadlock, is a race lost to another
        // statement: trying again decides it.
        for (int attempt = 0; attempt < 3; attempt++) {
            try {
                Instant now = clock.instant();
                // Microseconds, what both databases keep: the finish matches the claim by it (keyFinish).
                Instant lockedUntil = now.plus(lockDuration).truncatedTo(ChronoUnit.MICROS);
                BeginResult r = target.inTransaction(c -> insertIn(c, scope, key, fingerprint, now, lockedUntil));
                if (r == null) {
                    // The key exists. The insert's transaction has ended before the row is locked: InnoDB
                    // leaves a shared lock on the duplicate, and concurrent callers upgrading theirs to the
                    // exclusive lock of the read would deadlock each other. Nothing was written.
                    r = target.inTransaction(c -> resumeIn(c, scope, key, fingerprint, now, lockedUntil));
                }
                if (r != null) {
                    return r;
                }
            } catch (SQLException e) {
                if (dialect.isLockTimeout(e)) {
                    // Not a race to retry: the holder is a transaction still open, most likely one that
                    // finished the key and has not committed yet.
                    return new BeginResult.InProgress(clock.instant().plus(lockWait));
                }
                if (!dialect.isTransientConflict(e)) {
                    throw new OnceException(
                            "begin of idempotency key '" + key + "' in scope '" + scope + "' failed: " + e.getMessage(),
                            e);
                }
                last = e;
            }
        }
        throw new OnceException(
                "begin of idempotency key '" + key + "' in scope '" + scope + "' lost three races in a row"
                        + (last == null ? "" : ": " + last.getMessage()),
                last);
    }

    /** Claims a new key; null when the key exists. */
    private BeginResult insertIn(
            Connection c, String scope, String key, String fingerprint, Instant now, Instant lockedUntil)
            throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(insertSql)) {
            ps.setString(1, scope); // 1 scope
            ps.setString(2, key); // 2 idem_key
            ps.setString(3, fingerprint); // 3 fingerprint
            ps.setTimestamp(4, Timestamp.from(lockedUntil)); // 4 locked_until
            ps.setTimestamp(5, Timestamp.from(now)); // 5 created_at
            ps.setTimestamp(6, Timestamp.from(now)); // 6 updated_at
            if (ps.executeUpdate() == 1) {
                return new BeginResult.Started(scope, key, 1, lockedUntil);
            }
        }
        return null;
    }

    /** Reads an existing key under its row lock and replays, refuses or takes it over; null when it vanished. */
    private BeginResult resumeIn(
            Connection c, String scope, String key, String fingerprint, Instant now, Instant lockedUntil)
            throws SQLException {
        String savedFingerprint;
        String state;
        int status;
        byte[] result;
        long token;
        Instant savedLockedUntil;
        try (PreparedStatement ps = c.prepareStatement(selectSql)) {
            ps.setString(1, scope); // 1 scope
            ps.setString(2, key); // 2 idem_key
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return null;
                }
                savedFingerprint = rs.getString(1);
                state = rs.getString(2);
                status = rs.getInt(3);
                result = rs.getBytes(4);
                token = rs.getLong(5);
                Timestamp t = rs.getTimestamp(6);
                savedLockedUntil = t == null ? null : t.toInstant();
            }
        }
        if (!savedFingerprint.equals(fingerprint)) {
            return new BeginResult.Mismatch(scope, key);
        }
        if (SUCCEEDED.equals(state) || FAILED.equals(state)) {
            return new BeginResult.Replay(status, result, FAILED.equals(state));
        }
        if (PROCESSING.equals(state) && savedLockedUntil != null && now.isBefore(savedLockedUntil)) {
            return new BeginResult.InProgress(savedLockedUntil);
        }
        // Processing past its claim (the holder stalled or died), or a retryable failure: take over.
        try (PreparedStatement ps = c.prepareStatement(restartSql)) {
            ps.setTimestamp(1, Timestamp.from(lockedUntil)); // 1 locked_until
            ps.setTimestamp(2, Timestamp.from(now)); // 2 updated_at
            ps.setString(3, scope); // 3 scope
            ps.setString(4, key); // 4 idem_key
            ps.setLong(5, token); // 5 token read under the row lock
            if (ps.executeUpdate() != 1) {
                throw new IllegalStateException("key row locked by this transaction changed its token");
            }
        }
        return new BeginResult.Started(scope, key, token + 1, lockedUntil);
    }

    /**
     * Begins a transaction on this store's database for a started request, so that the request's
     * effect and its saved result commit together: apply the effect on
     * {@link KeyTransaction#connection()}, then {@link KeyTransaction#complete} saves the result and
     * commits both. A crash or error before that commits neither, and a caller that outlived its
     * claim while a successor took the key over has its result refused by the fencing token and its
     * effect rolled back with it.
     *
     * @throws OnceException if the database fails; nothing began
     */
    public KeyTransaction transaction(BeginResult.Started started) {
        Objects.requireNonNull(started, "started");
        try {
            return new KeyTransaction(this, started, target.begin());
        } catch (SQLException e) {
            throw new OnceException(
                    "beginning the transaction of idempotency key '" + started.key() + "' in scope '" + started.scope()
                            + "' failed: " + e.getMessage(),
                    e);
        }
    }

    /**
     * The connection a request's code gets from {@link KeyTransaction#connection()}: the guard the engine gives a
     * handler, so that what would end the transaction apart from its result ({@code commit}, {@code rollback()},
     * {@code setAutoCommit}, {@code close}, transaction control as SQL) is refused and remembered. Committed
     * there, the effect stood while the key was released or taken over, and a retry applied it again.
     */
    GuardedConnection guard(Connection raw, ClaimWatch watch) {
        return new GuardedConnection(raw, watch, KEY_TRANSACTION_REFUSAL);
    }

    /** What {@link #guard} reports to: the request's savepoints and the fences it checks on the guard. */
    ClaimWatch watch(Connection raw) {
        return new ClaimWatch(watchConsumer, raw);
    }

    private static final String KEY_TRANSACTION_REFUSAL = "the transaction of an idempotency key; complete or fail"
            + " commits or rolls back the effect with the key's result, so the request's effect is rolled back and"
            + " nothing is saved: remove the call";

    /**
     * Saves the result of a started request; later {@link #begin}s of the key replay it.
     *
     * @param status the status to replay (an HTTP status for HTTP callers), 0 to 999
     * @param body   the body to replay, at most {@link #maxResultBytes()}; null for none
     * @throws StaleFencingTokenException if the claim expired and another caller took the key over:
     *         this result is discarded, the successor's stands
     * @throws IdempotencyResultTooLargeException if the body exceeds the cap; nothing was saved
     * @throws OnceException if the database fails, or another transaction holds the key's row longer than
     *         {@link Builder#lockWait} (one that finished it with {@link #complete(Connection, BeginResult.Started,
     *         int, byte[])} and has not ended, perhaps this thread's own); the key stays processing and can
     *         be taken over after its claim
     */
    public void complete(BeginResult.Started started, int status, byte[] body) {
        finish(started, SUCCEEDED, status, body);
    }

    /**
     * {@link #complete(BeginResult.Started, int, byte[])} inside the caller's transaction (not
     * auto-commit): the result commits with it, or not at all. The key's row stays locked until that
     * transaction ends: another caller's {@link #begin} of the key waits for it at most
     * {@link Builder#lockWait} and answers {@link BeginResult.InProgress} past that (a retry after the
     * commit replays the result, after a rollback it meets the claim as before: in progress, or
     * started once the claim lapsed), and a finish of the key outside a transaction fails past it.
     * Commit soon after. This statement itself waits as the transaction's own lock timeout allows.
     * On MariaDB the row stays locked even after a refused finish or a rollback to a savepoint taken after the
     * transaction's first statement (InnoDB
     * keeps a transaction's row locks to its end), and its {@link dev.once.retention.IdempotencyKeyPruner}
     * waits for it too; PostgreSQL's skips it.
     */
    public void complete(Connection connection, BeginResult.Started started, int status, byte[] body)
            throws SQLException {
        finishIn(Objects.requireNonNull(connection, "connection"), finishSql, started, SUCCEEDED, status, body);
    }

    /**
     * Records that a started request failed.
     *
     * @param retryable true: nothing is saved and the next {@link #begin} of the key starts afresh
     *                  (a timeout, a 5xx); false: the failure is saved and replayed like a result
     *                  (a declined card, a validation error)
     * @throws StaleFencingTokenException if another caller took the key over
     * @throws IdempotencyResultTooLargeException if the body exceeds the cap
     * @throws OnceException as {@link #complete(BeginResult.Started, int, byte[])}: the database failed,
     *         or another transaction held the key's row longer than {@link Builder#lockWait}
     */
    public void fail(BeginResult.Started started, boolean retryable, int status, byte[] body) {
        finish(started, retryable ? RETRYABLE : FAILED, status, retryable ? null : body);
    }

    /**
     * {@link #fail(BeginResult.Started, boolean, int, byte[])} inside the caller's transaction; the key's
     * row stays locked until it ends, as with {@link #complete(Connection, BeginResult.Started, int, byte[])}.
     */
    public void fail(Connection connection, BeginResult.Started started, boolean retryable, int status, byte[] body)
            throws SQLException {
        finishIn(
                Objects.requireNonNull(connection, "connection"),
                finishSql,
                started,
                retryable ? RETRYABLE : FAILED,
                status,
                retryable ? null : body);
    }

    private void finish(BeginResult.Started started, String state, int status, byte[] body) {
        try {
            target.inTransaction(c -> {
                finishIn(c, finishOwnSql, started, state, status, body);
                return null;
            });
        } catch (SQLException e) {
            if (dialect.isLockTimeout(e)) {
                throw lockWaitExceeded(
                        started,
                        "one that finished it with complete or fail(Connection, ...) and has not ended, perhaps this"
                                + " thread's own; nothing was saved",
                        e);
            }
            throw new OnceException(
                    "saving the result of idempotency key '" + started.key() + "' in scope '" + started.scope()
                            + "' failed: " + e.getMessage(),
                    e);
        }
    }

    /**
     * Finishes the key as the last write of the request's own transaction ({@link KeyTransaction}) and
     * commits both, the finish bounded as the auto-commit one's: once's own transaction, so no caller's
     * session timeout is meant to govern it. Past the bound the whole transaction rolls back. The fences
     * the request checked on its connection are checked again first ({@link ClaimWatch#fenceAgain}).
     */
    void finishAndCommit(
            Transactions.Open tx, ClaimWatch watch, BeginResult.Started started, String state, int status, byte[] body)
            throws SQLException {
        try {
            tx.commitAfter(t -> {
                watch.fenceAgain(t.connection());
                finishIn(t.connection(), finishOwnSql, started, state, status, body);
                return null;
            });
        } catch (SQLException e) {
            if (dialect.isLockTimeout(e)) {
                throw lockWaitExceeded(
                        started,
                        "a successor's that took it over after this claim lapsed, or one taking it over; nothing was"
                                + " saved, and the transaction, its effect included, rolled back",
                        e);
            }
            throw e;
        }
    }

    private OnceException lockWaitExceeded(BeginResult.Started started, String holderAndOutcome, SQLException e) {
        return new OnceException(
                "saving the result of idempotency key '" + started.key() + "' in scope '" + started.scope()
                        + "' waited longer than lockWait (" + lockWait + ") for another transaction holding the key: "
                        + holderAndOutcome,
                e);
    }

    private void finishIn(
            Connection c, String updateSql, BeginResult.Started started, String state, int status, byte[] body)
            throws SQLException {
        Objects.requireNonNull(started, "started");
        if (status < 0 || status > 999) {
            throw new IllegalArgumentException("status must be between 0 and 999, but was " + status);
        }
        if (body != null && body.length > maxResultBytes) {
            throw new IdempotencyResultTooLargeException(started.scope(), started.key(), body.length, maxResultBytes);
        }
        Instant claimedUntil = started.lockedUntil().truncatedTo(ChronoUnit.MICROS);
        try (PreparedStatement ps = c.prepareStatement(updateSql)) {
            ps.setString(1, state); // 1 state
            ps.setInt(2, status); // 2 result_status
            ps.setBytes(3, body); // 3 result
            ps.setTimestamp(4, Timestamp.from(clock.instant())); // 4 updated_at
            ps.setString(5, started.scope()); // 5 scope
            ps.setString(6, started.key()); // 6 idem_key
            ps.setLong(7, started.token()); // 7 fencing token
            ps.setTimestamp(8, Timestamp.from(claimedUntil)); // 8 locked_until: the claim's, with the token
            if (ps.executeUpdate() == 1) {
                return;
            }
        }
        long newest;
        Instant newestUntil;
        try (PreparedStatement ps = c.prepareStatement(tokenSql)) {
            ps.setString(1, started.scope()); // 1 scope
            ps.setString(2, started.key()); // 2 idem_key
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    throw new OnceException("idempotency key '" + started.key() + "' in scope '" + started.scope()
                            + "' no longer exists (pruned after its claim lapsed); its result was not saved");
                }
                newest = rs.getLong(1);
                Timestamp t = rs.getTimestamp(2);
                newestUntil = t == null ? null : t.toInstant();
            }
        }
        if (newest == started.token() && claimedUntil.equals(newestUntil)) {
            throw new OnceException("idempotency key '" + started.key() + "' in scope '" + started.scope()
                    + "' was already finished with token " + newest + "; finish a started key once");
        }
        if (newest > started.token()) {
            throw new StaleFencingTokenException(resource(started), started.token(), newest);
        }
        throw new StaleFencingTokenException(
                resource(started),
                started.token(),
                newest,
                "the key was pruned after this claim lapsed and has been claimed anew (token " + newest
                        + ", held until " + newestUntil + ")");
    }

    private static String resource(BeginResult.Started s) {
        return "idempotency-key:" + s.scope() + "/" + s.key();
    }

    private static void validate(String what, String value, int max) {
        if (value == null || value.isBlank() || value.length() > max) {
            throw new InvalidIdempotencyKeyException(what + " must be 1 to " + max + " non-blank characters, but was "
                    + (value == null ? "null" : value.isBlank() ? "blank" : value.length() + " characters"));
        }
        for (int i = 0; i < value.length(); i++) {
            if (Character.isISOControl(value.charAt(i))) {
                throw new InvalidIdempotencyKeyException(
                        what + " must not contain control characters, but has one at" + " index " + i);
            }
        }
        int lone = dev.once.internal.Names.unpairedSurrogate(value);
        if (lone >= 0) {
            throw new InvalidIdempotencyKeyException(what + " must be well-formed UTF-16, but has an unpaired"
                    + " surrogate at index " + lone + " (it would be stored as '?' and collide with other keys)");
        }
    }

    /** Builds {@link IdempotencyKeys}; {@code dataSource} is required. Not thread-safe. */
    public static final class Builder extends JdbcBuilder<Builder> {
        private Duration lockDuration = DEFAULT_LOCK_DURATION;
        private Duration lockWait = DEFAULT_LOCK_WAIT;
        private int maxResultBytes = DEFAULT_MAX_RESULT_BYTES;

        private Builder() {}

        @Override
        protected Builder self() {
            return this;
        }

        /**
         * How long a started claim excludes other callers, 1 second to 1 day; default
         * {@link #DEFAULT_LOCK_DURATION}. Longer than the slowest request, or a retry takes over a
         * request still running (whose result is then refused by its fencing token).
         */
        public Builder lockDuration(Duration lockDuration) {
            if (lockDuration == null
                    || lockDuration.compareTo(Duration.ofSeconds(1)) < 0
                    || lockDuration.compareTo(Duration.ofDays(1)) > 0) {
                throw new InvalidConfigurationException("lockDuration must be between 1s and 1d, but was "
                        + lockDuration + ": it must outlast the slowest request the key protects");
            }
            this.lockDuration = lockDuration;
            return this;
        }

        /**
         * How long a call waits for another transaction holding a key's row, 1 ms to 1 minute; default
         * {@link #DEFAULT_LOCK_WAIT}. Past it {@link #begin} answers {@link BeginResult.InProgress}, and
         * {@link #complete(BeginResult.Started, int, byte[])} and {@link #fail(BeginResult.Started, boolean,
         * int, byte[])} throw {@link OnceException} having saved nothing, as do {@link KeyTransaction#complete}
         * and {@link KeyTransaction#fail} having rolled their whole transaction back. Longer than a concurrent begin or
         * a finish's commit holds the row (milliseconds), or results being committed are not replayed and
         * finishes racing a retry's begin fail. MariaDB counts whole seconds: it waits the value rounded up.
         */
        public Builder lockWait(Duration lockWait) {
            if (lockWait == null || lockWait.toMillis() < 1 || lockWait.compareTo(Duration.ofMinutes(1)) > 0) {
                throw new InvalidConfigurationException("lockWait must be between 1ms and 1m, but was " + lockWait
                        + ": it bounds how long a begin waits for another transaction holding the key before it"
                        + " answers InProgress");
            }
            this.lockWait = lockWait;
            return this;
        }

        /** Largest saved result in bytes, 1 to 64 MiB; default {@value #DEFAULT_MAX_RESULT_BYTES}. */
        public Builder maxResultBytes(int maxResultBytes) {
            if (maxResultBytes < 1 || maxResultBytes > 64 * 1024 * 1024) {
                throw new InvalidConfigurationException(
                        "maxResultBytes must be between 1 and 67108864, but was " + maxResultBytes);
            }
            this.maxResultBytes = maxResultBytes;
            return this;
        }

        /** @throws InvalidConfigurationException if the data source is missing or the dialect cannot be detected */
        public IdempotencyKeys build() {
            return new IdempotencyKeys(this, JdbcTarget.of(settings()));
        }
    }
}
