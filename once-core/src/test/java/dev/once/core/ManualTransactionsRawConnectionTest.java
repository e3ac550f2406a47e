package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The caller of a {@link ManualTransactions} scope undoes once's claim on the connection itself, behind the
 * scope's back, after {@code process()} returned, and then commits through the scope: a rollback of the whole
 * transaction (its own error handling, a DAO that rolls back), or a savepoint set and rolled back on the
 * connection. The delivery's claim and effect are gone; it must not be reported APPLIED (an adapter would
 * acknowledge it, and the event would be lost). Found while attacking the caller-transaction boundary:
 * {@code heard=[e=APPLIED] inbox=0} on the old code, where the claim was checked only right after the handler.
 */
class ManualTransactionsRawConnectionTest {

    private static final AtomicLong ids = new AtomicLong();
    private static TestDatabase postgres;
    private static TestDatabase mariadb;

    @AfterAll
    static void stop() {
        for (TestDatabase db : new TestDatabase[] {postgres, mariadb}) {
            if (db != null) {
                db.close();
            }
        }
    }

    private static TestDatabase db(boolean maria) {
        if (maria) {
            if (mariadb == null) {
                mariadb = TestMariaDb.shared().freshDatabase(2);
                mariadb.execute("CREATE TABLE raw_effect (id varchar(40))");
            }
            return mariadb;
        }
        if (postgres == null) {
            postgres = TestPostgres.shared().freshDatabase(2);
            postgres.execute("CREATE TABLE raw_effect (id varchar(40))");
        }
        return postgres;
    }

    @ParameterizedTest(name = "mariadb={0}")
    @ValueSource(booleans = {false, true})
    void aRollbackOnTheConnectionAfterProcessIsNotReportedApplied(boolean maria) throws Exception {
        undoBehindTheScope(maria, false);
    }

    @ParameterizedTest(name = "mariadb={0}")
    @ValueSource(booleans = {false, true})
    void aSavepointRolledBackOnTheConnectionIsNotReportedApplied(boolean maria) throws Exception {
        undoBehindTheScope(maria, true);
    }

    private static void undoBehindTheScope(boolean maria, boolean savepoint) throws Exception {
        TestDatabase db = db(maria);
        Dialect dialect = maria ? Dialects.MARIADB : Dialects.POSTGRESQL;
        ManualTransactions manual = new ManualTransactions();
        List<String> heard = new ArrayList<>();
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .transactions(manual)
                .dialect(dialect)
                .consumer("raw")
                .handler((d, tx) -> {
                    try (Statement s = tx.connection().createStatement()) {
                        s.execute("INSERT INTO raw_effect VALUES ('" + d.eventId() + "')");
                    }
                })
                .outcomeListener((d, o) -> heard.add(d.eventId() + "=" + o.status()))
                .build();
        String id = "e-" + ids.incrementAndGet();
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope scope = manual.join(c)) {
                Savepoint sp = savepoint ? c.setSavepoint() : null;
                consumer.process(Delivery.of(id, "x"));
                if (savepoint) {
                    c.rollback(sp);
                } else {
                    c.rollback();
                }
                assertThatThrownBy(scope::commit)
                        .as("the commit refuses a transaction whose claim was undone")
                        .isInstanceOf(SQLException.class)
                        .hasMessageContaining("undone");
            }
        }
        // PostgreSQL's check proves the claim is not the transaction's (reported as misuse: permanent, dead-lettered
        // where the adapter has a dead letter); MariaDB's finds it gone (retryable): never APPLIED, never acknowledged
        assertThat(heard)
                .as("reported once, not applied")
                .hasSize(1)
                .allSatisfy(h -> assertThat(h).startsWith(id + "=FAILED_"));
        assertThat(count(db, "SELECT count(*) FROM once_inbox WHERE event_id = '" + id + "'"))
                .isZero();
        assertThat(count(db, "SELECT count(*) FROM raw_effect WHERE id = '" + id + "'"))
                .isZero();
    }

    private static long count(TestDatabase db, String sql) throws SQLException {
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }
}
