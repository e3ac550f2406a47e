package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.IdempotentConsumerBuilder;
import dev.once.InvalidConfigurationException;
import dev.once.MismatchPolicy;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link ClaimTiming#AT_COMMIT} through the public API, the ways a user gets it wrong: a copy whose
 * handler runs and must roll back, a handler that fails because the work exists, one that swallows a
 * failed statement, a deferred constraint that answers the COMMIT with the inbox's own SQLState,
 * copies at the same time; on PostgreSQL (claim folded into the COMMIT) and MariaDB (not folded).
 */
class ClaimAtCommitTest {

    private TestDatabase db;

    @AfterEach
    void tearDown() {
        if (db != null) {
            db.close();
        }
    }

    private TestDatabase open(String database) {
        db = Ledger.on(
                database.equals("postgres")
                        ? TestPostgres.shared().freshDatabase(10)
                        : TestMariaDb.shared().freshDatabase(10));
        db.execute("CREATE TABLE orders (id varchar(100) PRIMARY KEY)");
        return db;
    }

    private IdempotentConsumer atCommit(DataSource ds, Handler handler) {
        return IdempotentConsumer.builder()
                .dataSource(ds)
                .consumer("billing")
                .claimTiming(ClaimTiming.AT_COMMIT)
                .handler(handler)
                .build();
    }

    private long balance() throws SQLException {
        return Ledger.balance(db);
    }

    private long claims() {
        return db.queryLong("SELECT count(*) FROM once_inbox");
    }

    private long outboxRows() {
        return db.queryLong("SELECT count(*) FROM once_outbox");
    }

