package dev.once;

import dev.once.internal.DefaultIdempotentConsumer;
import dev.once.internal.Names;
import dev.once.internal.Transactions;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.tx.TransactionHandle;
import dev.once.tx.TransactionProvider;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Predicate;
import javax.sql.DataSource;

/**
 * Builds an {@link IdempotentConsumer}. Setters check their argument at once; {@link #build()}
 * checks what is missing and copies everything, so the consumer never changes after it is built.
 * Not thread-safe.
 */
public final class IdempotentConsumerBuilder {

    /** Times a transaction that hit a deadlock or serialization failure is tried again before FAILED_RETRYABLE. */
    public static final int DEFAULT_MAX_CONFLICT_RETRIES = 5;

    /** No payload fingerprints kept or compared: the claim writes no more than the event id. */
    public static final MismatchPolicy DEFAULT_MISMATCH_POLICY = MismatchPolicy.OFF;

    private DataSource dataSource;
    private TransactionProvider transactions;
    private String consumer;
    private Handler handler;
    private BatchHandler batchHandler;
    private Dialect dialect;
    private String tablePrefix = TablePrefix.DEFAULT;
    private Duration lockTimeout;
    private RetryPolicy conflictRetries = RetryPolicy.DEFAULT_CONFLICT_RETRIES;
    private OutcomeListener outcomeListener;
    private Predicate<Throwable> permanentFailure = t -> t instanceof PermanentFailureException;
    private MeterRegistry meterRegistry = Metrics.globalRegistry;
    private Clock clock = Clock.systemUTC();
    private MismatchPolicy mismatchPolicy = DEFAULT_MISMATCH_POLICY;
    private OutboxHeaders outboxHeaders = OutboxHeaders.NONE;
    private ClaimTiming claimTiming = ClaimTiming.BEFORE_HANDLER;

    IdempotentConsumerBuilder() {}

    /**
     * Where the claim, the handler's writes and the outbox live: the business database. The engine
     * owns each transaction on it ({@link TransactionProvider#owning}). Required unless
     * {@link #transactions} is set; its connections must arrive in auto-commit mode.
     */
    public IdempotentConsumerBuilder dataSource(DataSource dataSource) {
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
        return this;
    }

    /**
     * Where the engine's transactions come from, instead of {@link #dataSource}: an owned provider,
     * or a joining one (Spring-managed, JTA, {@link dev.once.tx.ManualTransactions}) so that the claim
     * and the handler run on the caller's connection, inside the caller's transaction.
     *
     * <p>When the provider joins, the engine commits nothing. {@code process} then returns a
     * <em>provisional</em> outcome: an {@code APPLIED} read before the caller's commit is not final,
     * and the caller must not acknowledge the message before its own commit succeeded. The final
     * outcome goes to metrics and to the {@link #outcomeListener} from the caller's commit or rollback
     * (an {@code APPLIED} whose transaction rolled back becomes {@code FAILED_RETRYABLE}). A failing
     * handler or claim marks the caller's transaction rollback-only. Deadlocks are not retried
     * inside a joined transaction (it is aborted with them); the caller retries its whole
     * transaction. The dialect is detected from the first connection unless {@link #dialect} is set.
     */
    public IdempotentConsumerBuilder transactions(TransactionProvider transactions) {
        this.transactions = Objects.requireNonNull(transactions, "transactions");
        return this;
    }

    /**
     * Told each delivery's final outcome after its transaction ended (see {@link OutcomeListener});
     * the way to learn the outcome of a joined transaction. Not set by default.
     */
    public IdempotentConsumerBuilder outcomeListener(OutcomeListener outcomeListener) {
        this.outcomeListener = Objects.requireNonNull(outcomeListener, "outcomeListener");
        return this;
    }

    /** The consumer name that scopes claims, matching {@code [a-z0-9._-]{1,100}}. Required. */
    public IdempotentConsumerBuilder consumer(String consumer) {
        this.consumer = Names.consumer(consumer);
        return this;
    }

    /** The business effect. Required. */
    public IdempotentConsumerBuilder handler(Handler handler) {
        this.handler = Objects.requireNonNull(handler, "handler");
        return this;
    }

    /**
     * The business effect of a whole batch, instead of {@link #handler}: called once per
     * transaction with the deliveries it claimed, so the effect can be applied set-wise (one
     * {@code UPDATE … FROM unnest(…)}, one JDBC batch). A failing batch is bisected until the
     * failing delivery stands alone. Set exactly one of {@code handler} and {@code batchHandler}.
     */
    public IdempotentConsumerBuilder batchHandler(BatchHandler batchHandler) {
        this.batchHandler = Objects.requireNonNull(batchHandler, "batchHandler");
        return this;
    }

    /** The SQL dialect; detected from the database at {@link #build()} when not set. */
    public IdempotentConsumerBuilder dialect(Dialect dialect) {
        this.dialect = Objects.requireNonNull(dialect, "dialect");
        return this;
    }

