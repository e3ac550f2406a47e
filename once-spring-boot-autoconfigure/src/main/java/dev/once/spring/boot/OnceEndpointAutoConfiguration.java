package dev.once.spring.boot;

import dev.once.outbox.OutboxAdmin;
import dev.once.spring.OnceSpring;
import java.time.Clock;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/**
 * The {@code once} Actuator endpoint ({@link OnceEndpoint}) with spring-boot-actuator on the class path,
 * when the application exposes it ({@code management.endpoints.web.exposure.include=once}).
 */
@AutoConfiguration(after = OnceAutoConfiguration.class)
@ConditionalOnClass(Endpoint.class)
@ConditionalOnBean({OnceSpring.class, OutboxAdmin.class})
public class OnceEndpointAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnAvailableEndpoint(OnceEndpoint.class)
    OnceEndpoint onceEndpoint(
            OnceSpring once, OutboxAdmin admin, ObjectProvider<OnceRelayLifecycle> relay, OnceProperties properties) {
        return new OnceEndpoint(once, admin, relay.getIfAvailable(), properties, Clock.systemUTC());
    }
}
