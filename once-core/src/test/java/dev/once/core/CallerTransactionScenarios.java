package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.BatchHandler;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialect;
import dev.once.testsupport.TestDatabase;
import dev.once.tx.ManualTransactions;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 19's scenarios where {@code once} meets a transaction it does not own, or a part of one that
 * rolls back, through plain JDBC handlers and {@link ManualTransactions}; one subclass per database.
 * Each test is named after what broke.
 */
abstract class CallerTransactionScenarios {

    TestDatabase db;
    final ManualTransactions manual = new ManualTransactions();
    final List<Outcome> reported = new CopyOnWriteArrayList<>();

    abstract TestDatabase freshDatabase();

    abstract Dialect dialect();

    @BeforeEach
    void setUp() {
        db = Ledger.on(freshDatabase());
    }

    @AfterEach
    void tearDown() {
        if (db != null) { // null when setUp skipped the test: no MariaDB
            db.close();
        }
    }

    static void sql(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    static void credit(Connection c, long amount) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("UPDATE account SET balance = balance + ? WHERE id = 1")) {
            ps.setLong(1, amount);
            ps.executeUpdate();
        }
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    List<String> outboxPayloads() throws SQLException {
        List<String> payloads = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                var rs = s.executeQuery("SELECT payload FROM once_outbox ORDER BY id")) {
            while (rs.next()) {
                payloads.add(new String(rs.getBytes(1), StandardCharsets.UTF_8));
            }
        }
        return payloads;
    }

    IdempotentConsumer owned(Handler handler) {
        return IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("billing")
                .handler(handler)
                .outcomeListener((d, o) -> reported.add(o))
                .build();
    }

    IdempotentConsumer ownedBatch(BatchHandler handler) {
        return IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("billing")
                .batchHandler(handler)
                .outcomeListener((d, o) -> reported.add(o))
                .build();
    }

    IdempotentConsumer joined(Handler handler) {
        return IdempotentConsumer.builder()
                .transactions(manual)
                .dialect(dialect())
                .consumer("billing")
                .handler(handler)
                .outcomeListener((d, o) -> reported.add(o))
                .build();
    }

    // Item 1: the buffer follows the handler's savepoints.
    @Test
    void outboxRowAddedBeforeTheHandlerRolledBackToItsSavepointIsNotSent() throws Exception {
        IdempotentConsumer billing = owned((d, tx) -> {
            Connection c = tx.connection();
            Savepoint sp = c.setSavepoint();
            tx.outbox().add("mail", "k", bytes("phantom"), null, null);
            credit(c, 1000);
            c.rollback(sp); // the optional part failed; the handler goes on without it
            tx.outbox().add("mail", "k", bytes("kept"), null, null);
            credit(c, 5);
        });
        assertThat(billing.process(Ledger.payment("evt-1", 5)).status()).isEqualTo(Status.APPLIED);
        assertThat(Ledger.balance(db)).as("the rolled-back credit is gone").isEqualTo(5);
        assertThat(outboxPayloads())
                .as("the row added inside the rolled-back savepoint is not sent (phantom)")
                .containsExactly("kept");
    }

    @Test
    void batchHandlerWithOneSavepointPerRecordSendsOnlyTheRowsOfRecordsThatStood() throws Exception {
        IdempotentConsumer billing = ownedBatch((claimed, tx) -> {
            Connection c = tx.connection();
            for (Delivery d : claimed) {
                Savepoint sp = c.setSavepoint();
                try {
                    tx.outbox(d).add("mail", d.eventId(), bytes(d.eventId()), null, null);
                    if (d.payloadText().equals("poison")) {
                        throw new SQLException("record " + d.eventId() + " is bad");
                    }
                    credit(c, Long.parseLong(d.payloadText()));
                    c.releaseSavepoint(sp);
                } catch (SQLException e) {
                    c.rollback(sp); // skip the bad record, keep the others
                }
            }
        });
        List<Outcome> outcomes = billing.processBatch(
                List.of(Ledger.payment("evt-1", 1), Delivery.of("evt-2", "poison"), Ledger.payment("evt-3", 3)));
        assertThat(outcomes).extracting(Outcome::status).containsOnly(Status.APPLIED);
        assertThat(Ledger.balance(db)).isEqualTo(4);
        assertThat(outboxPayloads())
                .as("the skipped record's row is not sent (phantom)")
                .containsExactly("evt-1", "evt-3");
    }

    @Test
    void outboxRowAddedAfterASavepointSetAsSqlTextIsUndoneByTheDatabasesRollback() throws Exception {
        IdempotentConsumer billing = owned((d, tx) -> {
            Connection c = tx.connection();
            sql(c, "SAVEPOINT optional_part");
            tx.outbox().add("mail", "k", bytes("phantom"), null, null);
            sql(c, "ROLLBACK TO SAVEPOINT optional_part");
            credit(c, 5);
        });
        assertThat(billing.process(Ledger.payment("evt-1", 5)).status()).isEqualTo(Status.APPLIED);
        assertThat(outboxPayloads()).as("phantom row").isEmpty();
    }

    // Item 4: a claim made inside a subtransaction.
    @Test
    void claimMadeInsideTheCallersSavepointIsAppliedNotFailedPermanent() throws Exception {
        IdempotentConsumer billing = joined(Ledger.CREDIT);
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                tx.setSavepoint();
                Outcome o = billing.process(Ledger.payment("evt-1", 7));
                assertThat(o.status()).as("%s", o).isEqualTo(Status.APPLIED);
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(reported).extracting(Outcome::status).containsExactly(Status.APPLIED);
        assertThat(Ledger.balance(db)).isEqualTo(7);
    }

    @Test
    void claimInsideASavepointWhoseHandlerRecoveredFromAnErrorInItsOwnSavepointIsApplied() throws Exception {
        IdempotentConsumer billing = joined((d, tx) -> {
            Connection c = tx.connection();
            Savepoint sp = c.setSavepoint();
            try {
                sql(c, "INSERT INTO no_such_table VALUES (1)");
            } catch (SQLException expected) {
                c.rollback(sp); // recovered: the transaction is fine
            }
            credit(c, 7);
        });
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                c.setSavepoint(); // taken on the connection: the claim is still made in a subtransaction
                Outcome o = billing.process(Ledger.payment("evt-1", 7));
                assertThat(o.status()).as("%s", o).isEqualTo(Status.APPLIED);
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(reported).extracting(Outcome::status).containsExactly(Status.APPLIED);
        assertThat(Ledger.balance(db)).isEqualTo(7);
    }

    @Test
    void ownedHandlerThatRecoveredFromAnErrorInItsOwnSavepointIsApplied() throws Exception {
        IdempotentConsumer billing = owned((d, tx) -> {
            Connection c = tx.connection();
            Savepoint sp = c.setSavepoint();
            try {
                sql(c, "INSERT INTO no_such_table VALUES (1)");
            } catch (SQLException expected) {
                c.rollback(sp);
            }
            credit(c, 7);
        });
        assertThat(billing.process(Ledger.payment("evt-1", 7)).status()).isEqualTo(Status.APPLIED);
        assertThat(Ledger.balance(db)).isEqualTo(7);
    }

    // Item 5: an outcome reported for work that was rolled back.
    @Test
    void claimRolledBackToTheCallersSavepointIsNotReportedApplied() throws Exception {
        IdempotentConsumer billing = joined(Ledger.CREDIT);
        Delivery event = Ledger.payment("evt-1", 7);
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                sql(c, "INSERT INTO account VALUES (2, 0)"); // the caller's own work, kept
                Savepoint sp = tx.setSavepoint();
                assertThat(billing.process(event).status()).as("provisional").isEqualTo(Status.APPLIED);
                tx.rollback(sp); // the nested part that holds the claim and the effect is undone
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(db.queryLong("SELECT count(*) FROM account"))
                .as("the outer commit went through")
                .isEqualTo(2);
        assertThat(Ledger.balance(db))
                .as("the effect rolled back with the savepoint")
                .isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox"))
                .as("the claim too")
                .isZero();
        assertThat(reported)
                .extracting(Outcome::status)
                .as("the listener must not hear APPLIED for work that was rolled back (acked, not committed)")
                .containsExactly(Status.FAILED_RETRYABLE);
        assertThat(owned(Ledger.CREDIT).process(event.redelivery()).status()).isEqualTo(Status.APPLIED);
        assertThat(Ledger.balance(db)).as("effect applied exactly once").isEqualTo(7);
    }

    @Test
    void claimUnderAReleasedSavepointIsAppliedWithTheOuterCommit() throws Exception {
        IdempotentConsumer billing = joined(Ledger.CREDIT);
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                Savepoint outer = tx.setSavepoint();
                Savepoint inner = tx.setSavepoint();
                billing.process(Ledger.payment("evt-1", 7));
                tx.releaseSavepoint(inner);
                billing.process(Ledger.payment("evt-2", 1));
                tx.releaseSavepoint(outer);
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(reported).extracting(Outcome::status).containsExactly(Status.APPLIED, Status.APPLIED);
        assertThat(Ledger.balance(db)).isEqualTo(8);
    }

    @Test
    void rowAddedBeforeASavepointButWrittenAfterItByAThresholdFlushSurvivesTheRollback() throws Exception {
        IdempotentConsumer billing = owned((d, tx) -> {
            Connection c = tx.connection();
            tx.outbox().add("mail", "k", bytes("before"), null, null);
            Savepoint sp = c.setSavepoint();
            for (int i = 0; i < dev.once.Outbox.FLUSH_ROWS; i++) {
                tx.outbox().add("mail", "k", bytes("inside"), null, null); // the threshold writes "before" too
            }
            c.rollback(sp);
            credit(c, 1);
        });
        assertThat(billing.process(Ledger.payment("evt-1", 1)).status()).isEqualTo(Status.APPLIED);
        assertThat(outboxPayloads())
                .as("the row added before the savepoint stays (lost otherwise), none added inside it is sent")
                .containsExactly("before");
    }

    @Test
    void transactionOutboxOfAPlainJdbcCallerFollowsTheSavepointsItIsToldOf() throws Exception {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            dev.once.TransactionOutbox outbox = dev.once.TransactionOutbox.builder()
                    .connection(c)
                    .dialect(dialect())
                    .source("orders")
                    .cause("order-1")
                    .build();
            outbox.add("mail", "k", bytes("kept"), null, null);
            Savepoint sp = c.setSavepoint();
            outbox.savepoint(sp);
            outbox.add("mail", "k", bytes("phantom"), null, null);
            c.rollback(sp);
            outbox.rollbackToSavepoint(sp);
            outbox.flush();
            c.commit();
            c.setAutoCommit(true);
        }
        assertThat(outboxPayloads()).containsExactly("kept");
    }

    // Found by SPIN (joined.pml: savepoint, first add, threshold flush, rollback): a rollback to a savepoint
    // set before the outbox existed, after a threshold flush, threw "outbox rows 0..1000 were undone but
    // not kept" although nothing had to be written again (Spring: a NESTED step that makes the writer).
    @Test
    void rollbackToASavepointSetBeforeTheOutboxExistedAfterAThresholdFlushUndoesItsRows() throws Exception {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            Savepoint sp = c.setSavepoint();
            dev.once.TransactionOutbox outbox = dev.once.TransactionOutbox.builder()
                    .connection(c)
                    .dialect(dialect())
                    .source("orders")
                    .cause("order-1")
                    .build();
            for (int i = 0; i < dev.once.Outbox.FLUSH_ROWS; i++) {
                outbox.add("mail", "k", bytes("phantom"), null, null); // the threshold writes them
            }
            c.rollback(sp);
            outbox.rollbackToSavepoint(sp);
            outbox.add("mail", "k", bytes("kept"), null, null);
            outbox.flush();
            c.commit();
            c.setAutoCommit(true);
        }
        assertThat(outboxPayloads()).containsExactly("kept");
    }

    // The same rollback with rows written (a flush) and more buffered since: the buffered ones are of the
    // rolled-back part too and are dropped, not renumbered from the mark and written by the next flush.
    @Test
    void rollbackToASavepointSetBeforeTheOutboxExistedDropsRowsBufferedAfterAFlush() throws Exception {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            Savepoint sp = c.setSavepoint();
            dev.once.TransactionOutbox outbox = dev.once.TransactionOutbox.builder()
                    .connection(c)
                    .dialect(dialect())
                    .source("orders")
                    .cause("order-1")
                    .build();
            outbox.add("mail", "k", bytes("phantom-written"), null, null);
            outbox.flush();
            outbox.add("mail", "k", bytes("phantom-buffered"), null, null);
            c.rollback(sp);
            outbox.rollbackToSavepoint(sp);
            outbox.add("mail", "k", bytes("kept"), null, null);
            outbox.flush();
            c.commit();
            c.setAutoCommit(true);
        }
        assertThat(outboxPayloads()).containsExactly("kept");
    }

    @Test
    void outboxRowAddedByAHandlerUnderTheCallersSavepointThatTheHandlerRollsBackIsNotSent() throws Exception {
        // A savepoint set and rolled back through the joined transaction (ManualTransactions' scope, as
        // Spring's NESTED does through its synchronization) while the handler runs, on the raw connection.
        ManualTransactions.Scope[] scope = new ManualTransactions.Scope[1];
        IdempotentConsumer billing = joined((d, tx) -> {
            Savepoint sp = scope[0].setSavepoint();
            tx.outbox().add("mail", "k", bytes("phantom"), null, null);
            scope[0].rollback(sp);
            tx.outbox().add("mail", "k", bytes("kept"), null, null);
            credit(tx.connection(), 2);
        });
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                scope[0] = tx;
                assertThat(billing.process(Ledger.payment("evt-1", 2)).status()).isEqualTo(Status.APPLIED);
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(outboxPayloads()).containsExactly("kept");
        assertThat(reported).extracting(Outcome::status).containsExactly(Status.APPLIED);
    }

    // Item 8 (found by reading): a joined batch whose claim statement fails is still reported.
    @Test
    void joinedBatchWhoseClaimStatementFailsIsReportedToTheListener() throws Exception {
        IdempotentConsumer billing = IdempotentConsumer.builder()
                .transactions(manual)
                .dialect(dialect())
                .consumer("billing")
                .batchHandler((claimed, tx) -> {})
                .outcomeListener((d, o) -> reported.add(o))
                .build();
        db.execute("DROP TABLE once_inbox"); // the claim statement fails
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                List<Outcome> outcomes = billing.processBatch(List.of(Delivery.of("a", "1"), Delivery.of("b", "2")));
                assertThat(outcomes).extracting(Outcome::status).containsOnly(Status.FAILED_RETRYABLE);
                tx.rollback();
            }
            c.setAutoCommit(true);
        }
        assertThat(reported)
                .extracting(Outcome::status)
                .as("every delivery of the batch is reported once the transaction ends")
                .containsExactly(Status.FAILED_RETRYABLE, Status.FAILED_RETRYABLE);
    }

    // Issue 21's round trip: the check is sent only when the guard saw something that can cost the claim.
    @Test
    void defaultOwnedPathSendsClaimHandlerAndCommitButNoClaimCheck() throws Exception {
        CountingDataSource counting = new CountingDataSource(db.dataSource());
        IdempotentConsumer billing = IdempotentConsumer.builder()
                .dataSource(counting.dataSource())
                .consumer("billing")
                .handler(Ledger.CREDIT)
                .build();
        assertThat(billing.process(Ledger.payment("evt-1", 3)).status()).isEqualTo(Status.APPLIED);
        assertThat(counting.prepared())
                .as("claim and the handler's UPDATE only: no statement of its own for the claim check")
                .hasSize(2)
                .noneMatch(sql -> sql.contains("count(*)"));

        counting.reset();
        IdempotentConsumer recovering = IdempotentConsumer.builder()
                .dataSource(counting.dataSource())
                .consumer("billing")
                .handler((d, tx) -> {
                    Savepoint sp = tx.connection().setSavepoint();
                    try {
                        sql(tx.connection(), "INSERT INTO no_such_table VALUES (1)");
                    } catch (SQLException expected) {
                        tx.connection().rollback(sp);
                    }
                    credit(tx.connection(), 3);
                })
                .build();
        assertThat(recovering.process(Ledger.payment("evt-2", 3)).status()).isEqualTo(Status.APPLIED);
        assertThat(counting.prepared())
                .as("a handler that saw an error gets the claim check")
                .anyMatch(sql -> sql.contains("count(*)"));
        assertThat(Ledger.balance(db)).isEqualTo(6);
    }
}
