package dev.once.spring;

import dev.once.ClaimTiming;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.IdempotentConsumerBuilder;
import dev.once.InvalidConfigurationException;
import dev.once.MismatchPolicy;
import dev.once.OutboxHeaders;
import dev.once.OutcomeListener;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import java.time.Clock;
import java.time.Duration;
import java.util.Objects;
import javax.sql.DataSource;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.support.AbstractPlatformTransactionManager;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * {@code once} wired to one Spring {@code DataSource} and the transaction manager that manages it:
 * the {@link SpringTransactionProvider}, idempotent consumers that join the current transaction,
 * the injectable {@link OnceOutbox}, and what {@link IdempotentListener} methods run with. Define
 * one as a bean (the Boot starter does).
 *
 * <pre>{@code
 * @Bean OnceSpring once(DataSource ds, PlatformTransactionManager tm) {
 *     return OnceSpring.builder().dataSource(ds).transactionManager(tm).build();
 * }
 * }</pre>
 *
 * <p>Immutable and thread-safe.
 */
public final class OnceSpring {

    private final DataSource dataSource;
    private final PlatformTransactionManager transactionManager;
    private final SpringTransactionProvider transactions;
    private final TransactionTemplate transactionTemplate;
    private final TransactionTemplate nestedTransactionTemplate;
    private final Dialect dialect;
    private final String tablePrefix;
    private final Duration lockTimeout;
    private final MismatchPolicy mismatchPolicy;
    private final MeterRegistry meterRegistry;
    private final Clock clock;
    private final OutcomeListener outcomeListener;
    private final OutboxHeaders outboxHeaders;
    private final OnceOutbox outbox;

