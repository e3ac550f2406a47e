package dev.once.spring.boot;

import dev.once.OutboxHeaders;
import dev.once.OutcomeListener;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Publisher;
import dev.once.retention.InboxPruner;
import dev.once.retention.OutboxPruner;
import dev.once.retention.StreamPositionPruner;
import dev.once.spring.IdempotentListenerPostProcessor;
import dev.once.spring.OnceOutbox;
import dev.once.spring.OnceSpring;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import javax.sql.DataSource;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.sql.init.dependency.DependsOnDatabaseInitialization;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Role;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * Auto-configures {@code once} on the application's {@code DataSource} and transaction manager:
 * {@link OnceSpring} (consumers that join the current transaction; an {@code OutcomeListener} bean is told
 * each delivery's final outcome, after commit), the injectable {@link OnceOutbox},
 * {@code @IdempotentListener} support, the schema check (and migration, per
 * {@code once.schema.initialize-schema}), the outbox relay as a
 * {@code SmartLifecycle}, and the pruners on a schedule. Every bean backs off when the application
 * defines its own; {@code once.enabled=false} turns all of it off.
 */
@AutoConfiguration(
        // Boot 4's names, then Boot 3's (Boot 4 moved them into per-technology modules); a name
        // missing from the running line is ignored.
        afterName = {
            "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration",
            "org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration",
            "org.springframework.boot.hibernate.autoconfigure.HibernateJpaAutoConfiguration",
            "org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration",
            "org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration",
            "org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration",
            // the Tracer and Propagator beans OnceTracingConfiguration waits for
            "org.springframework.boot.micrometer.tracing.opentelemetry.autoconfigure.OpenTelemetryTracingAutoConfiguration",
            "org.springframework.boot.micrometer.tracing.brave.autoconfigure.BraveAutoConfiguration",
            "org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration",
            "org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration",
            "org.springframework.boot.autoconfigure.orm.jpa.HibernateJpaAutoConfiguration",
            "org.springframework.boot.autoconfigure.transaction.TransactionAutoConfiguration",
            "org.springframework.boot.actuate.autoconfigure.metrics.CompositeMeterRegistryAutoConfiguration",
            "org.springframework.boot.autoconfigure.kafka.KafkaAutoConfiguration",
            "org.springframework.boot.actuate.autoconfigure.tracing.OpenTelemetryTracingAutoConfiguration",
            "org.springframework.boot.actuate.autoconfigure.tracing.BraveAutoConfiguration"
        })
@ConditionalOnBooleanProperty(name = "once.enabled", matchIfMissing = true)
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties(OnceProperties.class)
@Import({OnceTracingConfiguration.class, OnceFlywayConfiguration.class})
public class OnceAutoConfiguration {

    /** Registered whenever once is on, so {@code @IdempotentListener} works with no further annotation. */
    @Bean
    @ConditionalOnMissingBean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static IdempotentListenerPostProcessor onceIdempotentListenerPostProcessor() {
        return new IdempotentListenerPostProcessor();
    }

    /**
     * Created after Flyway and Liquibase have run (they count as database initialization), so it sees the
     * tables they made; every bean that touches the tables waits for it.
     */
    @Bean
    @ConditionalOnMissingBean
    @DependsOnDatabaseInitialization
    OnceSchema onceSchema(DataSource dataSource, OnceProperties properties) {
        return OnceSchema.initialize(dataSource, properties);
    }

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnSingleCandidate(PlatformTransactionManager.class)
    OnceSpring onceSpring(
            DataSource dataSource,
            PlatformTransactionManager transactionManager,
            OnceProperties properties,
            ObjectProvider<MeterRegistry> meterRegistry,
            OnceSchema schema,
            ObjectProvider<OutcomeListener> outcomeListener,
            ObjectProvider<OutboxHeaders> outboxHeaders) {
        // the schema parameter orders this bean after the check: the tables exist and are current
        OnceSpring.Builder b = OnceSpring.builder()
                .dataSource(dataSource)
                .transactionManager(transactionManager)
                .tablePrefix(properties.getTablePrefix())
                .meterRegistry(meterRegistry.getIfUnique(() -> Metrics.globalRegistry))
                .onMismatch(properties.getOnMismatch());
        if (properties.getLockTimeout() != null) {
            b.lockTimeout(properties.getLockTimeout());
        }
        outcomeListener.ifUnique(b::outcomeListener);
        outboxHeaders.ifUnique(b::outboxHeaders);
        return b.build();
    }

    @Bean
    @ConditionalOnMissingBean
    OnceOutbox onceOutbox(OnceSpring once) {
        return once.outbox();
    }

    @Bean
    @ConditionalOnMissingBean
    OutboxAdmin onceOutboxAdmin(OnceSpring once) {
        return OutboxAdmin.builder()
                .dataSource(once.dataSource())
                .dialect(once.dialect())
                .tablePrefix(once.tablePrefix())
                .build();
    }

    @Bean
    @ConditionalOnMissingBean(name = "oncePublisher")
    Publisher oncePublisher(ObjectProvider<OncePublishers.BrokerPublisher> brokers) {
        return OncePublishers.routing(brokers.orderedStream().toList());
    }

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnBooleanProperty(name = "once.relay.enabled", matchIfMissing = true)
    OnceRelayLifecycle onceRelay(
            OnceSpring once,
            OnceProperties properties,
            Publisher oncePublisher,
            ObjectProvider<MeterRegistry> meterRegistry,
            OnceSchema schema,
            ObjectProvider<OnceTracingConfiguration.SendSpans> sendSpans) {
        Publisher publisher = sendSpans.stream()
                .findFirst()
                .map(spans -> spans.around(oncePublisher))
                .orElse(oncePublisher);
        OnceProperties.Relay r = properties.getRelay();
        OutboxRelay.Builder b = OutboxRelay.builder()
                .dataSource(once.dataSource())
                .dialect(once.dialect())
                .tablePrefix(once.tablePrefix())
                .publisher(publisher)
                .batchSize(r.getBatchSize())
                .pollInterval(r.getPollInterval())
                // maxAttempts counts the first send; the policy counts the retries after it.
                .retryPolicy(OutboxRelay.DEFAULT_RETRY_POLICY.toBuilder()
                        .maxRetries(r.getMaxAttempts() - 1)
                        .initialDelay(r.getInitialBackoff())
                        .maxDelay(r.getMaxBackoff())
                        .build())
                .meterRegistry(meterRegistry.getIfUnique(() -> Metrics.globalRegistry));
        if (r.getLease() != null) {
            b.lease(r.getLease(), r.getLeaseTtl());
        }
        return new OnceRelayLifecycle(b);
    }

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnBooleanProperty(name = "once.retention.enabled", matchIfMissing = true)
    OnceRetentionLifecycle onceRetention(
            OnceSpring once, OnceProperties properties, ObjectProvider<MeterRegistry> meterRegistry) {
        OnceProperties.Retention r = properties.getRetention();
        MeterRegistry registry = meterRegistry.getIfUnique(() -> Metrics.globalRegistry);
        InboxPruner inbox = InboxPruner.builder()
                .dataSource(once.dataSource())
                .dialect(once.dialect())
                .tablePrefix(once.tablePrefix())
                .retention(r.getInbox())
                .redeliveryHorizon(r.getRedeliveryHorizon())
                .meterRegistry(registry)
                .build();
        OutboxPruner outbox = OutboxPruner.builder()
                .dataSource(once.dataSource())
                .dialect(once.dialect())
                .tablePrefix(once.tablePrefix())
                .retention(r.getOutbox())
                .meterRegistry(registry)
                .build();
        StreamPositionPruner streams = StreamPositionPruner.builder()
                .dataSource(once.dataSource())
                .dialect(once.dialect())
                .tablePrefix(once.tablePrefix())
                .retention(r.getStreamPositions())
                .meterRegistry(registry)
                .build();
        return new OnceRetentionLifecycle(
                java.util.List.of(inbox::schedule, outbox::schedule, streams::schedule), r.getInterval());
    }

    /** With spring-kafka: the startup warning of a listener container factory in a database transaction manager's transactions. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.kafka.config.AbstractKafkaListenerContainerFactory")
    static class KafkaListenerContainers {
        @Bean
        static KafkaContainerTransactionCheck onceKafkaContainerTransactionCheck(ListableBeanFactory beans) {
            return new KafkaContainerTransactionCheck(beans);
        }
    }
}
