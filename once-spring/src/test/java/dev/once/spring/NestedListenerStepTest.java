package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.support.ResourceHolderSupport;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The one decision of the record and the batch listener path ({@link OnceSpring#nestedStep}): NESTED only for a
 * Kafka listener in a transaction already open, on a transaction manager that allows it; and the rollback-only marks
 * a rolled-back try set are undone on the holders that were not marked before it, never on one marked earlier.
 */
class NestedListenerStepTest {

    static TestDatabase db;
    static JdbcTransactionManager tm;
    static OnceSpring once;

    @BeforeAll
    static void start() {
        db = TestPostgres.shared().freshDatabase(2);
        tm = new JdbcTransactionManager(db.dataSource());
        once = OnceSpring.builder()
                .dataSource(db.dataSource())
                .transactionManager(tm)
                .build();
    }

    @AfterAll
    static void stop() {
        db.close();
    }

    @Test
    void nestedOnlyForAKafkaListenerInAnOpenTransactionOfAManagerThatAllowsIt() {
        assertThat(once.nestedStep(true))
                .as("no transaction open: the call's own")
                .isNull();
        new TransactionTemplate(tm).executeWithoutResult(s -> {
            assertThat(once.nestedStep(false)).as("not a Kafka listener: joins").isNull();
            NestedListenerStep step = once.nestedStep(true);
            assertThat(step).isNotNull();
            assertThat(step.template().getPropagationBehavior()).isEqualTo(TransactionDefinition.PROPAGATION_NESTED);
        });
        JdbcTransactionManager refusing = new JdbcTransactionManager(db.dataSource());
        refusing.setNestedTransactionAllowed(false);
        OnceSpring joins = OnceSpring.builder()
                .dataSource(db.dataSource())
                .transactionManager(refusing)
                .build();
        new TransactionTemplate(refusing)
                .executeWithoutResult(s -> assertThat(joins.nestedStep(true))
                        .as("the manager refuses NESTED (as JPA's and JTA's do): joins")
                        .isNull());
    }

    @Test
    void undoMarksClearsOnlyWhatTheTryMarked() {
        new TransactionTemplate(tm).executeWithoutResult(s -> {
            org.springframework.jdbc.datasource.DataSourceUtils.getConnection(db.dataSource());
            ResourceHolderSupport markedBefore = new ResourceHolderSupport() {};
            ResourceHolderSupport container = new ResourceHolderSupport() {}; // a container's Kafka transaction
            Object k1 = new Object();
            Object k2 = new Object();
            TransactionSynchronizationManager.bindResource(k1, markedBefore);
            TransactionSynchronizationManager.bindResource(k2, container);
            markedBefore.setRollbackOnly();
            try {
                NestedListenerStep step = once.nestedStep(true);
                step.snapshot();
                SpringTransactionProvider.markRollbackOnly(); // what a failed try does
                assertThat(container.isRollbackOnly()).isTrue();

                assertThat(step.undoMarks()).isTrue();

                assertThat(container.isRollbackOnly())
                        .as("marked by the try: cleared")
                        .isFalse();
                assertThat(((ConnectionHolder) TransactionSynchronizationManager.getResource(db.dataSource()))
                                .isRollbackOnly())
                        .isFalse();
                assertThat(markedBefore.isRollbackOnly())
                        .as("marked before the try: kept")
                        .isTrue();
            } finally {
                TransactionSynchronizationManager.unbindResource(k1);
                TransactionSynchronizationManager.unbindResource(k2);
            }
        });
    }
}
