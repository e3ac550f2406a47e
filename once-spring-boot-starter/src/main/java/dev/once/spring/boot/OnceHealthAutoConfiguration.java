package dev.once.spring.boot;

import dev.once.Schema;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxStats;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;

/**
 * The {@code once} health indicator ({@code /actuator/health/once}): DOWN when the once tables are
 * missing or older than this once needs (with the fix), or when this application runs a relay and it is
 * not running; details: the schema version, pending outbox rows, the age of the oldest (the relay's lag),
 * dead rows, and the inbox retention next to the redelivery horizon.
 */
@AutoConfiguration(after = OnceAutoConfiguration.class)
@ConditionalOnClass(HealthIndicator.class)
@ConditionalOnBean(OutboxAdmin.class)
public class OnceHealthAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean(name = "onceHealthIndicator")
    HealthIndicator onceHealthIndicator(
            OutboxAdmin admin,
            ObjectProvider<OnceRelayLifecycle> relay,
            OnceProperties properties,
            dev.once.spring.OnceSpring once) {
        return () -> {
            // read first: with the tables gone, the outbox statistics cannot be read either
            Schema.Status schema = Schema.status(once.dataSource(), once.tablePrefix());
            if (!schema.isCurrent() && !schema.isUnversioned()) {
                return Health.down()
                        .withDetail("schema", schema.describe())
                        .withDetail(
                                "fix",
                                OnceSchema.refusal(
                                        schema, properties.getSchema().initialization(), once.dialect()))
                        .build();
            }
            return health(admin.stats(), relay.getIfAvailable(), properties, schema);
        };
    }

    static Health health(OutboxStats stats, OnceRelayLifecycle relay, OnceProperties properties, Schema.Status schema) {
        boolean relayDown = relay != null && !relay.isRunning();
        Health.Builder b = relayDown ? Health.down() : Health.up();
        return b.withDetail("schema", schema.describe())
                .withDetail(
                        "relay", relay == null ? "not in this application" : relay.isRunning() ? "running" : "stopped")
                .withDetail("outboxPending", stats.pending())
                .withDetail("outboxLag", stats.oldestPendingAge().toString())
                .withDetail("outboxDead", stats.dead())
                .withDetail(
                        "inboxRetention", properties.getRetention().getInbox().toString())
                .withDetail(
                        "redeliveryHorizon",
                        properties.getRetention().getRedeliveryHorizon().toString())
                .build();
    }
}
