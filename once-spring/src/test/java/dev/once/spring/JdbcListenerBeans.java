package dev.once.spring;

import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;

/**
 * The plain JDBC beans once-spring's listener tests build alike on the context's {@code DataSource}: its {@code
 * JdbcTransactionManager}, a {@code JdbcTemplate} and {@link OnceSpring} on both. A test's own configuration imports
 * it and adds its listeners. No JPA type here: the Boot 3 starter runs some of these tests without spring-orm (the
 * JPA beans: {@link TestJpaBeans}).
 */
@Configuration(proxyBeanMethods = false)
class JdbcListenerBeans {

    @Bean
    JdbcTransactionManager transactionManager(DataSource ds) {
        return new JdbcTransactionManager(ds);
    }

    @Bean
    JdbcTemplate jdbcTemplate(DataSource ds) {
        return new JdbcTemplate(ds);
    }

    /** With a {@link HeldClaims} bean, its claims give up waiting for a holder after 200 ms, and it hears every outcome. */
    @Bean
    OnceSpring once(DataSource ds, JdbcTransactionManager tm, ObjectProvider<HeldClaims> held) {
        OnceSpring.Builder once = OnceSpring.builder().dataSource(ds).transactionManager(tm);
        held.ifAvailable(h -> once.lockTimeout(HeldClaims.LOCK_TIMEOUT).outcomeListener(h::outcome));
        return once.build();
    }

    /** The application context of {@code config} (which imports these beans) on {@code ds}, refreshed. */
    static AnnotationConfigApplicationContext context(DataSource ds, Class<?> config) {
        AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext();
        context.registerBean(DataSource.class, () -> ds);
        context.register(config);
        context.refresh();
        return context;
    }
}
