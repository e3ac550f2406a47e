package dev.once.spring.boot;

import dev.once.InvalidConfigurationException;
import dev.once.MismatchPolicy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.DeprecatedConfigurationProperty;

/**
 * Settings of the {@code once} auto-configuration, under {@code once.*}. Defaults are literals so the
 * configuration processor records them in the metadata; a test pins them to the core constants
 * ({@code OutboxRelay.DEFAULT_*}, {@code InboxPruner.DEFAULT_REDELIVERY_HORIZON}, …).
 */
@ConfigurationProperties(prefix = "once")
public class OnceProperties {

    /** Whether once is auto-configured at all. */
    private boolean enabled = true;

    /** Prefix of the once tables; must match the one the schema was created with. */
    private String tablePrefix = "once_";

    /**
     * How long a delivery waits for a concurrent delivery of the same event before it is reported
     * IN_PROGRESS and left for redelivery (a @KafkaListener record waits again instead, keeping its
     * partition's order, and a @RabbitListener, @SqsListener or Pub/Sub message, keeping its delivery limit). Unset: the session's own
     * lock_timeout applies.
     */
    private Duration lockTimeout;

    /**
     * What a duplicate whose payload differs from the claimed one does (an event id reused for
     * another payload, a producer bug dedupe would hide): OFF, COUNT (once.duplicates.mismatched and a
     * log line with both fingerprints) or FAIL_PERMANENT (also reported for dead-lettering). Needs
     * migration V8.
     */
    private MismatchPolicy onMismatch = MismatchPolicy.OFF;

    private final Schema schema = new Schema();
    private final Relay relay = new Relay();
    private final Retention retention = new Retention();
    private final Http http = new Http();
    private final Tracing tracing = new Tracing();

    public boolean isEnabled() {
        return enabled;
    }

    public void setEnabled(boolean enabled) {
        this.enabled = enabled;
    }

    public String getTablePrefix() {
        return tablePrefix;
    }

    public void setTablePrefix(String tablePrefix) {
        this.tablePrefix = tablePrefix;
    }

    public Duration getLockTimeout() {
        return lockTimeout;
    }

    public void setLockTimeout(Duration lockTimeout) {
        this.lockTimeout = lockTimeout;
    }

    public MismatchPolicy getOnMismatch() {
        return onMismatch;
    }

    public void setOnMismatch(MismatchPolicy onMismatch) {
        this.onMismatch = onMismatch;
    }

    public Schema getSchema() {
        return schema;
    }

    public Tracing getTracing() {
        return tracing;
    }

    /** Tracing through the outbox, when Micrometer Tracing is configured. */
    public static class Tracing {
        /**
         * Whether outbox rows store the caller's trace context (traceparent) and the relay sends each in a
         * span linked to it, when a Micrometer Tracer and Propagator are defined.
         */
        private boolean enabled = true;