    private OnceSpring(Builder b) {
        this.dataSource = b.dataSource;
        this.transactionManager = b.transactionManager;
        this.transactions = SpringTransactionProvider.of(b.dataSource, b.transactionManager);
        this.transactionTemplate = new TransactionTemplate(b.transactionManager);
        this.transactionTemplate.setName("once");
        this.nestedTransactionTemplate = allowsNested(b.transactionManager) ? nested(b.transactionManager) : null;
        this.dialect = b.dialect != null ? b.dialect : Dialects.detect(b.dataSource);
        this.tablePrefix = b.tablePrefix;
        this.lockTimeout = b.lockTimeout;
        this.mismatchPolicy = b.mismatchPolicy;
        this.meterRegistry = b.meterRegistry;
        this.clock = b.clock;
        this.outcomeListener = b.outcomeListener;
        this.outboxHeaders = b.outboxHeaders;
        this.outbox = new OnceOutbox(this);
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Whether an {@link IdempotentListener} body in a transaction of its own can be confined to the guarded
     * connection ({@link ConfinedConnectionHolder}): the transaction manager binds a JDBC
     * {@code ConnectionHolder} and nothing else (a JPA session's statements would pass it by).
     */
    boolean confinesListeners() {
        return transactionManager instanceof DataSourceTransactionManager;
    }

    /** The provider that joins the current Spring transaction on {@link #dataSource()}. */
    public SpringTransactionProvider transactions() {
        return transactions;
    }

    /**
     * An idempotent consumer whose {@code process} joins the caller's Spring transaction: call it from a
     * {@code @Transactional} method; the outcome is final after that method's commit (reported to the
     * outcome listener and metrics then).
     */
    public IdempotentConsumer consumer(String consumer, Handler handler) {
        return consumerBuilder().consumer(consumer).handler(handler).build();
    }

    /**
     * A consumer that runs each delivery in a Spring transaction of its own on the transaction
     * manager, as an {@link IdempotentListener} method does: the handler's {@code JdbcTemplate}, JPA
     * and {@link #outbox()} writes and the claim commit together, a failed outcome rolls them back, and
     * the outcome returned is the one after the commit (a failed commit is {@code FAILED_RETRYABLE}).
     * For listeners not annotated, and for the test kit's {@code IdempotentHandlerContract}.
     * {@code processBatch} runs one transaction per delivery.
     *
     * <p>Its {@code process} throws {@code IllegalTransactionStateException} (nothing processed) when
     * called inside a transaction of this transaction manager: the outcome could not be final there.
     * Use {@link #consumer} to process a delivery as part of the caller's transaction.
     */
    public IdempotentConsumer transactionalConsumer(String consumer, Handler handler) {
        return new TransactionalConsumer(consumer(consumer, handler), transactionTemplate);
    }

    /** A builder preset with this instance's transactions, dialect, prefix, lock timeout, meters and clock. */
    public IdempotentConsumerBuilder consumerBuilder() {
        IdempotentConsumerBuilder b = IdempotentConsumer.builder()
                .transactions(transactions)
                .dialect(dialect)
                .tablePrefix(tablePrefix)
                .meterRegistry(meterRegistry)
                .clock(clock)
                .outboxHeaders(outboxHeaders)
                .onMismatch(mismatchPolicy);
        if (lockTimeout != null) {
            b.lockTimeout(lockTimeout);
        }
        if (outcomeListener != null) {
            b.outcomeListener(outcomeListener);
        }
        return b;
    }

    /**
     * The consumer of {@link IdempotentListener} calls that claim first, each in a transaction the
     * listener's template began for it alone: the claim is its first statement, so it may be the plain
     * insert (cheaper than {@code ON CONFLICT}) after which a duplicate rolls the transaction back.
     */
    IdempotentConsumer ownTransactionConsumer(String consumer, Handler handler) {
        return consumerBuilder()
                .transactions(transactions.perCall())
                .consumer(consumer)
                .handler(handler)
                .build();
    }

    /**
     * The consumer of {@link IdempotentListener} calls with {@link ClaimTiming#AT_COMMIT}, each in a
     * transaction the listener's template began for it alone.
     *
     * @throws InvalidConfigurationException where the claim at commit cannot be kept (MariaDB, a lock
     *     timeout, a mismatch policy): named by the engine's builder
     */
    IdempotentConsumer atCommitConsumer(String consumer, Handler handler) {
        return consumerBuilder()
                .transactions(transactions.perCall())
                .consumer(consumer)
                .handler(handler)
                .claimTiming(ClaimTiming.AT_COMMIT)
                .build();
    }

    /** The outbox usable from any {@code @Transactional} method of this {@code DataSource}. */
    public OnceOutbox outbox() {
        return outbox;
    }

    public DataSource dataSource() {
        return dataSource;
    }

    public PlatformTransactionManager transactionManager() {
        return transactionManager;
    }

    /** The template {@link IdempotentListener} methods run in: propagation REQUIRED on the transaction manager. */
    public TransactionTemplate transactionTemplate() {
        return transactionTemplate;
    }

    /**
     * Propagation NESTED on the transaction manager: a savepoint in the transaction a Kafka listener container
     * began, a transaction of its own when the container began none on this {@code DataSource}. A Kafka
     * {@link IdempotentListener} call runs in it inside the container's transaction, so that a claim that timed out
     * waiting for another transaction is undone alone and tried again, instead of failing the record. Null when the
     * transaction manager refuses nested transactions (a {@code JpaTransactionManager} or a {@code
     * JtaTransactionManager} as they come): there the call joins the open transaction as before, which NESTED would
     * have failed on every record.
     */
    TransactionTemplate nestedTransactionTemplate() {
        return nestedTransactionTemplate;
    }

    /**
     * The NESTED step a listener call runs in, or null when it runs in {@link #transactionTemplate()} (a transaction
     * of its own, or joining the open one): NESTED only for a Kafka listener ({@code kafka}) in a transaction already
     * open on this thread, on a transaction manager that allows nested transactions. One decision for the record
     * and the batch path.
     */
    NestedListenerStep nestedStep(boolean kafka) {
        return kafka
                        && nestedTransactionTemplate != null
                        && TransactionSynchronizationManager.isActualTransactionActive()
                ? new NestedListenerStep(nestedTransactionTemplate)
                : null;
    }

    private static boolean allowsNested(PlatformTransactionManager tm) {
        return tm instanceof AbstractPlatformTransactionManager a && a.isNestedTransactionAllowed();
    }

    private static TransactionTemplate nested(PlatformTransactionManager tm) {
        TransactionTemplate t = new TransactionTemplate(tm);
        t.setName("once");
        t.setPropagationBehavior(TransactionDefinition.PROPAGATION_NESTED);
        return t;
    }

    public Dialect dialect() {
        return dialect;
    }

    public String tablePrefix() {
        return tablePrefix;
    }

    public Clock clock() {
        return clock;
    }

    /** The headers {@link #outbox()} stores with every row at add time. */
    public OutboxHeaders outboxHeaders() {
        return outboxHeaders;
    }

    /** Builds {@link OnceSpring}; {@code dataSource} and {@code transactionManager} are required. Not thread-safe. */
    public static final class Builder {
        private DataSource dataSource;
        private PlatformTransactionManager transactionManager;
        private Dialect dialect;
        private String tablePrefix = TablePrefix.DEFAULT;
        private Duration lockTimeout;
        private MismatchPolicy mismatchPolicy = IdempotentConsumerBuilder.DEFAULT_MISMATCH_POLICY;
        private MeterRegistry meterRegistry = Metrics.globalRegistry;
        private Clock clock = Clock.systemUTC();
        private OutcomeListener outcomeListener;
        private OutboxHeaders outboxHeaders = OutboxHeaders.NONE;

        private Builder() {}

        /** The business database, the one {@link #transactionManager} manages. Required. */
        public Builder dataSource(DataSource dataSource) {
            this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
            return this;
        }

        /**
         * The application's {@code DataSourceTransactionManager}, {@code JdbcTransactionManager} or
         * {@code JpaTransactionManager} on {@link #dataSource}. Required; the match is checked at
         * {@link #build()}.
         */
        public Builder transactionManager(PlatformTransactionManager transactionManager) {
            this.transactionManager = Objects.requireNonNull(transactionManager, "transactionManager");
            return this;
        }

        /** The SQL dialect; detected from the database at {@link #build()} when not set. */
        public Builder dialect(Dialect dialect) {
            this.dialect = Objects.requireNonNull(dialect, "dialect");
            return this;
        }

        /** Table prefix, default {@value TablePrefix#DEFAULT}. */
        public Builder tablePrefix(String tablePrefix) {
            this.tablePrefix = TablePrefix.validate(tablePrefix);
            return this;
        }

        /** See {@link IdempotentConsumerBuilder#onMismatch}; {@link MismatchPolicy#OFF} by default. */
        public Builder onMismatch(MismatchPolicy mismatchPolicy) {
            this.mismatchPolicy = Objects.requireNonNull(mismatchPolicy, "mismatchPolicy");
            return this;
        }

        /** See {@link IdempotentConsumerBuilder#lockTimeout}; not set by default. */
        public Builder lockTimeout(Duration lockTimeout) {
            this.lockTimeout = Objects.requireNonNull(lockTimeout, "lockTimeout");
            return this;
        }

        /** Where meters go; default Micrometer's global registry. */
        public Builder meterRegistry(MeterRegistry meterRegistry) {
            this.meterRegistry = Objects.requireNonNull(meterRegistry, "meterRegistry");
            return this;
        }

        public Builder clock(Clock clock) {
            this.clock = Objects.requireNonNull(clock, "clock");
            return this;
        }

        /** Told every delivery's final outcome, after its transaction ended. */
        public Builder outcomeListener(OutcomeListener outcomeListener) {
            this.outcomeListener = Objects.requireNonNull(outcomeListener, "outcomeListener");
            return this;
        }

        /**
         * Headers stored with every outbox row at add time, such as {@link OnceTracing#outboxHeaders()}
         * (the Boot starter sets that one when a Micrometer {@code Tracer} is present); none by default.
         */
        public Builder outboxHeaders(OutboxHeaders outboxHeaders) {
            this.outboxHeaders = Objects.requireNonNull(outboxHeaders, "outboxHeaders");
            return this;
        }

        /**
         * @throws InvalidConfigurationException if a required setting is missing or the transaction
         *         manager manages another {@code DataSource}
         */
        public OnceSpring build() {
            if (dataSource == null || transactionManager == null) {
                throw new InvalidConfigurationException("dataSource and transactionManager are required, but "
                        + (dataSource == null ? "dataSource " : "")
                        + (transactionManager == null ? "transactionManager " : "") + "was not set");
            }
            return new OnceSpring(this);
        }
    }
}
