package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import dev.once.tx.TransactionProvider;
import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Logger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The engine joining a transaction the caller manages by hand: the caller's commit decides. */
class JoinedTransactionTest {

    private TestDatabase db;
    private final ManualTransactions manual = new ManualTransactions();
    private final List<Outcome> reported = new CopyOnWriteArrayList<>();
    private IdempotentConsumer billing;

    @BeforeEach
    void setUp() {
        db = Ledger.on(TestPostgres.shared().freshDatabase(4));
        db.execute("CREATE TABLE audit (note text NOT NULL)");
        billing = IdempotentConsumer.builder()
                .transactions(manual)
                .dialect(Dialects.POSTGRESQL)
                .consumer("billing")
                .handler(Ledger.CREDIT)
                .outcomeListener((d, o) -> reported.add(o))
                .build();
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    private void audit(Connection c, String note) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute("INSERT INTO audit VALUES ('" + note + "')");
        }
    }

    @Test
    void joinedTransactionCommittedByTheCallerAppliesOnceWithTheCallersOwnWrites() throws Exception {
        Delivery event = Ledger.payment("evt-1", 20);
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                audit(c, "caller write");
                Outcome provisional = billing.process(event);
                assertThat(provisional.status()).isEqualTo(Status.APPLIED);
                assertThat(reported)
                        .as("nothing is final before the caller commits")
                        .isEmpty();
                assertThat(Ledger.balance(db))
                        .as("the engine committed nothing of the caller's transaction")
                        .isZero();
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(reported).extracting(Outcome::status).containsExactly(Status.APPLIED);
        assertThat(Ledger.balance(db)).as("effect applied exactly once").isEqualTo(20);
        assertThat(db.queryLong("SELECT count(*) FROM audit"))
                .as("the caller's write committed with it")
                .isEqualTo(1);

        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                assertThat(billing.process(event.redelivery()).status()).isEqualTo(Status.DUPLICATE);
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(Ledger.balance(db)).as("effect applied exactly once").isEqualTo(20);
        assertThat(reported).extracting(Outcome::status).containsExactly(Status.APPLIED, Status.DUPLICATE);
    }

    @Test
    void joinedTransactionRolledBackByTheCallerLeavesNothingAndTheRedeliveryApplies() throws Exception {
        Delivery event = Ledger.payment("evt-1", 20);
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                audit(c, "caller write");
                assertThat(billing.process(event).status()).as("provisional").isEqualTo(Status.APPLIED);
                tx.rollback();
            }
            c.setAutoCommit(true);
        }
        assertThat(reported)
                .extracting(Outcome::status)
                .as("an APPLIED whose caller rolled back is not applied")
                .containsExactly(Status.FAILED_RETRYABLE);
        assertThat(Ledger.balance(db)).isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox"))
                .as("the claim rolled back too")
                .isZero();

        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                assertThat(billing.process(event.redelivery()).status()).isEqualTo(Status.APPLIED);
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(Ledger.balance(db)).as("the redelivery applies, once").isEqualTo(20);
        assertThat(reported).extracting(Outcome::status).containsExactly(Status.FAILED_RETRYABLE, Status.APPLIED);
    }

    @Test
    void aFailingHandlerMarksTheCallersTransactionRollbackOnly() throws Exception {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                audit(c, "caller write");
                assertThat(billing.process(Ledger.payment("evt-1", 5)).status()).isEqualTo(Status.APPLIED);
                Outcome poison = billing.process(Delivery.of("evt-2", "poison"));
                assertThat(poison.status()).isEqualTo(Status.FAILED_PERMANENT);
                assertThat(tx.rollbackOnly()).isTrue();
                assertThatThrownBy(tx::commit).isInstanceOf(SQLException.class).hasMessageContaining("rollback-only");
            }
            c.setAutoCommit(true);
        }
        assertThat(Ledger.balance(db))
                .as("nothing of the transaction committed")
                .isZero();
        assertThat(db.queryLong("SELECT count(*) FROM audit")).isZero();
        assertThat(reported)
                .extracting(Outcome::status)
                .containsExactly(Status.FAILED_RETRYABLE, Status.FAILED_PERMANENT);
    }

    @Test
    void aJoinedBatchIsReportedAfterTheCallersCommit() throws Exception {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                List<Outcome> provisional = billing.processBatch(
                        List.of(Ledger.payment("a", 1), Ledger.payment("b", 2), Ledger.payment("a", 1)));
                assertThat(provisional)
                        .extracting(Outcome::status)
                        .containsExactly(Status.APPLIED, Status.APPLIED, Status.DUPLICATE);
                assertThat(reported).isEmpty();
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(Ledger.balance(db)).isEqualTo(3);
        assertThat(reported)
                .extracting(Outcome::status)
                .containsExactly(Status.APPLIED, Status.APPLIED, Status.DUPLICATE);
    }

    @Test
    void processingWithoutAJoinedTransactionFailsRetryablyAndTouchesNothing() {
        Outcome o = billing.process(Ledger.payment("evt-1", 20));
        assertThat(o.status()).isEqualTo(Status.FAILED_RETRYABLE);
        assertThat(o.failure()).hasMessageContaining("ManualTransactions.join");
        assertThat(reported).extracting(Outcome::status).containsExactly(Status.FAILED_RETRYABLE);
    }

    @Test
    void anOwnedTransactionRefusesAConnectionThatArrivesWithAutoCommitOff() throws Exception {
        DataSource autoCommitOff = new AutoCommitOff(db.dataSource());
        assertThatThrownBy(() -> IdempotentConsumer.builder()
                        .dataSource(autoCommitOff)
                        .consumer("billing")
                        .handler(Ledger.CREDIT)
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("auto-commit off")
                .hasMessageContaining("transactions(...)");
        // Built with an explicit dialect, the refusal happens per transaction: nothing is committed.
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .transactions(TransactionProvider.owning(autoCommitOff))
                .dialect(Dialects.POSTGRESQL)
                .consumer("billing")
                .handler(Ledger.CREDIT)
                .build();
        Outcome o = consumer.process(Ledger.payment("evt-1", 20));
        assertThat(o.status()).isEqualTo(Status.FAILED_RETRYABLE);
        assertThat(o.failure()).hasMessageContaining("auto-commit off");
        assertThat(Ledger.balance(db)).isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isZero();
    }

    /** What a transaction-aware proxy looks like to the engine: connections already in a transaction. */
    private record AutoCommitOff(DataSource delegate) implements DataSource {
        @Override
        public Connection getConnection() throws SQLException {
            Connection c = delegate.getConnection();
            c.setAutoCommit(false);
            return c;
        }

        @Override
        public Connection getConnection(String user, String password) throws SQLException {
            return getConnection();
        }

        @Override
        public PrintWriter getLogWriter() throws SQLException {
            return delegate.getLogWriter();
        }

        @Override
        public void setLogWriter(PrintWriter out) throws SQLException {
            delegate.setLogWriter(out);
        }

        @Override
        public void setLoginTimeout(int seconds) throws SQLException {
            delegate.setLoginTimeout(seconds);
        }

        @Override
        public int getLoginTimeout() throws SQLException {
            return delegate.getLoginTimeout();
        }

        @Override
        public Logger getParentLogger() {
            return Logger.getGlobal();
        }

        @Override
        public <T> T unwrap(Class<T> iface) throws SQLException {
            return delegate.unwrap(iface);
        }

        @Override
        public boolean isWrapperFor(Class<?> iface) throws SQLException {
            return delegate.isWrapperFor(iface);
        }
    }
}
