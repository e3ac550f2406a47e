package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.sql.Connection;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@link CallerTransactionScenarios} on PostgreSQL, and what only PostgreSQL does. */
class CallerTransactionPostgresTest extends CallerTransactionScenarios {

    @Override
    TestDatabase freshDatabase() {
        return TestPostgres.shared().freshDatabase(6);
    }

    @Override
    Dialect dialect() {
        return Dialects.POSTGRESQL;
    }

    // Item 4/7: the claim made in a subtransaction is undone by a ROLLBACK TO the caller's savepoint
    // (issued by the handler as SQL, which the guard lets through), and another transaction claims and
    // commits the same event meanwhile: the check must not take that committed copy for this claim.
    @Test
    void claimRolledBackInsideTheHandlerIsNotTakenForACopyCommittedMeanwhile() throws Exception {
        IdempotentConsumer rival = owned(Ledger.CREDIT);
        IdempotentConsumer billing = joined((d, tx) -> {
            sql(tx.connection(), "ROLLBACK TO SAVEPOINT before_once");
            Outcome copy = CompletableFuture.supplyAsync(() -> rival.process(d.redelivery()), OwnThreads.each())
                    .get(30, TimeUnit.SECONDS);
            assertThat(copy.status()).isEqualTo(Status.APPLIED);
            credit(tx.connection(), 1000);
        });
        Outcome o;
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                c.setSavepoint("before_once");
                o = billing.process(Ledger.payment("evt-1", 5));
                assertThatThrownBy(tx::commit).as("marked rollback-only").hasMessageContaining("rollback-only");
            }
            c.setAutoCommit(true);
        }
        assertThat(o.status()).as("%s", o).isNotEqualTo(Status.APPLIED);
        assertThat(Ledger.balance(db))
                .as("effect applied exactly once (by the copy)")
                .isEqualTo(5);
    }

    // What the check catches that the guard does not: a swallowed error aborted the transaction.
    @Test
    void ownedHandlerThatSwallowedAnErrorWithoutASavepointIsNotApplied() throws Exception {
        IdempotentConsumer billing = owned((d, tx) -> {
            credit(tx.connection(), 5);
            try {
                sql(tx.connection(), "INSERT INTO no_such_table VALUES (1)");
            } catch (java.sql.SQLException swallowed) {
                // a careless handler
            }
        });
        Outcome o = billing.process(Delivery.of("evt-1", "5"));
        assertThat(o.status()).as("%s", o).isEqualTo(Status.FAILED_RETRYABLE);
        assertThat(Ledger.balance(db)).isZero();
    }
}