    private static void credit(Connection c, long amount) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("UPDATE account SET balance = balance + ? WHERE id = 1")) {
            ps.setLong(1, amount);
            ps.executeUpdate();
        }
    }

    /** The handler a user writes: the effect, an order row keyed by the event, an outbox row. */
    private static final Handler ORDER = (d, tx) -> {
        credit(tx.connection(), Long.parseLong(d.payloadText()));
        tx.outbox().add("receipts", null, d.payloadText().getBytes(StandardCharsets.UTF_8), Map.of(), null);
    };

    @ParameterizedTest
    @ValueSource(strings = {"postgres", "mariadb"})
    void aCopyRunsItsHandlerAndRollsBackEverythingItWroteAsADuplicate(String database) throws SQLException {
        open(database);
        AtomicInteger calls = new AtomicInteger();
        IdempotentConsumer billing = atCommit(db.dataSource(), (d, tx) -> {
            calls.incrementAndGet();
            ORDER.handle(d, tx);
        });

        assertThat(billing.process(Ledger.payment("e-1", 5)).status()).isEqualTo(Status.APPLIED);
        assertThat(billing.process(Ledger.payment("e-1", 5)).status()).isEqualTo(Status.DUPLICATE);
        assertThat(billing.process(Ledger.payment("e-1", 5)).status()).isEqualTo(Status.DUPLICATE);

        assertThat(calls).as("a copy's handler runs: the claim comes after it").hasValue(3);
        assertThat(balance()).isEqualTo(5);
        assertThat(outboxRows())
                .as("the copies' outbox rows rolled back with them")
                .isEqualTo(1);
        assertThat(claims()).isEqualTo(1);
    }

    @ParameterizedTest
    @ValueSource(strings = {"postgres", "mariadb"})
    void aHandlerThatFailsBecauseTheWorkExistsIsADuplicateNotAFailure(String database) throws SQLException {
        open(database);
        IdempotentConsumer orders = atCommit(db.dataSource(), (d, tx) -> {
            try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO orders (id) VALUES (?)")) {
                ps.setString(1, d.eventId());
                ps.executeUpdate(); // a copy fails here: the order exists
            }
            credit(tx.connection(), 1);
        });

        assertThat(orders.process(Ledger.payment("o-1", 1)).status()).isEqualTo(Status.APPLIED);
        Outcome copy = orders.process(Ledger.payment("o-1", 1));

        assertThat(copy.status()).isEqualTo(Status.DUPLICATE);
        assertThat(copy.shouldAcknowledge()).isTrue();
        assertThat(balance()).isEqualTo(1);
    }

    @ParameterizedTest
    @ValueSource(strings = {"postgres", "mariadb"})
    void aFailingHandlerLeavesNothingAndItsRedeliveryApplies(String database) throws SQLException {
        open(database);
        AtomicInteger calls = new AtomicInteger();
        IdempotentConsumer flaky = atCommit(db.dataSource(), (d, tx) -> {
            credit(tx.connection(), 7);
            if (calls.incrementAndGet() == 1) {
                throw new IllegalStateException("downstream not ready");
            }
        });

        Outcome first = flaky.process(Ledger.payment("f-1", 7));
        assertThat(first.status()).isEqualTo(Status.FAILED_RETRYABLE);
        assertThat(first.failure()).hasMessage("downstream not ready");
        assertThat(balance()).isZero();
        assertThat(claims()).isZero();

        assertThat(flaky.process(Ledger.payment("f-1", 7)).status()).isEqualTo(Status.APPLIED);
        assertThat(balance()).isEqualTo(7);
    }

    @Test
    void aSwallowedFailedStatementIsNeverReportedApplied() throws SQLException {
        open("postgres");
        IdempotentConsumer swallowing = atCommit(db.dataSource(), (d, tx) -> {
            credit(tx.connection(), 3);
            try (Statement s = tx.connection().createStatement()) {
                s.execute("SELECT 1 / 0");
            } catch (SQLException ignored) {
                // the user's bug: the transaction is aborted and the handler goes on
            }
        });

        Outcome outcome = swallowing.process(Ledger.payment("s-1", 3));

        assertThat(outcome.status()).isEqualTo(Status.FAILED_RETRYABLE);
        assertThat(outcome.failure()).hasMessageContaining("caught the SQLException");
        assertThat(balance()).isZero();
        assertThat(claims()).isZero();
    }

    /**
     * The inbox's key and a deferred unique constraint of the handler's own table both answer with
     * SQLState 23505, the second at the COMMIT the claim carries: only the inbox read tells them apart.
     */
    @Test
    void aDeferredUniqueViolationAtTheCommitIsAFailureNotADuplicate() throws SQLException {
        open("postgres");
        db.execute(
                "CREATE TABLE ticket (code text UNIQUE DEFERRABLE INITIALLY DEFERRED)",
                "INSERT INTO ticket VALUES ('seat-1')");
        IdempotentConsumer tickets = atCommit(db.dataSource(), (d, tx) -> {
            credit(tx.connection(), 1);
            try (Statement s = tx.connection().createStatement()) {
                s.execute("INSERT INTO ticket VALUES ('seat-1')"); // refused only at COMMIT
            }
        });

        Outcome outcome = tickets.process(Ledger.payment("t-1", 1));

        assertThat(outcome.status()).isEqualTo(Status.FAILED_RETRYABLE);
        assertThat(outcome.failure()).hasMessageContaining("23505");
        assertThat(balance()).isZero();
        assertThat(claims()).isZero();
    }

    @ParameterizedTest
    @ValueSource(strings = {"postgres", "mariadb"})
    void copiesAtTheSameTimeApplyOnce(String database) throws Exception {
        open(database);
        int copies = 6;
        CyclicBarrier together = new CyclicBarrier(copies);
        IdempotentConsumer billing = atCommit(db.dataSource(), (d, tx) -> {
            credit(tx.connection(), 1);
            tx.outbox().add("receipts", null, new byte[] {1}, Map.of(), null);
        });
        ExecutorService pool = Executors.newFixedThreadPool(copies);
        try {
            for (int event = 0; event < 10; event++) {
                Delivery d = Ledger.payment("c-" + event, 1);
                List<Future<Outcome>> outcomes = new ArrayList<>();
                for (int i = 0; i < copies; i++) {
                    outcomes.add(pool.submit(() -> {
                        together.await(10, TimeUnit.SECONDS);
                        return billing.process(d);
                    }));
                }
                List<Status> statuses = new ArrayList<>();
                for (Future<Outcome> f : outcomes) {
                    statuses.add(f.get(30, TimeUnit.SECONDS).status());
                }
                assertThat(statuses)
                        .as("event %s", d.eventId())
                        .containsOnlyOnce(Status.APPLIED)
                        .containsOnly(Status.APPLIED, Status.DUPLICATE);
            }
        } finally {
            pool.shutdownNow();
        }
        assertThat(balance()).isEqualTo(10);
        assertThat(outboxRows()).isEqualTo(10);
        assertThat(claims()).isEqualTo(10);
    }

    /** The backend ended under the handler (a failover, a network cut): the claim's statement never reaches it. */
    @Test
    void aConnectionKilledUnderTheHandlerAppliesNothingAndTheRedeliveryApplies() throws SQLException {
        open("postgres");
        AtomicInteger calls = new AtomicInteger();
        IdempotentConsumer billing = atCommit(db.dataSource(), (d, tx) -> {
            credit(tx.connection(), 4);
            if (calls.incrementAndGet() == 1) {
                int pid;
                try (Statement s = tx.connection().createStatement();
                        java.sql.ResultSet rs = s.executeQuery("SELECT pg_backend_pid()")) {
                    rs.next();
                    pid = rs.getInt(1);
                }
                try (Connection admin = db.dataSource().getConnection();
                        PreparedStatement ps = admin.prepareStatement("SELECT pg_terminate_backend(?)")) {
                    ps.setInt(1, pid);
                    ps.executeQuery().close();
                }
            }
        });

        assertThat(billing.process(Ledger.payment("k-1", 4)).status()).isEqualTo(Status.FAILED_RETRYABLE);
        assertThat(balance()).isZero();
        assertThat(claims()).isZero();
        assertThat(billing.process(Ledger.payment("k-1", 4).redelivery()).status())
                .isEqualTo(Status.APPLIED);
        assertThat(balance()).isEqualTo(4);
    }

    /** What a delivery sends: the handler's statement, then the claim with the COMMIT in one string. */
    @Test
    void onPostgresTheClaimRidesInTheCommitsStatement() throws SQLException {
        open("postgres");
        CountingDataSource counting = new CountingDataSource(db.dataSource());
        IdempotentConsumer billing = atCommit(counting.dataSource(), (d, tx) -> credit(tx.connection(), 1));
        counting.reset();

        assertThat(billing.process(Ledger.payment("r-1", 1)).status()).isEqualTo(Status.APPLIED);

        assertThat(counting.prepared()).hasSize(2);
        assertThat(counting.prepared().get(0)).startsWith("UPDATE account");
        assertThat(counting.prepared().get(1))
                .startsWith("INSERT INTO \"once_inbox\"")
                .endsWith("; COMMIT");
        assertThat(balance()).isEqualTo(1);
    }

    @Test
    void aBatchStillClaimsFirstAndAppliesOnce() throws SQLException {
        open("postgres");
        AtomicInteger calls = new AtomicInteger();
        IdempotentConsumer billing = atCommit(db.dataSource(), (d, tx) -> {
            calls.incrementAndGet();
            credit(tx.connection(), 1);
        });
        assertThat(billing.process(Ledger.payment("b-1", 1)).status()).isEqualTo(Status.APPLIED);

        List<Outcome> batch = billing.processBatch(
                List.of(Ledger.payment("b-1", 1), Ledger.payment("b-2", 1), Ledger.payment("b-2", 1)));

        assertThat(batch)
                .extracting(Outcome::status)
                .containsExactly(Status.DUPLICATE, Status.APPLIED, Status.DUPLICATE);
        assertThat(calls)
                .as("the batch's claim found b-1 taken before its handler")
                .hasValue(2);
        assertThat(balance()).isEqualTo(2);
    }

    private IdempotentConsumerBuilder owned() {
        return IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("billing")
                .claimTiming(ClaimTiming.AT_COMMIT)
                .handler(Ledger.CREDIT);
    }

    @Test
    void settingsItCannotKeepAreRefusedAtBuildNamingTheSetting() {
        open("postgres");
        IdempotentConsumerBuilder base = IdempotentConsumer.builder()
                .consumer("billing")
                .claimTiming(ClaimTiming.AT_COMMIT)
                .handler(Ledger.CREDIT);

        assertThatThrownBy(() -> base.transactions(new ManualTransactions())
                        .dialect(Dialects.POSTGRESQL)
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("claimTiming(AT_COMMIT)")
                .hasMessageContaining("joined");
        assertThatThrownBy(() -> owned().lockTimeout(Duration.ofSeconds(2)).build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("lockTimeout(PT2S)");
        assertThatThrownBy(() -> owned().onMismatch(MismatchPolicy.COUNT).build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("onMismatch(COUNT)");
        assertThatThrownBy(() -> IdempotentConsumer.builder().claimTiming(null))
                .isInstanceOf(NullPointerException.class)
                .hasMessageContaining("claimTiming");
    }
}
