package dev.once.spring.boot;

import java.lang.reflect.Method;
import java.util.Map;
import org.springframework.context.ApplicationContext;

/**
 * What the shared tests need that Boot 3 and Boot 4 name differently, found on the running line: these
 * tests are compiled once and run by each starter on its own Boot (Boot 4 moved the auto-configurations
 * into per-technology modules and the health API into {@code spring-boot-health}).
 */
final class Boot {

    static final Class<?> DATA_SOURCE = either(
            "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration",
            "org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration");
    static final Class<?> DATA_SOURCE_TRANSACTION_MANAGER = either(
            "org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration",
            "org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration");
    static final Class<?> FLYWAY = either(
            "org.springframework.boot.flyway.autoconfigure.FlywayAutoConfiguration",
            "org.springframework.boot.autoconfigure.flyway.FlywayAutoConfiguration");
    static final Class<?> LIQUIBASE = either(
            "org.springframework.boot.liquibase.autoconfigure.LiquibaseAutoConfiguration",
            "org.springframework.boot.autoconfigure.liquibase.LiquibaseAutoConfiguration");
    /** Each starter's own health auto-configuration (same simple name, each in its starter's package). */
    static final Class<?> ONCE_HEALTH = either(
            "dev.once.spring.boot.starter.OnceHealthAutoConfiguration",
            "dev.once.spring.boot3.starter.OnceHealthAutoConfiguration");
    /** For a FilteredClassLoader: the health API of either line. */
    static final String[] HEALTH_PACKAGES = {
        "org.springframework.boot.health", "org.springframework.boot.actuate.health"
    };

    /** A health result as both lines' {@code Health} show it. */
    record HealthView(String status, Map<String, Object> details) {}

    private Boot() {}

    /** The {@code onceHealthIndicator} bean's health with details: Boot 4 {@code health(true)}, Boot 3 {@code getHealth(true)}. */
    @SuppressWarnings("unchecked")
    static HealthView health(ApplicationContext context) throws ReflectiveOperationException {
        Object indicator = context.getBean("onceHealthIndicator");
        Class<?> api = either(
                "org.springframework.boot.health.contributor.HealthIndicator",
                "org.springframework.boot.actuate.health.HealthIndicator");
        Method m = api.getName().contains(".actuate.")
                ? api.getMethod("getHealth", boolean.class)
                : api.getMethod("health", boolean.class);
        Object health = m.invoke(indicator, true);
        Object status = health.getClass().getMethod("getStatus").invoke(health);
        String code = (String) status.getClass().getMethod("getCode").invoke(status);
        return new HealthView(code, (Map<String, Object>)
                health.getClass().getMethod("getDetails").invoke(health));
    }

    private static Class<?> either(String... names) {
        for (String name : names) {
            try {
                return Class.forName(name);
            } catch (ClassNotFoundException e) {
                // the other line's name
            }
        }
        throw new IllegalStateException("none of " + String.join(", ", names) + " on the class path");
    }
}