        public boolean isEnabled() {
            return enabled;
        }

        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }
    }

    public Relay getRelay() {
        return relay;
    }

    public Retention getRetention() {
        return retention;
    }

    public Http getHttp() {
        return http;
    }

    /** The once tables. */
    public static class Schema {

        /** When the starter creates or upgrades the once tables, after Spring Boot's convention for libraries. */
        public enum Initialization {
            /**
             * Only in an embedded database (H2, HSQLDB, Derby), which once does not support: in practice the
             * tables come from {@code always}, Flyway or Liquibase.
             */
            EMBEDDED,
            /** At every start ({@code Schema.migrate}: the migrations the database lacks, under a lock). */
            ALWAYS,
            /** Never: Flyway, Liquibase or a person runs the migrations. */
            NEVER
        }

        /**
         * When to create or upgrade the once tables at startup: embedded (Spring Boot's default for library
         * tables), always, or never. Whatever the mode, a missing or outdated schema stops the start with a
         * message that names the fix; with Flyway on the class path once's migration runs in the application's
         * Flyway history, and Liquibase users include classpath:db/changelog/once/changelog.xml.
         */
        private Initialization initializeSchema = Initialization.EMBEDDED;

        /** The former switch: true is initialize-schema=always. */
        private boolean migrate = false;

        public Initialization getInitializeSchema() {
            return initializeSchema;
        }

        public void setInitializeSchema(Initialization initializeSchema) {
            this.initializeSchema = initializeSchema;
        }

        @DeprecatedConfigurationProperty(replacement = "once.schema.initialize-schema", since = "0.1.0")
        @Deprecated(since = "0.1.0")
        public boolean isMigrate() {
            return migrate;
        }

        @Deprecated(since = "0.1.0")
        public void setMigrate(boolean migrate) {
            this.migrate = migrate;
        }

        /**
         * The mode in force: {@code migrate=true} is {@code always}; with {@code initialize-schema=never} it is
         * a contradiction and refused.
         *
         * @throws InvalidConfigurationException naming both properties
         */
        @SuppressWarnings("deprecation")
        public Initialization initialization() {
            if (isMigrate() && initializeSchema == Initialization.NEVER) {
                throw new InvalidConfigurationException("once.schema.migrate=true contradicts"
                        + " once.schema.initialize-schema=never: remove once.schema.migrate (it is the former name"
                        + " of initialize-schema=always)");
            }
            return isMigrate() ? Initialization.ALWAYS : initializeSchema;
        }
    }

    /** The outbox relay, started and stopped with the application context. */
    public static class Relay {
        /** Whether to run an outbox relay in this application. */
        private boolean enabled = true;

        /** Rows sent per transaction. */
        private int batchSize = 100;

        /** How often the relay polls when no notification wakes it. */
        private Duration pollInterval = Duration.ofSeconds(1);

        /** Attempts before a row goes to dead. */
        private int maxAttempts = 10;

        /** Backoff after the first failed attempt, doubled per attempt. */
        private Duration initialBackoff = Duration.ofSeconds(1);

        /** Longest backoff between attempts. */
        private Duration maxBackoff = Duration.ofMinutes(5);

        /** Name of a lease to hold while sending (one relay sends at a time, fenced); unset: no lease. */
        private String lease;

        /** Time to live of the relay's lease. */
        private Duration leaseTtl = Duration.ofSeconds(30);

        public boolean isEnabled() {
            return enabled;
        }

        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        public int getBatchSize() {
            return batchSize;
        }

        public void setBatchSize(int batchSize) {
            this.batchSize = batchSize;
        }

        public Duration getPollInterval() {
            return pollInterval;
        }

        public void setPollInterval(Duration pollInterval) {
            this.pollInterval = pollInterval;
        }

        public int getMaxAttempts() {
            return maxAttempts;
        }

        public void setMaxAttempts(int maxAttempts) {
            this.maxAttempts = maxAttempts;
        }

        public Duration getInitialBackoff() {
            return initialBackoff;
        }

        public void setInitialBackoff(Duration initialBackoff) {
            this.initialBackoff = initialBackoff;
        }

        public Duration getMaxBackoff() {
            return maxBackoff;
        }

        public void setMaxBackoff(Duration maxBackoff) {
            this.maxBackoff = maxBackoff;
        }

        public String getLease() {
            return lease;
        }

        public void setLease(String lease) {
            this.lease = lease;
        }

        public Duration getLeaseTtl() {
            return leaseTtl;
        }

        public void setLeaseTtl(Duration leaseTtl) {
            this.leaseTtl = leaseTtl;
        }
    }

    /** Scheduled pruning of old inbox and outbox rows. */
    public static class Retention {
        /** Whether to prune on a schedule in this application. */
        private boolean enabled = true;

        /** How often the pruners run. */
        private Duration interval = Duration.ofHours(1);

        /** How long a processed event id is kept; at least the redelivery horizon. */
        private Duration inbox = Duration.ofDays(7);

        /**
         * The longest time after which a copy of an event can still arrive (topic retention, SQS retention
         * plus redrive); a shorter inbox retention is refused at startup.
         */
        private Duration redeliveryHorizon = Duration.ofDays(7);

        /** How long sent and dead outbox rows are kept. */
        private Duration outbox = Duration.ofDays(7);

        /**
         * How long the position of an ordered stream (an SQS FIFO message group) is kept after it last moved; at least
         * a minute. A message behind the position of a stream that was pruned applies after its successors: keep it
         * at least the queue's retention plus its visibility timeout.
         */
        private Duration streamPositions = Duration.ofDays(15);

        public boolean isEnabled() {
            return enabled;
        }

        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        public Duration getInterval() {
            return interval;
        }

        public void setInterval(Duration interval) {
            this.interval = interval;
        }

        public Duration getInbox() {
            return inbox;
        }

        public void setInbox(Duration inbox) {
            this.inbox = inbox;
        }

        public Duration getRedeliveryHorizon() {
            return redeliveryHorizon;
        }

        public void setRedeliveryHorizon(Duration redeliveryHorizon) {
            this.redeliveryHorizon = redeliveryHorizon;
        }

        public Duration getOutbox() {
            return outbox;
        }

        public void setOutbox(Duration outbox) {
            this.outbox = outbox;
        }

        public Duration getStreamPositions() {
            return streamPositions;
        }

        public void setStreamPositions(Duration streamPositions) {
            this.streamPositions = streamPositions;
        }
    }

    /** The Idempotency-Key header for Spring MVC endpoints. */
    public static class Http {
        private final Idempotency idempotency = new Idempotency();

        public Idempotency getIdempotency() {
            return idempotency;
        }
    }

    /** The Idempotency-Key servlet filter (once-http on the class path). */
    public static class Idempotency {
        /** Whether to register the Idempotency-Key filter. */
        private boolean enabled = false;

        /** URL patterns the filter covers. */
        private List<String> urlPatterns = new ArrayList<>(List.of("/*"));

        /** Whether a covered request without the header is refused with 400. */
        private boolean required = true;

        /** HTTP methods the filter covers. */
        private List<String> methods = new ArrayList<>(List.of("POST", "PATCH"));

        /** Request header naming the scope (tenant) of the keys; unset: one scope for every client. */
        private String scopeHeader;

        public boolean isEnabled() {
            return enabled;
        }

        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        public List<String> getUrlPatterns() {
            return urlPatterns;
        }

        public void setUrlPatterns(List<String> urlPatterns) {
            this.urlPatterns = urlPatterns;
        }

        public boolean isRequired() {
            return required;
        }

        public void setRequired(boolean required) {
            this.required = required;
        }

        public List<String> getMethods() {
            return methods;
        }

        public void setMethods(List<String> methods) {
            this.methods = methods;
        }

        public String getScopeHeader() {
            return scopeHeader;
        }

        public void setScopeHeader(String scopeHeader) {
            this.scopeHeader = scopeHeader;
        }
    }
}
