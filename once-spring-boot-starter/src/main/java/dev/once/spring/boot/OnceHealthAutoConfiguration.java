package dev.once.spring.boot;

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
 * The {@code once} health indicator ({@code /actuator/health/once}): DOWN when this application runs a
 * relay and it is not running; details: pending outbox rows, the age of the oldest (the relay's lag),
 * dead rows, and the inbox retention next to the redelivery horizon.
 */
@AutoConfiguration(after = OnceAutoConfiguration.class)
@ConditionalOnClass(HealthIndicator.class)
@ConditionalOnBean(OutboxAdmin.class)
public class OnceHealthAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean(name = "onceHealthIndicator")
    HealthIndicator onceHealthIndicator(
            OutboxAdmin admin, ObjectProvider<OnceRelayLifecycle> relay, OnceProperties properties) {
        return () -> health(admin.stats(), relay.getIfAvailable(), properties);
    }

    static Health health(OutboxStats stats, OnceRelayLifecycle relay, OnceProperties properties) {
        boolean relayDown = relay != null && !relay.isRunning();
        Health.Builder b = relayDown ? Health.down() : Health.up();
        return b.withDetail(
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
