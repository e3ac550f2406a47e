package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.StreamPositions;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.transaction.IllegalTransactionStateException;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Where {@code once} meets a Spring transaction it does not own and part of it rolls back: a
 * {@code NESTED} step (a savepoint), a {@code REQUIRES_NEW} step (the outer transaction suspended),
 * and {@link OnceSpring#transactionalConsumer} called inside a caller's transaction. The oracle is what
 * the caller's code committed: what rolled back is neither sent (outbox row) nor reported applied.
 */
class CallerTransactionTest {

    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static JdbcTemplate jdbc;
    static OnceSpring once;
    static JdbcTransactionManager tm;
    static final List<String> outcomes = new CopyOnWriteArrayList<>();

    @BeforeAll
    static void start() {
        db = TestPostgres.shared().freshDatabase(4);
        db.execute("CREATE TABLE ledger (event_id text NOT NULL, amount bigint NOT NULL)");
        context = new AnnotationConfigApplicationContext(Config.class);
        jdbc = context.getBean(JdbcTemplate.class);
        once = context.getBean(OnceSpring.class);
        tm = context.getBean(JdbcTransactionManager.class);
        REQUIRED = template(TransactionDefinition.PROPAGATION_REQUIRED);
        NESTED = template(TransactionDefinition.PROPAGATION_NESTED);
        REQUIRES_NEW = template(TransactionDefinition.PROPAGATION_REQUIRES_NEW);
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
        if (db != null) {
            db.close();
        }
    }

    @BeforeEach
    void reset() {
        jdbc.update("DELETE FROM ledger");
        jdbc.update("DELETE FROM once_inbox");
        jdbc.update("DELETE FROM once_outbox");
        outcomes.clear();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    static class Config {
        @Bean
        DataSource dataSource() {
            return db.dataSource();
        }

        @Bean
        JdbcTransactionManager transactionManager(DataSource ds) {
            return new JdbcTransactionManager(ds);
        }

        @Bean
        JdbcTemplate jdbcTemplate(DataSource ds) {
            return new JdbcTemplate(ds);
        }

        @Bean
        OnceSpring once(DataSource ds, JdbcTransactionManager tm) {
            return OnceSpring.builder()
                    .dataSource(ds)
                    .transactionManager(tm)
                    .outcomeListener((d, o) -> outcomes.add(d.eventId() + "=" + o.tag()))
                    .build();
        }

        @Bean
        Payments payments(JdbcTemplate jdbc, OnceSpring once) {
            return new Payments(jdbc, once);
        }
    }

    /** A listener called by the application's own code, inside its transactions. */
    public static class Payments {
        final JdbcTemplate jdbc;
        final OnceSpring once;

        Payments(JdbcTemplate jdbc, OnceSpring once) {
            this.jdbc = jdbc;
            this.once = once;
        }

        @IdempotentListener(consumer = "payments", eventId = "#p0")
        public void on(String eventId) {
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", eventId);
            add(eventId);
        }

        /** A body with an optional step that adds a message and fails; the body goes on without it. */
        @IdempotentListener(consumer = "optional", eventId = "#p0")
        public void withOptionalStep(String eventId) {
            failingNestedStep(() -> add("optional-" + eventId));
            add(eventId);
        }

        /**
         * A body in a transaction of its own (confined) that reaches the driver's connection twice: through
         * Spring's holder, its own, and from the handler of another consumer it calls.
         */
        @IdempotentListener(consumer = "unwrapping", eventId = "#p0")
        public void unwrapping(String eventId) {
            unwraps.add("body:" + unwrap(DataSourceUtils.getConnection(jdbc.getDataSource())));
            once.consumer("inner-unwrap", (d, tx) -> unwraps.add("inner:" + unwrap(tx.connection())))
                    .process(Delivery.of("inner-" + eventId, "x"));
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", eventId);
        }

        /** A body that commits an audit message in a transaction of its own first, whatever becomes of the delivery. */
        @IdempotentListener(consumer = "audited", eventId = "#p0")
        public void audited(String eventId) {
            REQUIRES_NEW.executeWithoutResult(n -> add("audit-" + eventId));
            add(eventId);
            if (eventId.startsWith("fail")) {
                throw new IllegalStateException("delivery fails after its audit step");
            }
        }
    }

    static final List<String> unwraps = new CopyOnWriteArrayList<>();

    /** "driver" when {@code c} handed out pgjdbc's connection, else the refusal. */
    static String unwrap(java.sql.Connection c) {
        try {
            return c.unwrap(org.postgresql.PGConnection.class) != null ? "driver" : "null";
        } catch (SQLException e) {
            return e.getMessage().contains("refused inside a handler") ? "refused" : e.getMessage();
        }
    }

    static TransactionTemplate template(int propagation) {
        TransactionTemplate t = new TransactionTemplate(tm);
        t.setPropagationBehavior(propagation);
        return t;
    }

    static TransactionTemplate REQUIRED;
    static TransactionTemplate NESTED;
    static TransactionTemplate REQUIRES_NEW;

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static void add(String message) {
        try {
            once.outbox().add("charges", message, bytes(message), Map.of(), null);
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The messages that will be sent: the outbox rows committed, by key. */
    static List<String> sent() {
        return jdbc.queryForList("SELECT msg_key FROM once_outbox ORDER BY id", String.class);
    }

    static List<String> applied() {
        return jdbc.queryForList("SELECT event_id FROM ledger ORDER BY event_id", String.class);
    }

    static List<String> claimed() {
        return jdbc.queryForList("SELECT event_id FROM once_inbox ORDER BY event_id", String.class);
    }

    /** Runs {@code step} in a nested transaction that fails; the caller catches the failure and goes on. */
    static void failingNestedStep(Runnable step) {
        try {
            NESTED.executeWithoutResult(s -> {
                step.run();
                throw new IllegalStateException("optional step failed");
            });
        } catch (IllegalStateException expected) {
            // the optional step is given up; the outer transaction goes on
        }
    }

    // ---- item 2: Spring NESTED and OnceOutbox ----

    @Test
    void aNestedStepThatFailsDoesNotSendItsOutboxMessage() {
        REQUIRED.executeWithoutResult(s -> {
            add("outer-before");
            failingNestedStep(() -> add("nested"));
            add("outer-after");
        });
        assertThat(sent())
                .as("the nested step's message rolled back with its savepoint; the outer's are sent")
                .containsExactly("outer-before", "outer-after");
    }

    @Test
    void aNestedStepThatFailsBeforeTheFirstOutboxMessageOfTheTransaction() {
        REQUIRED.executeWithoutResult(s -> {
            failingNestedStep(() -> add("nested"));
            add("outer-after");
        });
        assertThat(sent()).containsExactly("outer-after");
    }

    /**
     * The step's first messages pass the write threshold ({@link dev.once.Outbox#FLUSH_ROWS}): those are written
     * in the step, one more is still buffered when it fails. The writer was made in the step, after its
     * savepoint: the rollback undoes the written rows in the database and must drop the buffered one.
     */
    @Test
    void aNestedStepThatFailsAfterItsFirstMessagesWereWrittenAtTheThreshold() {
        REQUIRED.executeWithoutResult(s -> {
            failingNestedStep(() -> {
                for (int i = 0; i <= dev.once.Outbox.FLUSH_ROWS; i++) {
                    add("nested");
                }
            });
            add("outer-after");
        });
        assertThat(sent()).containsExactly("outer-after");
    }

    @Test
    void aNestedStepThatCommitsSendsItsMessageWithTheOuter() {
        REQUIRED.executeWithoutResult(s -> {
            add("outer-before");
            NESTED.executeWithoutResult(n -> {
                add("nested");
                NESTED.executeWithoutResult(nn -> add("nested-twice"));
            });
            failingNestedStep(() -> add("nested-failed"));
        });
        assertThat(sent()).containsExactly("outer-before", "nested", "nested-twice");
    }

    @Test
    void aNestedStepThatCommitsIsUndoneWhenTheOuterRollsBack() {
        assertThatThrownBy(() -> REQUIRED.executeWithoutResult(s -> {
                    NESTED.executeWithoutResult(n -> add("nested"));
                    throw new IllegalStateException("outer fails");
                }))
                .hasMessage("outer fails");
        assertThat(sent()).isEmpty();
    }

    @Test
    void aNestedStepInsideAListenerBodyThatFailsDoesNotSendItsMessage() {
        Payments payments = context.getBean(Payments.class);
        payments.withOptionalStep("o-1");
        assertThat(sent())
                .as("the body's optional step rolled back to its savepoint, taking its message along")
                .containsExactly("o-1");
        assertThat(outcomes).containsExactly("o-1=applied");
    }

    // ---- item 3: Spring REQUIRES_NEW and OnceOutbox ----

    @Test
    void aRequiresNewStepThatCommitsKeepsItsMessageWhenTheOuterRollsBack() {
        assertThatThrownBy(() -> REQUIRED.executeWithoutResult(s -> {
                    add("outer");
                    REQUIRES_NEW.executeWithoutResult(n -> add("inner"));
                    throw new IllegalStateException("outer fails");
                }))
                .hasMessage("outer fails");
        assertThat(sent())
                .as("the inner transaction committed on its own: its message stands, the outer's does not")
                .containsExactly("inner");
    }

    @Test
    void aRequiresNewStepThatFailsDoesNotSendItsMessageWhenTheOuterCommits() {
        REQUIRED.executeWithoutResult(s -> {
            add("outer-before");
            try {
                REQUIRES_NEW.executeWithoutResult(n -> {
                    add("inner");
                    throw new IllegalStateException("inner fails");
                });
            } catch (IllegalStateException expected) {
                // given up; the outer goes on
            }
            add("outer-after");
        });
        assertThat(sent()).containsExactly("outer-before", "outer-after");
    }

    /**
     * A delivery whose claim a transaction of the same thread holds while it is suspended (REQUIRES_NEW and
     * NOT_SUPPORTED inside it): the claim could only wait for a transaction that cannot end before the call
     * returns (PostgreSQL without a lock timeout waits for ever; the lock timeout set here makes the old code's
     * wait end, with the inner transaction doomed). IN_PROGRESS at once, nothing written, the inner transaction
     * untouched; the outer applies the event once, and a later copy is a duplicate.
     */
    @Test
    void aDeliveryASuspendedTransactionOfTheThreadClaimedIsInProgressAtOnceNotAWaitForEver() {
        // the same consumer as the Payments listener: its engine in the caller's transactions
        IdempotentConsumer held =
                once.consumer("payments", (d, tx) -> jdbc.update("INSERT INTO ledger VALUES (?, 20)", d.eventId()));
        Payments listener = context.getBean(Payments.class);
        TransactionTemplate notSupported = template(TransactionDefinition.PROPAGATION_NOT_SUPPORTED);
        List<String> inner = new CopyOnWriteArrayList<>();
        REQUIRED.executeWithoutResult(outer -> {
            assertThat(held.process(Delivery.of("h-1", "x")).tag()).isEqualTo("applied");
            REQUIRES_NEW.executeWithoutResult(n -> {
                jdbc.execute("SET LOCAL lock_timeout = '3s'");
                inner.add(held.process(Delivery.of("h-1", "x")).tag());
                held.processBatch(List.of(Delivery.of("h-2", "x"), Delivery.of("h-1", "x")))
                        .forEach(o -> inner.add(o.tag()));
                held.processInOrder(List.of(Delivery.of("h-3", "x"), Delivery.of("h-1", "x")))
                        .forEach(o -> inner.add(o.tag()));
                add("inner-stands");
            });
            // a listener method outside any transaction begins its own
            notSupported.executeWithoutResult(
                    n -> assertThatThrownBy(() -> listener.on("h-1")).hasMessageContaining("h-1"));
        });
        assertThat(inner)
                .as("each call with h-1, which the suspended transaction claimed, is IN_PROGRESS as a whole")
                .containsExactly("in_progress", "in_progress", "in_progress", "in_progress", "in_progress");
        assertThat(outcomes)
                .as("the listener's call too, then the outer transaction's claim when it committed")
                .endsWith("h-1=in_progress", "h-1=applied");
        assertThat(sent())
                .as("the inner transaction was not doomed: it committed its own work")
                .containsExactly("inner-stands");
        assertThat(applied()).containsExactly("h-1");
        String again =
                REQUIRED.execute(s -> held.process(Delivery.of("h-1", "x")).tag());
        assertThat(again).isEqualTo("duplicate");
        List<String> batch = REQUIRED.execute(s ->
                held.processBatch(List.of(Delivery.of("h-2", "x"), Delivery.of("h-1", "x"))).stream()
                        .map(Outcome::tag)
                        .toList());
        assertThat(batch).as("redelivered after the holder ended").containsExactly("applied", "duplicate");
        assertThat(applied()).containsExactly("h-1", "h-2");
    }

    /**
     * A stream an ordered run moved in a NESTED step rolled back to its savepoint: the database released the
     * stream's row lock with the savepoint (PostgreSQL, MariaDB 10.6+), so a REQUIRES_NEW run of the stream
     * inside the same outer transaction runs (it waits for nothing) rather than failing fast.
     */
    @Test
    void aStreamMovedInANestedStepRolledBackIsFreeForARequiresNewRun() {
        IdempotentConsumer ordered =
                once.consumer("payments", (d, tx) -> jdbc.update("INSERT INTO ledger VALUES (?, 1)", d.eventId()));
        List<String> inner = new CopyOnWriteArrayList<>();
        REQUIRED.executeWithoutResult(outer -> {
            NESTED.executeWithoutResult(n -> {
                assertThat(ordered.processInOrder(
                                        List.of(Delivery.of("sp-1", "x")),
                                        new StreamPositions("sp", List.of(java.math.BigInteger.ONE)))
                                .get(0)
                                .tag())
                        .isEqualTo("applied");
                n.setRollbackOnly();
            });
            REQUIRES_NEW.executeWithoutResult(n -> {
                jdbc.execute("SET LOCAL lock_timeout = '3s'");
                ordered.processInOrder(
                                List.of(Delivery.of("sp-2", "x")),
                                new StreamPositions("sp", List.of(java.math.BigInteger.TWO)))
                        .forEach(o -> inner.add(o.tag()));
            });
        });
        assertThat(inner).containsExactly("applied");
        assertThat(applied()).containsExactly("sp-2");
    }

    @Test
    void aRequiresNewStepInsideAListenerWritesItsMessageInItsOwnTransaction() {
        Payments payments = context.getBean(Payments.class);
        assertThatThrownBy(() -> payments.audited("fail-1")).hasMessage("delivery fails after its audit step");
        payments.audited("ok-1");
        assertThat(sent())
                .as("the audit step committed on its own each time; only the delivery that committed sent its own")
                .containsExactly("audit-fail-1", "audit-ok-1", "ok-1");
        assertThat(outcomes).containsExactly("fail-1=failed_retryable", "ok-1=applied");
    }

    // ---- items 4 and 5: process() and @IdempotentListener under NESTED ----

    static IdempotentConsumer billing() {
        return once.consumer("billing", (d, tx) -> {
            jdbc.update("INSERT INTO ledger VALUES (?, 20)", d.eventId());
            tx.outbox().add("charges", d.eventId(), d.payload(), Map.of(), null);
        });
    }

    @Test
    void processInsideANestedStepIsAppliedNotDeadLettered() {
        IdempotentConsumer billing = billing();
        Outcome[] o = new Outcome[1];
        try {
            REQUIRED.executeWithoutResult(
                    s -> NESTED.executeWithoutResult(n -> o[0] = billing.process(Delivery.of("n-1", "x"))));
        } catch (org.springframework.transaction.UnexpectedRollbackException e) {
            // asserted below: the outcome says why
        }
        assertThat(o[0].status())
                .as("a claim made inside a savepoint is this transaction's claim: %s", o[0])
                .isEqualTo(Outcome.Status.APPLIED);
        assertThat(outcomes).containsExactly("n-1=applied");
        assertThat(applied()).containsExactly("n-1");
        assertThat(sent()).containsExactly("n-1");
    }

    @Test
    void processInsideANestedStepThatRollsBackIsReportedNotApplied() {
        IdempotentConsumer billing = billing();
        REQUIRED.executeWithoutResult(s -> {
            billing.process(Delivery.of("kept", "x"));
            failingNestedStep(() -> billing.process(Delivery.of("undone", "x")));
        });
        assertThat(claimed()).containsExactly("kept");
        assertThat(applied()).containsExactly("kept");
        assertThat(sent()).containsExactly("kept");
        assertThat(outcomes)
                .as("the nested part holding 'undone' rolled back to its savepoint: it must not be reported applied")
                .containsExactly("kept=applied", "undone=failed_retryable");
    }

    @Test
    void aListenerCalledInsideANestedStepThatRollsBackIsReportedNotApplied() {
        Payments payments = context.getBean(Payments.class);
        REQUIRED.executeWithoutResult(s -> {
            payments.on("l-kept");
            failingNestedStep(() -> payments.on("l-undone"));
        });
        assertThat(claimed()).containsExactly("l-kept");
        assertThat(sent()).containsExactly("l-kept");
        assertThat(outcomes).containsExactly("l-kept=applied", "l-undone=failed_retryable");
    }

    @Test
    void aListenerCalledInsideANestedStepIsAppliedNotDeadLettered() {
        Payments payments = context.getBean(Payments.class);
        REQUIRED.executeWithoutResult(s -> NESTED.executeWithoutResult(n -> payments.on("l-nested")));
        assertThat(outcomes).containsExactly("l-nested=applied");
        assertThat(applied()).containsExactly("l-nested");
    }

    // ---- the driver's connection: handed out only where the handler is confined ----

    @Test
    void aHandlerInACallersTransactionIsRefusedTheDriversConnection() {
        unwraps.clear();
        IdempotentConsumer c = once.consumer("caller-unwrap", (d, tx) -> unwraps.add(unwrap(tx.connection())));
        REQUIRED.executeWithoutResult(s -> c.process(Delivery.of("cu-1", "x")));
        assertThat(unwraps)
                .as("inside a caller's transaction the caller's code may reach the connection unguarded anyway,"
                        + " but the handler's own connection must not hand the driver out")
                .containsExactly("refused");
    }

    @Test
    void onlyTheConfinedBodyGetsTheDriversConnectionNotAConsumerItCalls() {
        unwraps.clear();
        context.getBean(Payments.class).unwrapping("ux-1");
        assertThat(unwraps)
                .as("the confined body's own guard hands the driver out (and its claim is then checked); the"
                        + " handler of a consumer called in that body is not the confined one")
                .containsExactly("body:driver", "inner:refused");
        assertThat(claimed()).containsExactly("inner-ux-1", "ux-1");
        assertThat(applied()).containsExactly("ux-1");
        assertThat(outcomes).contains("ux-1=applied", "inner-ux-1=applied");
    }

    // ---- item 6: transactionalConsumer inside a caller's transaction ----

    @Test
    void aTransactionalConsumerCalledInsideACallersTransactionIsRefused() {
        IdempotentConsumer own = once.transactionalConsumer(
                "own", (d, tx) -> jdbc.update("INSERT INTO ledger VALUES (?, 20)", d.eventId()));
        assertThatThrownBy(() -> REQUIRED.executeWithoutResult(s -> own.process(Delivery.of("t-1", "x"))))
                .isInstanceOf(IllegalTransactionStateException.class)
                .hasMessageContaining("transaction of its own")
                .hasMessageContaining("OnceSpring.consumer");
        assertThat(applied()).isEmpty();
        assertThat(outcomes).isEmpty();
        // outside a transaction it runs in its own, final when it returns
        assertThat(own.process(Delivery.of("t-1", "x")).status()).isEqualTo(Outcome.Status.APPLIED);
        assertThat(applied()).containsExactly("t-1");
    }
}
