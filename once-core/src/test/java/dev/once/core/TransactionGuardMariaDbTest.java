package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.HandlerMisuseException;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 10, items 2 and 3 on MariaDB: InnoDB rolls back the whole transaction on a deadlock and
 * later statements run in a new one; DDL commits implicitly. Neither may be reported APPLIED.
 */
class TransactionGuardMariaDbTest {

    private TestDatabase db;

    @BeforeEach
    void setUp() {
        db = TestMariaDb.shared().freshDatabase(6);
        db.execute("CREATE TABLE account (id bigint PRIMARY KEY, balance bigint NOT NULL) ENGINE=InnoDB");
        StringBuilder rows = new StringBuilder("INSERT INTO account VALUES (1, 0), (2, 0), (3, 0)");
        for (int i = 10; i < 200; i++) {
            rows.append(", (").append(i).append(", 0)");
        }
        db.execute(rows.toString());
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    private long balance(int id) {
        return db.queryLong("SELECT balance FROM account WHERE id = " + id);
    }

    private long claims() {
        return db.queryLong("SELECT count(*) FROM once_inbox");
    }

    private static void update(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.executeUpdate(sql);
        }
    }

    @Test
    void handlerThatSwallowsADeadlockIsNeverReportedApplied() throws Exception {
        CountDownLatch handlerHoldsRow1 = new CountDownLatch(1);
        CountDownLatch rivalHoldsRow2 = new CountDownLatch(1);
        IdempotentConsumer careless = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("guarded")
                .handler((d, tx) -> {
                    Connection c = tx.connection();
                    update(c, "UPDATE account SET balance = balance + 1 WHERE id = 1");
                    if (d.attempt() == 1) {
                        handlerHoldsRow1.countDown();
                        assertThat(rivalHoldsRow2.await(30, TimeUnit.SECONDS)).isTrue();
                        try {
                            // Deadlock with the rival: InnoDB rolls back the lighter transaction, this one.
                            update(c, "UPDATE account SET balance = balance + 1 WHERE id = 2");
                        } catch (SQLException swallowed) {
                            // a careless handler; the claim and the first update are gone
                        }
                    }
                    update(c, "UPDATE account SET balance = balance + 10 WHERE id = 3");
                })
                .build();
        CompletableFuture<Void> rival = CompletableFuture.runAsync(
                () -> {
                    try (Connection c = db.dataSource().getConnection()) {
                        c.setAutoCommit(false);
                        // Heavy: many rows changed, so InnoDB picks the handler's transaction as the victim.
                        update(c, "UPDATE account SET balance = balance + 1 WHERE id >= 10");
                        update(c, "UPDATE account SET balance = balance + 1 WHERE id = 2");
                        assertThat(handlerHoldsRow1.await(30, TimeUnit.SECONDS)).isTrue();
                        rivalHoldsRow2.countDown();
                        update(c, "UPDATE account SET balance = balance + 1 WHERE id = 1");
                        c.rollback();
                        c.setAutoCommit(true);
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                },
                OwnThreads.each());
        Delivery event = Delivery.of("evt-1", "x");
        Outcome o = careless.process(event);
        rival.get(30, TimeUnit.SECONDS);
        assertThat(o.status())
                .as("the database rolled the claim back: not applied")
                .isNotEqualTo(Status.APPLIED);
        assertThat(o.retryable()).isTrue();
        assertThat(balance(3))
                .as("what ran after the deadlock, in a new transaction, is not committed")
                .isZero();
        assertThat(balance(1)).isZero();
        assertThat(claims()).isZero();
        assertThat(careless.process(event.redelivery()).status()).isEqualTo(Status.APPLIED);
        assertThat(balance(1)).as("effect applied exactly once").isEqualTo(1);
        assertThat(balance(3)).as("effect applied exactly once").isEqualTo(10);
    }

    @Test
    void aBatchWhoseHandlerRemovesTheClaimOfALaterEventIsNotReportedAppliedForIt() throws Exception {
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("guarded")
                .handler((d, tx) -> {
                    update(tx.connection(), "UPDATE account SET balance = balance + 1 WHERE id = 1");
                    if (d.eventId().equals("evt-2") && d.attempt() == 1) {
                        update(tx.connection(), "DELETE FROM once_inbox WHERE event_id = 'evt-2'");
                    }
                })
                .build();
        Delivery second = Delivery.of("evt-2", "x");
        var outcomes =
                consumer.processBatch(java.util.List.of(Delivery.of("evt-1", "x"), second, Delivery.of("evt-3", "x")));

        assertThat(outcomes)
                .extracting(Outcome::eventId, Outcome::status)
                .as("the check must cover every claim of the batch, not only its first")
                .doesNotContain(org.assertj.core.groups.Tuple.tuple("evt-2", Status.APPLIED));
        long applied =
                outcomes.stream().filter(x -> x.status() == Status.APPLIED).count();
        assertThat(balance(1))
                .as("exactly the events reported APPLIED are applied")
                .isEqualTo(applied);
        assertThat(claims()).isEqualTo(applied);
        assertThat(consumer.process(second.redelivery()).status()).isEqualTo(Status.APPLIED);
        assertThat(balance(1)).as("evt-2 applied exactly once").isEqualTo(applied + 1);
    }

    @Test
    void aBatchLargerThanOneCheckStatementIsCheckedWhole() throws Exception {
        // 1,500 ids: the claim and its check go in IN lists of at most 1,000; the lost claim is in the second.
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("guarded")
                .handler((d, tx) -> {
                    update(tx.connection(), "UPDATE account SET balance = balance + 1 WHERE id = 1");
                    if (d.eventId().equals("evt-1300") && d.attempt() == 1) {
                        update(tx.connection(), "DELETE FROM once_inbox WHERE event_id = 'evt-1300'");
                    }
                })
                .build();
        java.util.List<Delivery> batch = new java.util.ArrayList<>();
        for (int i = 0; i < 1_500; i++) {
            batch.add(Delivery.of("evt-" + i, "x"));
        }
        var outcomes = consumer.processBatch(batch);

        assertThat(outcomes)
                .extracting(Outcome::eventId, Outcome::status)
                .doesNotContain(org.assertj.core.groups.Tuple.tuple("evt-1300", Status.APPLIED));
        long applied =
                outcomes.stream().filter(x -> x.status() == Status.APPLIED).count();
        assertThat(applied)
                .as("everything but the culprit applied, after bisection")
                .isEqualTo(1_499);
        assertThat(balance(1)).isEqualTo(applied);
        assertThat(claims()).isEqualTo(applied);
    }

    @Test
    void aStatementThatWouldCommitImplicitlyIsRefused() throws Exception {
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("guarded")
                .handler((d, tx) -> {
                    update(tx.connection(), "UPDATE account SET balance = balance + 1 WHERE id = 1");
                    // DDL would commit the claim transaction implicitly on MariaDB, the rest running in a new one.
                    update(tx.connection(), "CREATE TABLE side_effect (id int)");
                    update(tx.connection(), "UPDATE account SET balance = balance + 10 WHERE id = 3");
                })
                .build();
        Outcome o = consumer.process(Delivery.of("evt-1", "x"));
        assertThat(o.status()).isEqualTo(Status.FAILED_PERMANENT);
        assertThat(o.failure()).isInstanceOf(HandlerMisuseException.class).hasMessageContaining("implicit");
        assertThat(balance(1)).as("the claim did not commit before the rest").isZero();
        assertThat(balance(3)).isZero();
        assertThat(claims()).isZero();
        assertThat(db.queryLong("SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()"
                        + " AND table_name = 'side_effect'"))
                .as("the DDL never ran")
                .isZero();
    }

    @Test
    void transactionControlIssuedAsSqlIsRefusedOnMariaDb() throws Exception {
        for (String sql : new String[] {
            "COMMIT",
            "rollback",
            "BEGIN",
            "START TRANSACTION READ WRITE",
            "SET autocommit = 1",
            "SET @@autocommit=1",
            "set session autocommit=ON",
            "XA START 'x'",
            "# why\nCOMMIT"
        }) {
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("guarded")
                    .handler((d, tx) -> {
                        update(tx.connection(), "UPDATE account SET balance = balance + 1 WHERE id = 1");
                        try (Statement s = tx.connection().createStatement()) {
                            s.execute(sql);
                        }
                    })
                    .build();
            Outcome o = consumer.process(Delivery.of("evt-" + Math.abs(sql.hashCode()), "x"));
            assertThat(o.status()).as(sql).isEqualTo(Status.FAILED_PERMANENT);
            assertThat(o.failure()).as(sql).isInstanceOf(HandlerMisuseException.class);
            assertThat(balance(1)).as(sql).isZero();
            assertThat(claims()).as(sql).isZero();
        }
    }
}