    /** Table prefix, default {@value TablePrefix#DEFAULT}; must match the one given to {@link Schema#migrate}. */
    public IdempotentConsumerBuilder tablePrefix(String tablePrefix) {
        this.tablePrefix = TablePrefix.validate(tablePrefix);
        return this;
    }

    /**
     * How long a delivery waits for a concurrent delivery of the same event before it is
     * reported {@link Outcome.Status#IN_PROGRESS} (1 ms to 1 h). Not set by default: the duplicate
     * waits until the first transaction ends, or as long as the session's own {@code lock_timeout}
     * allows. Setting {@code lock_timeout} on the database role ({@code ALTER ROLE app SET
     * lock_timeout = '5s'}) gives the same IN_PROGRESS outcome at no cost per claim; this setting
     * adds it to every claim statement, which costs a few percent of a one-event transaction. It
     * bounds the claim only: the handler's statements (and a joined caller's) keep the session's
     * {@code lock_timeout}.
     */
    public IdempotentConsumerBuilder lockTimeout(Duration lockTimeout) {
        this.lockTimeout = Inbox.validLockTimeout(lockTimeout);
        return this;
    }

    /** Retries after a deadlock or serialization failure (0 to 100), default {@value #DEFAULT_MAX_CONFLICT_RETRIES}. */
    public IdempotentConsumerBuilder maxConflictRetries(int maxConflictRetries) {
        if (maxConflictRetries < 0 || maxConflictRetries > 100) {
            throw new InvalidConfigurationException(
                    "maxConflictRetries must be between 0 and 100, but was " + maxConflictRetries);
        }
        this.conflictRetries =
                conflictRetries.toBuilder().maxRetries(maxConflictRetries).build();
        return this;
    }

    /**
     * The backoff and limit of retries after a deadlock or serialization failure, default
     * {@link RetryPolicy#DEFAULT_CONFLICT_RETRIES}; replaces what {@link #maxConflictRetries} set.
     * At most 100 retries.
     */
    public IdempotentConsumerBuilder conflictRetries(RetryPolicy conflictRetries) {
        Objects.requireNonNull(conflictRetries, "conflictRetries");
        if (conflictRetries.maxRetries() > 100) {
            throw new InvalidConfigurationException("conflictRetries.maxRetries must be at most 100, but was "
                    + conflictRetries.maxRetries() + ": a transaction that keeps deadlocking holds its delivery");
        }
        this.conflictRetries = conflictRetries;
        return this;
    }

    /**
     * Which handler exceptions are permanent ({@link Outcome.Status#FAILED_PERMANENT}, dead-lettered)
     * in addition to {@link PermanentFailureException} and {@link HandlerMisuseException}. Everything
     * else is retryable.
     */
    public IdempotentConsumerBuilder permanentFailure(Predicate<Throwable> permanentFailure) {
        Objects.requireNonNull(permanentFailure, "permanentFailure");
        this.permanentFailure = t -> t instanceof PermanentFailureException || permanentFailure.test(t);
        return this;
    }

    /** Where meters go; default Micrometer's global registry. */
    public IdempotentConsumerBuilder meterRegistry(MeterRegistry meterRegistry) {
        this.meterRegistry = Objects.requireNonNull(meterRegistry, "meterRegistry");
        return this;
    }

    /**
     * What to do with a duplicate whose payload differs from the one applied (an event id the
     * producer reused), default {@link #DEFAULT_MISMATCH_POLICY}: {@link MismatchPolicy#COUNT} or
     * {@link MismatchPolicy#FAIL_PERMANENT} keep a fingerprint of each claimed payload (schema
     * migration V8) and compare it on every duplicate. An applied delivery costs no extra round
     * trip; a duplicate costs one read of the stored fingerprint (one per batch on the batch path).
     */
    public IdempotentConsumerBuilder onMismatch(MismatchPolicy mismatchPolicy) {
        this.mismatchPolicy = Objects.requireNonNull(mismatchPolicy, "mismatchPolicy");
        return this;
    }

    /** The clock stamped on claims and outbox rows; tests inject one to move time. */
    public IdempotentConsumerBuilder clock(Clock clock) {
        this.clock = Objects.requireNonNull(clock, "clock");
        return this;
    }

    /**
     * Headers added to every row the handler adds to {@code tx.outbox()}, on the handler's thread:
     * the hook a tracing integration uses to store the trace context of the delivery being handled
     * with each row (see {@link OutboxHeaders}). Default {@link OutboxHeaders#NONE}.
     */
    public IdempotentConsumerBuilder outboxHeaders(OutboxHeaders outboxHeaders) {
        if (outboxHeaders == null) {
            throw new InvalidConfigurationException("outboxHeaders must not be null (OutboxHeaders.NONE for none)");
        }
        this.outboxHeaders = outboxHeaders;
        return this;
    }

