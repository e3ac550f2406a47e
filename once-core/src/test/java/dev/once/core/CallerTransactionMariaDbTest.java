package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@link CallerTransactionScenarios} on MariaDB, and what only MariaDB does. */
class CallerTransactionMariaDbTest extends CallerTransactionScenarios {

    @Override
    TestDatabase freshDatabase() {
        return TestMariaDb.shared().freshDatabase(6);
    }

    @Override
    Dialect dialect() {
        return Dialects.MARIADB;
    }

    // Item 7: the deadlock rolled the claim back, the handler went on, and meanwhile a redelivery
    // claimed and committed the same event: a count of the claim finds that copy.
    @Test
    void handlerThatSwallowedADeadlockIsNotAppliedAgainstACopyCommittedMeanwhile() throws Exception {
        db.execute("INSERT INTO account VALUES (2, 0), (3, 0)");
        for (int i = 10; i < 200; i++) {
            db.execute("INSERT INTO account VALUES (" + i + ", 0)");
        }
        CountDownLatch handlerHoldsRow1 = new CountDownLatch(1);
        CountDownLatch rivalHoldsRow2 = new CountDownLatch(1);
        IdempotentConsumer[] careless = new IdempotentConsumer[1];
        careless[0] = owned((d, tx) -> {
            Connection c = tx.connection();
            sql(c, "UPDATE account SET balance = balance + 1 WHERE id = 1");
            if (d.attempt() == 1) {
                handlerHoldsRow1.countDown();
                assertThat(rivalHoldsRow2.await(30, TimeUnit.SECONDS)).isTrue();
                try {
                    sql(c, "UPDATE account SET balance = balance + 1 WHERE id = 2"); // the deadlock victim
                } catch (SQLException swallowed) {
                    // the claim is gone; a redelivery now claims and commits the same event
                    Outcome copy = CompletableFuture.supplyAsync(
                                    () -> careless[0].process(d.redelivery()), OwnThreads.each())
                            .get(30, TimeUnit.SECONDS);
                    assertThat(copy.status()).isEqualTo(Status.APPLIED);
                }
            }
            sql(c, "UPDATE account SET balance = balance + 10 WHERE id = 3");
        });
        CompletableFuture<Void> rival = CompletableFuture.runAsync(
                () -> {
                    try (Connection c = db.dataSource().getConnection()) {
                        c.setAutoCommit(false);
                        sql(c, "UPDATE account SET balance = balance + 1 WHERE id >= 10"); // heavy: not the victim
                        sql(c, "UPDATE account SET balance = balance + 1 WHERE id = 2");
                        assertThat(handlerHoldsRow1.await(30, TimeUnit.SECONDS)).isTrue();
                        rivalHoldsRow2.countDown();
                        sql(c, "UPDATE account SET balance = balance + 1 WHERE id = 1");
                        c.rollback();
                        c.setAutoCommit(true);
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                },
                OwnThreads.each());
        Outcome o = careless[0].process(Delivery.of("evt-1", "x"));
        rival.get(30, TimeUnit.SECONDS);
        assertThat(o.status()).as("%s", o).isNotEqualTo(Status.APPLIED);
        assertThat(db.queryLong("SELECT balance FROM account WHERE id = 3"))
                .as("effect applied exactly once (by the copy)")
                .isEqualTo(10);
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isEqualTo(1);
    }
}
