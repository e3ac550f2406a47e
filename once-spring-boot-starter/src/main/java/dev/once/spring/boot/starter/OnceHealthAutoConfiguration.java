package dev.once.spring.boot.starter;

import dev.once.outbox.OutboxAdmin;
import dev.once.spring.OnceSpring;
import dev.once.spring.boot.OnceAutoConfiguration;
import dev.once.spring.boot.OnceProperties;
import dev.once.spring.boot.OnceRelayLifecycle;
import dev.once.spring.boot.internal.OnceHealth;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;

/** The {@code once} health indicator on Boot 4's {@code spring-boot-health}: {@link OnceHealth}'s report. */
@AutoConfiguration(after = OnceAutoConfiguration.class)
@ConditionalOnClass(HealthIndicator.class)
@ConditionalOnBean(OutboxAdmin.class)
public class OnceHealthAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean(name = "onceHealthIndicator")
    HealthIndicator onceHealthIndicator(
            OutboxAdmin admin, ObjectProvider<OnceRelayLifecycle> relay, OnceProperties properties, OnceSpring once) {
        OnceHealth health = new OnceHealth(admin, relay, properties, once);
        return () -> {
            OnceHealth.Report report = health.check();
            return (report.up() ? Health.up() : Health.down())
                    .withDetails(report.details())
                    .build();
        };
    }
}
