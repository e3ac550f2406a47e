package dev.once.spring;

import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Role;

/** Registers the {@link IdempotentListener} post-processor; imported by {@link EnableIdempotentListeners}. */
@Configuration(proxyBeanMethods = false)
@Role(BeanDefinition.ROLE_INFRASTRUCTURE)
public class IdempotentListenerConfiguration {

    /** Made by Spring when {@link EnableIdempotentListeners} imports it. */
    public IdempotentListenerConfiguration() {}

    /** Static: a post-processor must not wait for this configuration's own dependencies. */
    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    public static IdempotentListenerPostProcessor onceIdempotentListenerPostProcessor() {
        return new IdempotentListenerPostProcessor();
    }
}
