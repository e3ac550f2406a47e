package dev.once.spring;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.spring.jpa.Payment;
import dev.once.spring.jpa.PaymentRepository;
import dev.once.testkit.IdempotentHandlerContract;
import jakarta.persistence.EntityManagerFactory;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.data.jpa.repository.config.EnableJpaRepositories;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.orm.jpa.LocalContainerEntityManagerFactoryBean;
import org.springframework.transaction.annotation.EnableTransactionManagement;
import org.springframework.transaction.annotation.Transactional;

/**
 * The test kit's handler contract (sequential duplicate, crash in the ack gap, concurrent
 * duplicates) against a Spring-wired handler: a {@code @Transactional} service that saves a JPA
 * entity, updates a ledger with {@code JdbcTemplate} and adds an outbox row, run by
 * {@link OnceSpring#transactionalConsumer} in a {@code JpaTransactionManager} transaction.
 */
class SpringHandlerContractTest extends IdempotentHandlerContract {

    private final List<AnnotationConfigApplicationContext> contexts = new ArrayList<>();

    @AfterEach
    void closeContexts() {
        contexts.forEach(AnnotationConfigApplicationContext::close);
    }

    @Override
    protected void createTables(Connection c) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute("CREATE TABLE payment (id text PRIMARY KEY, amount bigint NOT NULL)");
            s.execute("CREATE TABLE ledger (account text PRIMARY KEY, balance bigint NOT NULL)");
            s.execute("INSERT INTO ledger VALUES ('acc', 0)");
        }
    }

    @Override
    protected IdempotentConsumer consumer(DataSource dataSource) {
        AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext();
        context.registerBean(DataSource.class, () -> dataSource);
        context.register(Config.class);
        context.refresh();
        contexts.add(context);
        Billing billing = context.getBean(Billing.class);
        return context.getBean(OnceSpring.class)
                .transactionalConsumer("contract", (d, tx) -> billing.charge(d.eventId(), d.payload()));
    }

    @Override
    protected Delivery event(String eventId) {
        return Delivery.of(eventId, "20");
    }

    @Override
    protected Object state(Connection c) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT (SELECT count(*) FROM payment),"
                        + " (SELECT balance FROM ledger WHERE account = 'acc'),"
                        + " (SELECT count(*) FROM once_outbox)")) {
            rs.next();
            return List.of(rs.getLong(1), rs.getLong(2), rs.getLong(3));
        }
    }

    /** The application's service, as a Spring user writes it. */
    public static class Billing {
        private final PaymentRepository payments;
        private final JdbcTemplate jdbc;
        private final OnceOutbox outbox;

        public Billing(PaymentRepository payments, JdbcTemplate jdbc, OnceOutbox outbox) {
            this.payments = payments;
            this.jdbc = jdbc;
            this.outbox = outbox;
        }

        @Transactional
        public void charge(String paymentId, byte[] amount) throws SQLException {
            long cents = Long.parseLong(new String(amount, StandardCharsets.UTF_8));
            payments.save(new Payment(paymentId, cents));
            jdbc.update("UPDATE ledger SET balance = balance + ? WHERE account = 'acc'", cents);
            outbox.add("https://psp.example/charges", "acc", amount, Map.of(), "charge:" + paymentId);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @EnableJpaRepositories(basePackageClasses = PaymentRepository.class)
    @EnableTransactionManagement
    static class Config {
        @Bean
        LocalContainerEntityManagerFactoryBean entityManagerFactory(DataSource ds) {
            return TestJpaBeans.paymentEntities(ds);
        }

        @Bean
        JpaTransactionManager transactionManager(EntityManagerFactory emf) {
            return new JpaTransactionManager(emf);
        }

        @Bean
        JdbcTemplate jdbcTemplate(DataSource ds) {
            return new JdbcTemplate(ds);
        }

        @Bean
        OnceSpring once(DataSource ds, JpaTransactionManager tm) {
            return OnceSpring.builder().dataSource(ds).transactionManager(tm).build();
        }

        @Bean
        OnceOutbox outbox(OnceSpring once) {
            return once.outbox();
        }

        @Bean
        Billing billing(PaymentRepository payments, JdbcTemplate jdbc, OnceOutbox outbox) {
            return new Billing(payments, jdbc, outbox);
        }
    }
}
