package dev.once;

import dev.once.internal.DefaultIdempotentConsumer;
import dev.once.internal.Names;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;

import javax.sql.DataSource;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Predicate;

/**
 * Builds an {@link IdempotentConsumer}. Setters check their argument at once; {@link #build()}
 * checks what is missing and copies everything, so the consumer never changes after it is built.
 * Not thread-safe.
 */
public final class IdempotentConsumerBuilder {

    /** Times a transaction that hit a deadlock or serialization failure is tried again before FAILED_RETRYABLE. */
    public static final int DEFAULT_MAX_CONFLICT_RETRIES = 5;

    private DataSource dataSource;
    private String consumer;
    private Handler handler;
    private Dialect dialect;
    private String tablePrefix = TablePrefix.DEFAULT;
    private Duration lockTimeout;
    private int maxConflictRetries = DEFAULT_MAX_CONFLICT_RETRIES;
    private Predicate<Throwable> permanentFailure = t -> t instanceof PermanentFailureException;
    private MeterRegistry meterRegistry = Metrics.globalRegistry;
    private Clock clock = Clock.systemUTC();

    IdempotentConsumerBuilder() {
    }

    /** Where the claim, the handler's writes and the outbox live: the business database. Required. */
    public IdempotentConsumerBuilder dataSource(DataSource dataSource) {
        this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
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
     * adds it to every claim statement, which costs a few percent of a one-event transaction.
     */
    public IdempotentConsumerBuilder lockTimeout(Duration lockTimeout) {
        this.lockTimeout = Inbox.validLockTimeout(lockTimeout);
        return this;
    }

    /** Retries after a deadlock or serialization failure (0 to 100), default {@value #DEFAULT_MAX_CONFLICT_RETRIES}. */
    public IdempotentConsumerBuilder maxConflictRetries(int maxConflictRetries) {
        if (maxConflictRetries < 0 || maxConflictRetries > 100) {
            throw new InvalidConfigurationException("maxConflictRetries must be between 0 and 100, but was "
                    + maxConflictRetries);
        }
        this.maxConflictRetries = maxConflictRetries;
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

    /** The clock stamped on claims and outbox rows; tests inject one to move time. */
    public IdempotentConsumerBuilder clock(Clock clock) {
        this.clock = Objects.requireNonNull(clock, "clock");
        return this;
    }

    /**
     * @throws InvalidConfigurationException naming what is missing, or if the dialect cannot be detected
     */
    public IdempotentConsumer build() {
        if (dataSource == null || consumer == null || handler == null) {
            throw new InvalidConfigurationException("dataSource, consumer and handler are required, but "
                    + (dataSource == null ? "dataSource " : "") + (consumer == null ? "consumer " : "")
                    + (handler == null ? "handler " : "") + "was not set");
        }
        Dialect d = dialect != null ? dialect : Dialects.detect(dataSource);
        Inbox inbox = Inbox.of(d, tablePrefix, lockTimeout, clock);
        return new DefaultIdempotentConsumer(dataSource, consumer, handler, inbox, maxConflictRetries,
                permanentFailure, meterRegistry, clock);
    }

}
