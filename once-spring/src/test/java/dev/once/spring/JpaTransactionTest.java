package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.spring.jpa.Payment;
import dev.once.spring.jpa.PaymentRepository;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import jakarta.persistence.EntityManagerFactory;
import java.util.Map;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.data.jpa.repository.config.EnableJpaRepositories;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.orm.jpa.LocalContainerEntityManagerFactoryBean;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The claim joins a {@code JpaTransactionManager} transaction (Hibernate): a Spring Data repository
 * write, a {@code JdbcTemplate} write and an outbox row commit atomically with it.
 */
class JpaTransactionTest {

    static TestDatabase db;
    static AnnotationConfigApplicationContext context;

    @BeforeAll
    static void start() {
        db = TestPostgres.shared().freshDatabase(4);
        db.execute(
                "CREATE TABLE payment (id text PRIMARY KEY, amount bigint NOT NULL)",
                "CREATE TABLE ledger (account text PRIMARY KEY, balance bigint NOT NULL)",
                "INSERT INTO ledger VALUES ('acc', 0)");
        context = new AnnotationConfigApplicationContext(Config.class);
    }

    @AfterAll
    static void stop() {
        context.close();
        db.close();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableJpaRepositories(basePackageClasses = PaymentRepository.class)
    @EnableIdempotentListeners
    static class Config {
        @Bean
        AtCommitPayments atCommitPayments(PaymentRepository payments, JdbcTemplate jdbc, OnceSpring once) {
            return new AtCommitPayments(payments, jdbc, once.outbox());
        }

        @Bean
        KafkaPayments kafkaPayments(PaymentRepository payments, JdbcTemplate jdbc) {
            return new KafkaPayments(payments, jdbc);
        }

        @Bean
        DataSource dataSource() {
            return db.dataSource();
        }

        @Bean
        LocalContainerEntityManagerFactoryBean entityManagerFactory(DataSource ds) {
            return TestJpaBeans.paymentEntities(ds);
        }

        @Bean
        JpaTransactionManager transactionManager(EntityManagerFactory emf) {
            return new JpaTransactionManager(emf); // takes the DataSource from the factory
        }

        @Bean
        JdbcTemplate jdbcTemplate(DataSource ds) {
            return new JdbcTemplate(ds);
        }

        @Bean
        OnceSpring once(DataSource ds, JpaTransactionManager tm) {
            return OnceSpring.builder().dataSource(ds).transactionManager(tm).build();
        }
    }

    @Test
    void repositoryWriteJdbcTemplateWriteAndOutboxRowCommitAtomicallyWithTheClaim() {
        PaymentRepository payments = context.getBean(PaymentRepository.class);
        JdbcTemplate jdbc = context.getBean(JdbcTemplate.class);
        OnceSpring once = context.getBean(OnceSpring.class);
        IdempotentConsumer billing = once.consumer("billing", (d, tx) -> {
            payments.save(new Payment(d.eventId(), 20));
            jdbc.update("UPDATE ledger SET balance = balance + 20 WHERE account = 'acc'");
            once.outbox().add("https://psp.example/charges", "acc", d.payload(), Map.of(), "charge:" + d.eventId());
        });
        TransactionTemplate tt = new TransactionTemplate(once.transactionManager());
        Delivery evt = Delivery.of("jpa-1", "pay 20");

        assertThatThrownBy(() -> tt.executeWithoutResult(s -> {
                    billing.process(evt);
                    payments.flush(); // the entity is written, not only queued in the persistence context
                    throw new IllegalStateException("crash between the writes and the commit");
                }))
                .hasMessageContaining("crash");
        assertThat(db.queryLong("SELECT count(*) FROM payment")).isZero();
        assertThat(db.queryLong("SELECT balance FROM ledger")).isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox")).isZero();

        assertThat(tt.execute(s -> billing.process(evt.redelivery())).status()).isEqualTo(Outcome.Status.APPLIED);
        assertThat(tt.execute(s -> billing.process(evt.redelivery())).status()).isEqualTo(Outcome.Status.DUPLICATE);
        assertThat(db.queryLong("SELECT count(*) FROM payment")).isEqualTo(1);
        assertThat(db.queryLong("SELECT balance FROM ledger"))
                .as("effect applied exactly once")
                .isEqualTo(20);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox")).isEqualTo(1);
    }

    @Test
    void aFailedHandlerRollsTheJpaTransactionBack() {
        PaymentRepository payments = context.getBean(PaymentRepository.class);
        OnceSpring once = context.getBean(OnceSpring.class);
        IdempotentConsumer failing = once.consumer("failing", (d, tx) -> {
            payments.save(new Payment(d.eventId(), 20));
            throw new IllegalStateException("handler failed");
        });
        TransactionTemplate tt = new TransactionTemplate(once.transactionManager());
        assertThatThrownBy(() -> tt.executeWithoutResult(s -> failing.process(Delivery.of("jpa-2", "x"))))
                .isInstanceOf(org.springframework.transaction.UnexpectedRollbackException.class);
        assertThat(db.queryLong("SELECT count(*) FROM payment WHERE id = 'jpa-2'"))
                .isZero();
    }

    /** A listener whose effects are a repository write, a JdbcTemplate update and an outbox row. */
    public static class AtCommitPayments {
        private final PaymentRepository payments;
        private final JdbcTemplate jdbc;
        private final OnceOutbox outbox;

        AtCommitPayments(PaymentRepository payments, JdbcTemplate jdbc, OnceOutbox outbox) {
            this.payments = payments;
            this.jdbc = jdbc;
            this.outbox = outbox;
        }

        @IdempotentListener(consumer = "jpa-at-commit", eventId = "#p0", claimTiming = ClaimTiming.AT_COMMIT)
        public void on(String paymentId) throws java.sql.SQLException {
            payments.save(new Payment(paymentId, 20));
            jdbc.update("UPDATE ledger SET balance = balance + 20 WHERE account = 'acc'");
            outbox.add("https://psp.example/charges", "acc", new byte[0], Map.of(), "charge:" + paymentId);
        }
    }

    /** A Kafka listener's method, called here in a transaction of the caller's as a container's would run it. */
    public static class KafkaPayments {
        private final PaymentRepository payments;
        private final JdbcTemplate jdbc;

        KafkaPayments(PaymentRepository payments, JdbcTemplate jdbc) {
            this.payments = payments;
            this.jdbc = jdbc;
        }

        @org.springframework.kafka.annotation.KafkaListener(topics = "payments", autoStartup = "false")
        @IdempotentListener(consumer = "jpa-kafka", eventId = "#p0")
        public void on(String paymentId) {
            payments.save(new Payment(paymentId, 20));
            jdbc.update("UPDATE ledger SET balance = balance + 20 WHERE account = 'acc'");
        }
    }

    /**
     * A Kafka listener in a JPA transaction already open (a container's {@code JpaTransactionManager}, or the
     * method's own {@code @Transactional}): the claim joins it. It once ran each call {@code NESTED} there, which
     * a {@code JpaTransactionManager} refuses by default, so every record failed.
     */
    @Test
    void aKafkaListenerInAnOpenJpaTransactionJoinsIt() {
        KafkaPayments listener = context.getBean(KafkaPayments.class);
        JdbcTemplate jdbc = context.getBean(JdbcTemplate.class);
        TransactionTemplate tt =
                new TransactionTemplate(context.getBean(OnceSpring.class).transactionManager());
        long before = jdbc.queryForObject("SELECT balance FROM ledger", Long.class);

        tt.executeWithoutResult(s -> listener.on("jpa-kafka-1"));
        tt.executeWithoutResult(s -> listener.on("jpa-kafka-1"));

        assertThat(db.queryLong("SELECT count(*) FROM payment WHERE id = 'jpa-kafka-1'"))
                .isEqualTo(1);
        assertThat(jdbc.queryForObject("SELECT balance FROM ledger", Long.class) - before)
                .as("applied once")
                .isEqualTo(20);
    }

    /**
     * With JPA the claim at commit is a statement of its own before the flush (the transaction manager
     * flushes in its commit, after once's check): a copy's claim finds the id taken before its entity is
     * written, and its update and outbox row roll back with it.
     */
    @Test
    void aCopyThroughAJpaListenerThatClaimsAtCommitLeavesNothing() throws java.sql.SQLException {
        AtCommitPayments listener = context.getBean(AtCommitPayments.class);
        long balance = db.queryLong("SELECT balance FROM ledger");
        listener.on("jpa-at-commit-1");
        listener.on("jpa-at-commit-1"); // a copy: acknowledged, rolled back
        assertThat(db.queryLong("SELECT count(*) FROM payment WHERE id = 'jpa-at-commit-1'"))
                .isEqualTo(1);
        assertThat(db.queryLong("SELECT balance FROM ledger")).isEqualTo(balance + 20);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE idempotency_key = 'charge:jpa-at-commit-1'"))
                .isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox WHERE consumer = 'jpa-at-commit'"))
                .isEqualTo(1);
    }

    @Test
    void aJpaTransactionManagerWithoutADataSourceIsRefused() {
        JpaTransactionManager bare = new JpaTransactionManager();
        bare.setEntityManagerFactory(context.getBean(EntityManagerFactory.class));
        bare.setDataSource(null);
        assertThatThrownBy(() -> OnceSpring.builder()
                        .dataSource(db.dataSource())
                        .transactionManager(bare)
                        .build())
                .isInstanceOf(dev.once.InvalidConfigurationException.class)
                .hasMessageContaining("JpaTransactionManager has no DataSource set");
    }
}