    /**
     * When {@link IdempotentConsumer#process} claims the event id, default {@link ClaimTiming#BEFORE_HANDLER};
     * {@link ClaimTiming#AT_COMMIT} saves a round trip per delivery for handlers whose every effect is
     * in the transaction (read its contract there). Checked against the other settings at {@link #build()}.
     */
    public IdempotentConsumerBuilder claimTiming(ClaimTiming claimTiming) {
        this.claimTiming = Objects.requireNonNull(claimTiming, "claimTiming");
        return this;
    }

    /**
     * @throws InvalidConfigurationException naming what is missing, or if the dialect cannot be detected,
     *     or a setting {@link ClaimTiming#AT_COMMIT} cannot keep
     */
    public IdempotentConsumer build() {
        if (dataSource != null && transactions != null) {
            throw new InvalidConfigurationException("set either dataSource or transactions, but both were set:"
                    + " dataSource(ds) is transactions(TransactionProvider.owning(ds))");
        }
        boolean noDatabase = dataSource == null && transactions == null;
        if (handler != null && batchHandler != null) {
            throw new InvalidConfigurationException("set either handler or batchHandler, but both were set: a"
                    + " consumer applies each batch one way, per event (handler) or set-wise (batchHandler)");
        }
        boolean noHandler = handler == null && batchHandler == null;
        if (noDatabase || consumer == null || noHandler) {
            throw new InvalidConfigurationException("dataSource (or transactions), consumer and handler (or"
                    + " batchHandler) are required, but " + (noDatabase ? "dataSource " : "")
                    + (consumer == null ? "consumer " : "") + (noHandler ? "handler " : "") + "was not set");
        }
        TransactionProvider provider = transactions != null ? transactions : TransactionProvider.owning(dataSource);
        Dialect d = dialect != null ? dialect : detect(provider);
        if (claimTiming == ClaimTiming.AT_COMMIT) {
            refuseAtCommit(provider, d);
        }
        Inbox inbox = Inbox.of(d, tablePrefix, lockTimeout, clock);
        return new DefaultIdempotentConsumer(
                new Transactions(provider),
                consumer,
                handler,
                batchHandler,
                inbox,
                conflictRetries,
                permanentFailure,
                meterRegistry,
                clock,
                outcomeListener,
                mismatchPolicy,
                outboxHeaders,
                claimTiming);
    }

    private void refuseAtCommit(TransactionProvider provider, Dialect d) {
        String why = null;
        if (provider.joins() && !provider.dedicated()) {
            why = "the transactions are joined: a duplicate found by the claim at the caller's commit would roll back"
                    + " the caller's own work with it";
        } else if (provider.joins() && d.claimAtJoinedCommit(tablePrefix) == null) {
            why = "the dialect " + d.name() + " cannot claim at the commit of a joined transaction (a deadlock the"
                    + " handler's own statements caught would go on in a new transaction the claim cannot tell apart)";
        } else if (lockTimeout != null) {
            why = "lockTimeout(" + lockTimeout + ") is set: it bounds the claim's wait for a copy in progress"
                    + " before the handler, and a claim at commit comes after it";
        } else if (mismatchPolicy != MismatchPolicy.OFF) {
            why = "onMismatch(" + mismatchPolicy + ") compares the stored fingerprint when the claim finds the id"
                    + " taken, before the handler";
        } else if (d.claimAtCommit(tablePrefix) == null) {
            why = "the dialect " + d.name() + " has no claim at commit";
        }
        if (why != null) {
            throw new InvalidConfigurationException(
                    "claimTiming(AT_COMMIT) cannot be kept: " + why + "; use ClaimTiming.BEFORE_HANDLER (the default)");
        }
    }

    // An owned provider's first connection also proves the pool hands out auto-commit connections,
    // so that misconfiguration fails here rather than on every delivery.
    private Dialect detect(TransactionProvider provider) {
        if (dataSource != null) {
            try (Connection c = dataSource.getConnection()) {
                if (!c.getAutoCommit()) {
                    throw new InvalidConfigurationException("dataSource hands out connections with auto-commit off,"
                            + " but the engine owns its transactions and would commit whatever such a connection"
                            + " already holds (a transaction-aware proxy hands out the caller's transaction this way):"
                            + " configure the pool with auto-commit on, or join the caller's transaction with"
                            + " transactions(...)");
                }
                return Dialects.detect(c);
            } catch (SQLException e) {
                throw new InvalidConfigurationException("could not detect the SQL dialect, the database did not"
                        + " answer (" + e.getMessage() + "); set dialect(...) explicitly or check the DataSource");
            }
        }
        try (TransactionHandle h = provider.begin()) {
            return Dialects.detect(h.connection());
        } catch (SQLException e) {
            throw new InvalidConfigurationException("could not detect the SQL dialect through transactions ("
                    + e.getMessage() + "); set dialect(...) explicitly when no transaction is open at build()");
        }
    }
}
