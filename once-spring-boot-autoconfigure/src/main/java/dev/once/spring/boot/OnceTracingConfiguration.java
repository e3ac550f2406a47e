package dev.once.spring.boot;

import dev.once.OutboxHeaders;
import dev.once.outbox.Publisher;
import dev.once.spring.OnceTracing;
import io.micrometer.tracing.Tracer;
import io.micrometer.tracing.propagation.Propagator;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Tracing through the outbox when Micrometer Tracing is configured (a {@code Tracer} and a
 * {@code Propagator} bean, as Spring Boot defines them with a tracing bridge on the classpath): rows
 * store the caller's {@code traceparent}, and the relay sends each in a span linked to it.
 * {@code once.tracing.enabled=false} turns it off.
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnClass(Tracer.class)
@ConditionalOnBooleanProperty(name = "once.tracing.enabled", matchIfMissing = true)
class OnceTracingConfiguration {

    /** Wraps the relay's publisher; a type of this package so the relay bean never names a tracing class. */
    interface SendSpans {
        Publisher around(Publisher publisher);
    }

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnBean({Tracer.class, Propagator.class})
    OnceTracing onceTracing(Tracer tracer, Propagator propagator) {
        return OnceTracing.of(tracer, propagator);
    }

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnBean(OnceTracing.class)
    OutboxHeaders onceOutboxHeaders(OnceTracing tracing) {
        return tracing.outboxHeaders();
    }

    @Bean
    @ConditionalOnBean(OnceTracing.class)
    SendSpans onceSendSpans(OnceTracing tracing) {
        return tracing::publisher;
    }
}
