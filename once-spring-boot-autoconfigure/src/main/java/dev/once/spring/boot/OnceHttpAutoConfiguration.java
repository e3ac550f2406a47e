package dev.once.spring.boot;

import dev.once.http.IdempotencyFilter;
import dev.once.keys.IdempotencyKeys;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;

/**
 * The {@code Idempotency-Key} filter for Spring MVC endpoints, on {@code once.http.idempotency.enabled=true}:
 * a client retrying a POST with the same key gets the first response again (IETF draft semantics: 400
 * without a key where required, 409 while the first is running, 422 for the same key with another body).
 */
@AutoConfiguration(after = OnceAutoConfiguration.class)
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
@ConditionalOnClass({IdempotencyFilter.class, FilterRegistrationBean.class})
@ConditionalOnBooleanProperty(name = "once.http.idempotency.enabled")
@ConditionalOnBean(dev.once.spring.OnceSpring.class)
public class OnceHttpAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    IdempotencyKeys onceIdempotencyKeys(dev.once.spring.OnceSpring once) {
        return IdempotencyKeys.builder()
                .dataSource(once.dataSource())
                .dialect(once.dialect())
                .tablePrefix(once.tablePrefix())
                .build();
    }

    @Bean
    @ConditionalOnMissingBean(name = "onceIdempotencyFilter")
    FilterRegistrationBean<IdempotencyFilter> onceIdempotencyFilter(IdempotencyKeys keys, OnceProperties properties) {
        OnceProperties.Idempotency p = properties.getHttp().getIdempotency();
        IdempotencyFilter.Builder b = IdempotencyFilter.builder()
                .keys(keys)
                .required(p.isRequired())
                .methods(p.getMethods().toArray(String[]::new));
        if (p.getScopeHeader() != null) {
            String header = p.getScopeHeader();
            b.scope(request -> request.getHeader(header));
        }
        FilterRegistrationBean<IdempotencyFilter> registration = new FilterRegistrationBean<>(b.build());
        registration.setUrlPatterns(p.getUrlPatterns());
        registration.setName("onceIdempotencyFilter");
        return registration;
    }
}
