package dev.once.spring.boot;

import org.flywaydb.core.api.migration.JavaMigration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** With Flyway on the class path, once's migration joins the application's Flyway run ({@link OnceFlywayMigration}). */
@Configuration(proxyBeanMethods = false)
@ConditionalOnClass(JavaMigration.class)
class OnceFlywayConfiguration {

    @Bean
    @ConditionalOnMissingBean
    OnceFlywayMigration onceFlywayMigration(OnceProperties properties) {
        return new OnceFlywayMigration(properties.getTablePrefix());
    }
}
