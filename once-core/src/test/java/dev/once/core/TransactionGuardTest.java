package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.HandlerMisuseException;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 10, items 2 and 3 on PostgreSQL: a handler cannot get the engine to report APPLIED for a
 * transaction the database did not commit, nor end the claim transaction behind the engine's back.
 */
class TransactionGuardTest {

    private TestDatabase db;

    @BeforeEach
    void setUp() {
        db = Ledger.on(TestPostgres.shared().freshDatabase(4));
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    private IdempotentConsumer consumer(Handler handler) {
        return IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("guarded")
                .handler(handler)
                .build();
    }

    /** A consumer joining {@code manual}'s transactions, its outcomes reported into {@code reported}. */
    private static IdempotentConsumer joined(
            ManualTransactions manual, java.util.List<Outcome> reported, Handler handler) {
        return IdempotentConsumer.builder()
                .transactions(manual)
                .dialect(Dialects.POSTGRESQL)
                .consumer("guarded")
                .outcomeListener((d, x) -> reported.add(x))
                .handler(handler)
                .build();
    }

    /** {@code notApplied} is not reported APPLIED, and exactly the events reported APPLIED are applied and claimed. */
    private void assertOnlyTheAppliedApplied(java.util.List<Outcome> outcomes, String notApplied) throws SQLException {
        assertThat(outcomes)
                .extracting(Outcome::eventId, Outcome::status)
                .doesNotContain(org.assertj.core.groups.Tuple.tuple(notApplied, Status.APPLIED));
        long applied =
                outcomes.stream().filter(x -> x.status() == Status.APPLIED).count();
        assertThat(balance())
                .as("exactly the events reported APPLIED are applied")
                .isEqualTo(applied);
        assertThat(claims()).isEqualTo(applied);
    }

    private long balance() throws SQLException {
        return Ledger.balance(db);
    }

    private long claims() {
        return db.queryLong("SELECT count(*) FROM once_inbox");
    }

    private static void credit(Connection c, long amount) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("UPDATE account SET balance = balance + ? WHERE id = 1")) {
            ps.setLong(1, amount);
            ps.executeUpdate();
        }
    }

    /** Nothing of the first delivery stands, and the redelivery applies the whole effect once. */
    private void assertNothingAppliedThenRedeliveryApplies(IdempotentConsumer consumer, Delivery event)
            throws SQLException {
        assertThat(balance())
                .as("nothing of the refused transaction is applied")
                .isZero();
        assertThat(claims()).as("the event is not claimed, so it is not lost").isZero();
        assertThat(consumer.process(event.redelivery()).status()).isEqualTo(Status.APPLIED);
        assertThat(balance()).as("effect applied exactly once").isEqualTo(11);
    }

    // ---- item 2: a handler that swallows a failed statement -------------------------------------

    @Test
    void handlerThatSwallowsAFailedStatementIsNeverReportedApplied() throws Exception {
        IdempotentConsumer consumer = consumer((d, tx) -> {
            credit(tx.connection(), 1);
            if (d.attempt() == 1) {
                try (Statement s = tx.connection().createStatement()) {
                    s.execute("UPDATE account SET balance = balance / 0 WHERE id = 1");
                } catch (SQLException swallowed) {
                    // a careless handler: PostgreSQL has aborted the transaction
                }
            }
            credit(tx.connection(), 10);
        });
        // The careless handler swallows the failure and everything after it; `consumer` is the
        // same handler fixed, for the redelivery.
        IdempotentConsumer careless = consumer((d, tx) -> {
            credit(tx.connection(), 1);
            try {
                try (Statement s = tx.connection().createStatement()) {
                    s.execute("UPDATE account SET balance = balance / 0 WHERE id = 1");
                }
                credit(tx.connection(), 10);
            } catch (SQLException swallowed) {
                // gone
            }
        });
        Delivery event = Ledger.payment("evt-1", 0);
        Outcome o = careless.process(event);
        assertThat(o.status()).as("COMMIT answered ROLLBACK: not applied").isNotEqualTo(Status.APPLIED);
        assertThat(o.retryable()).isTrue();
        assertNothingAppliedThenRedeliveryApplies(consumer, event);
    }

    @Test
    void handlerThatSwallowsAFailedStatementInABatchIsNeverReportedApplied() throws Exception {
        IdempotentConsumer careless = consumer((d, tx) -> {
            credit(tx.connection(), 1);
            if (d.eventId().equals("evt-2")) {
                try (Statement s = tx.connection().createStatement()) {
                    s.execute("SELECT 1/0");
                } catch (SQLException swallowed) {
                    // aborted
                }
            }
        });
        var outcomes = careless.processBatch(
                java.util.List.of(Ledger.payment("evt-1", 0), Ledger.payment("evt-2", 0), Ledger.payment("evt-3", 0)));
        assertOnlyTheAppliedApplied(outcomes, "evt-2");
    }

    @Test
    void handlerThatSwallowsAFailedStatementInAJoinedTransactionIsNotReportedApplied() throws Exception {
        ManualTransactions manual = new ManualTransactions();
        java.util.List<Outcome> reported = new java.util.concurrent.CopyOnWriteArrayList<>();
        IdempotentConsumer careless = joined(manual, reported, (d, tx) -> {
            credit(tx.connection(), 1);
            try (Statement s = tx.connection().createStatement()) {
                s.execute("SELECT 1/0");
            } catch (SQLException swallowed) {
                // aborted
            }
        });
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                Outcome o = careless.process(Ledger.payment("evt-1", 0));
                assertThat(o.status()).isNotEqualTo(Status.APPLIED);
                assertThat(tx.rollbackOnly())
                        .as("the caller learns its transaction is lost")
                        .isTrue();
                assertThatThrownBy(tx::commit).isInstanceOf(SQLException.class);
            }
            c.setAutoCommit(true);
        }
        assertThat(reported)
                .extracting(Outcome::status)
                .doesNotContain(Status.APPLIED)
                .hasSize(1);
        assertThat(balance()).isZero();
    }

    // ---- item 3: transaction control behind the engine's back ----------------------------------

    @ParameterizedTest
    @ValueSource(
            strings = {
                "COMMIT",
                "commit",
                "  COMMIT  ",
                "/* done */ COMMIT",
                "-- done\nCOMMIT",
                "Commit Work",
                "COMMIT AND CHAIN",
                "END",
                "end transaction",
                "ROLLBACK",
                "rollback and chain",
                "ABORT",
                "BEGIN",
                "START TRANSACTION",
                "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
                "PREPARE TRANSACTION 'x'",
                "UPDATE account SET balance = balance + 1 WHERE id = 1; COMMIT",
                "SELECT 1;\n/* and then */\n  commit;"
            })
    void transactionControlIssuedAsSqlIsRefused(String sql) throws Exception {
        IdempotentConsumer consumer = consumer((d, tx) -> {
            credit(tx.connection(), 1);
            if (d.attempt() == 1) {
                try (Statement s = tx.connection().createStatement()) {
                    s.execute(sql);
                } catch (HandlerMisuseException swallowed) {
                    // swallowing the refusal changes nothing
                }
            }
            credit(tx.connection(), 10);
        });
        Delivery event = Ledger.payment("evt-1", 0);
        Outcome o = consumer.process(event);
        assertThat(o.status()).isEqualTo(Status.FAILED_PERMANENT);
        assertThat(o.failure()).isInstanceOf(HandlerMisuseException.class);
        assertNothingAppliedThenRedeliveryApplies(consumer, event);
    }

    @Test
    void transactionControlIsRefusedOnEveryStatementPath() throws Exception {
        String[] paths = {
            "executeUpdate", "executeQuery", "addBatch", "prepareStatement", "prepareCall", "executeLargeUpdate"
        };
        for (String path : paths) {
            IdempotentConsumer consumer = consumer((d, tx) -> {
                credit(tx.connection(), 1);
                Connection c = tx.connection();
                switch (path) {
                    case "executeUpdate" -> c.createStatement().executeUpdate("COMMIT");
                    case "executeQuery" -> c.createStatement().executeQuery("COMMIT");
                    case "executeLargeUpdate" -> c.createStatement().executeLargeUpdate("COMMIT");
                    case "addBatch" -> {
                        Statement s = c.createStatement();
                        s.addBatch("COMMIT");
                        s.executeBatch();
                    }
                    case "prepareStatement" -> c.prepareStatement("COMMIT").execute();
                    case "prepareCall" -> c.prepareCall("COMMIT").execute();
                    default -> throw new IllegalStateException(path);
                }
            });
            Outcome o = consumer.process(Ledger.payment("evt-" + path, 0));
            assertThat(o.status()).as(path).isEqualTo(Status.FAILED_PERMANENT);
            assertThat(o.failure())
                    .as(path)
                    .isInstanceOf(HandlerMisuseException.class)
                    .hasMessageContaining("COMMIT");
            assertThat(balance()).as(path).isZero();
            assertThat(claims()).as(path).isZero();
        }
    }

    @Test
    void statementGetConnectionCommitIsRefused() throws Exception {
        IdempotentConsumer consumer = consumer((d, tx) -> {
            credit(tx.connection(), 1);
            if (d.attempt() == 1) {
                try (Statement s = tx.connection().createStatement()) {
                    s.getConnection().commit();
                }
            }
            credit(tx.connection(), 10);
        });
        Delivery event = Ledger.payment("evt-1", 0);
        assertThat(consumer.process(event).status()).isEqualTo(Status.FAILED_PERMANENT);
        assertNothingAppliedThenRedeliveryApplies(consumer, event);
    }

    @Test
    void everyRouteBackToTheConnectionLeadsToTheGuard() throws Exception {
        IdempotentConsumer consumer = consumer((d, tx) -> {
            Connection guard = tx.connection();
            try (Statement s = guard.createStatement();
                    ResultSet rs = s.executeQuery("SELECT 1")) {
                assertThat(s.getConnection()).isSameAs(guard);
                assertThat(rs.getStatement().getConnection()).isSameAs(guard);
            }
            try (PreparedStatement ps = guard.prepareStatement("SELECT 1")) {
                assertThat(ps.getConnection()).isSameAs(guard);
                try (ResultSet rs = ps.executeQuery()) {
                    assertThat(rs.getStatement().getConnection()).isSameAs(guard);
                }
            }
            try (CallableStatement cs = guard.prepareCall("SELECT 1")) {
                assertThat(cs.getConnection()).isSameAs(guard);
            }
            assertThat(guard.getMetaData().getConnection()).isSameAs(guard);
            try (ResultSet rs = guard.getMetaData().getTables(null, null, "account", null)) {
                if (rs.getStatement() != null) {
                    assertThat(rs.getStatement().getConnection()).isSameAs(guard);
                }
            }
            assertThat(guard.unwrap(Connection.class)).isSameAs(guard);
            assertThatThrownBy(() -> guard.unwrap(Class.forName("org.postgresql.jdbc.PgConnection")))
                    .isInstanceOf(SQLException.class)
                    .hasMessageContaining("raw connection");
            assertThatThrownBy(() -> guard.createStatement().unwrap(Class.forName("org.postgresql.jdbc.PgStatement")))
                    .isInstanceOf(SQLException.class);
            credit(guard, 11);
        });
        assertThat(consumer.process(Ledger.payment("evt-1", 0)).status()).isEqualTo(Status.APPLIED);
        assertThat(balance()).isEqualTo(11);
    }

    /** The result sets, metadata and callable statements the guard forwards through a Proxy (issue 24). */
    @Test
    void theForwardedObjectsLeadBackToWhatMadeThemAndHandOutNoDriverStatement() throws Exception {
        IdempotentConsumer consumer = consumer((d, tx) -> {
            Connection guard = tx.connection();
            try (CallableStatement cs = guard.prepareCall("SELECT 7")) {
                assertThat(cs.unwrap(CallableStatement.class)).isSameAs(cs);
                assertThat(cs.isWrapperFor(CallableStatement.class)).isTrue();
                assertThat(cs.equals(cs)).isTrue();
                assertThat(cs.hashCode()).isEqualTo(System.identityHashCode(cs));
                assertThatThrownBy(() -> cs.unwrap(Class.forName("org.postgresql.jdbc.PgCallableStatement")))
                        .isInstanceOf(SQLException.class)
                        .hasMessageContaining("raw connection");
                try (ResultSet rs = cs.executeQuery()) {
                    assertThat(rs.getStatement()).isSameAs(cs);
                    assertThat(rs.unwrap(ResultSet.class)).isSameAs(rs);
                    assertThat(rs.next()).isTrue();
                    assertThat(rs.getLong(1)).isEqualTo(7);
                }
                assertThat(cs.getResultSet().getStatement()).isSameAs(cs);
            }
            try (CallableStatement cs = guard.prepareCall("{? = call abs(?::bigint)}")) {
                cs.registerOutParameter(1, java.sql.Types.BIGINT);
                cs.setLong(2, -42);
                cs.execute();
                assertThat(cs.getLong(1)).isEqualTo(42);
            }
            assertThat(guard.getMetaData().unwrap(java.sql.DatabaseMetaData.class))
                    .isInstanceOf(java.sql.DatabaseMetaData.class);
            assertThat(guard.getMetaData().getDatabaseProductName()).isEqualTo("PostgreSQL");
            try (ResultSet rs = guard.getMetaData().getTables(null, null, "account", null)) {
                assertThat(rs.unwrap(ResultSet.class)).isSameAs(rs);
                Statement s = rs.getStatement();
                if (s != null) {
                    assertThatThrownBy(() -> s.unwrap(Class.forName("org.postgresql.jdbc.PgStatement")))
                            .isInstanceOf(SQLException.class);
                }
            }
            credit(guard, 12);
        });
        assertThat(consumer.process(Ledger.payment("evt-1", 0)).status()).isEqualTo(Status.APPLIED);
        assertThat(balance()).isEqualTo(12);
    }

    @Test
    void metaDataAndResultSetRoutesToCommitAreRefused() throws Exception {
        for (int route = 0; route < 2; route++) {
            int r = route;
            IdempotentConsumer consumer = consumer((d, tx) -> {
                credit(tx.connection(), 1);
                if (r == 0) {
                    tx.connection().getMetaData().getConnection().commit();
                } else {
                    try (ResultSet rs = tx.connection().createStatement().executeQuery("SELECT 1")) {
                        rs.getStatement().getConnection().commit();
                    }
                }
            });
            Outcome o = consumer.process(Ledger.payment("evt-" + route, 0));
            assertThat(o.status()).isEqualTo(Status.FAILED_PERMANENT);
            assertThat(balance()).isZero();
            assertThat(claims()).isZero();
        }
    }

    @Test
    void savepointsAndSqlThatOnlyMentionsCommitStillWork() throws Exception {
        IdempotentConsumer consumer = consumer((d, tx) -> {
            Connection c = tx.connection();
            try (Statement s = c.createStatement()) {
                s.execute("SAVEPOINT before_risky");
                try {
                    s.execute("SELECT 1/0");
                } catch (SQLException expected) {
                    s.execute("ROLLBACK TO SAVEPOINT before_risky");
                }
                s.execute("RELEASE SAVEPOINT before_risky");
                s.execute("SELECT 'COMMIT; ROLLBACK' AS text, $$END$$ AS dollar -- COMMIT");
                s.execute("/* COMMIT */ SELECT 1");
                s.execute("SELECT \"commit\" FROM (SELECT 1 AS \"commit\") t");
            }
            var sp = c.setSavepoint();
            credit(c, 100);
            c.rollback(sp);
            credit(c, 11);
        });
        assertThat(consumer.process(Ledger.payment("evt-1", 0)).status()).isEqualTo(Status.APPLIED);
        assertThat(balance()).isEqualTo(11);
    }

    @Test
    void aHandlerThatRemovesItsOwnClaimIsNotReportedApplied() throws Exception {
        IdempotentConsumer consumer = consumer((d, tx) -> {
            credit(tx.connection(), 1);
            if (d.attempt() == 1) {
                try (PreparedStatement ps =
                        tx.connection().prepareStatement("DELETE FROM once_inbox WHERE event_id = ?")) {
                    ps.setString(1, d.eventId());
                    ps.executeUpdate();
                }
            }
            credit(tx.connection(), 10);
        });
        Delivery event = Ledger.payment("evt-1", 0);
        Outcome o = consumer.process(event);
        assertThat(o.status())
                .as("committing would apply it with no claim: a redelivery applies it again")
                .isEqualTo(Status.FAILED_PERMANENT);
        assertThat(o.failure()).isInstanceOf(HandlerMisuseException.class).hasMessageContaining("claim");
        assertNothingAppliedThenRedeliveryApplies(consumer, event);
    }

    /** A handler that deletes its event's claim, on the first attempt only: "evt-2" in these batches. */
    private static final Handler DELETES_EVT_2_CLAIM = (d, tx) -> {
        credit(tx.connection(), 1);
        if (d.eventId().equals("evt-2") && d.attempt() == 1) {
            try (PreparedStatement ps = tx.connection().prepareStatement("DELETE FROM once_inbox WHERE event_id = ?")) {
                ps.setString(1, d.eventId());
                ps.executeUpdate();
            }
        }
    };

    @Test
    void aBatchWhoseHandlerRemovesTheClaimOfALaterEventIsNotReportedAppliedForIt() throws Exception {
        IdempotentConsumer consumer = consumer(DELETES_EVT_2_CLAIM);
        Delivery second = Ledger.payment("evt-2", 0);
        var outcomes = consumer.processBatch(
                java.util.List.of(Ledger.payment("evt-1", 0), second, Ledger.payment("evt-3", 0)));

        // The check must cover every claim of the batch, not only its first.
        assertOnlyTheAppliedApplied(outcomes, "evt-2");
        long applied =
                outcomes.stream().filter(x -> x.status() == Status.APPLIED).count();
        assertThat(consumer.process(second.redelivery()).status()).isEqualTo(Status.APPLIED);
        assertThat(consumer.process(second.redelivery()).status()).isEqualTo(Status.DUPLICATE);
        assertThat(balance()).as("evt-2 applied exactly once").isEqualTo(applied + 1);
    }

    @Test
    void aJoinedBatchWhoseHandlerRemovesTheClaimOfALaterEventDoesNotCommit() throws Exception {
        ManualTransactions manual = new ManualTransactions();
        java.util.List<Outcome> reported = new java.util.concurrent.CopyOnWriteArrayList<>();
        IdempotentConsumer consumer = joined(manual, reported, DELETES_EVT_2_CLAIM);
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                consumer.processBatch(java.util.List.of(Ledger.payment("evt-1", 0), Ledger.payment("evt-2", 0)));
                if (!tx.rollbackOnly()) {
                    tx.commit();
                }
            }
            c.setAutoCommit(true);
        }
        assertOnlyTheAppliedApplied(reported, "evt-2");
    }
}
