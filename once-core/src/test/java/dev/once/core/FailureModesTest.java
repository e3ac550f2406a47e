package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.HandlerMisuseException;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryableException;
import dev.once.StaleFencingTokenException;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** What happens when things go wrong inside the claim transaction: nothing is half-applied. */
class FailureModesTest {

    private TestDatabase db;

    @BeforeEach
    void setUp() throws SQLException {
        db = Ledger.on(TestPostgres.shared().freshDatabase(8));
        db.execute(
                "CREATE TABLE orders (id bigint PRIMARY KEY, status text NOT NULL)",
                "INSERT INTO orders VALUES (42, 'packed')");
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    private long balance() throws SQLException {
        return Ledger.balance(db);
    }

    private long inboxRows() {
        return db.queryLong("SELECT count(*) FROM once_inbox");
    }

    @Test
    void aConcurrentDuplicateStillRunningIsReportedInProgressAfterTheLockTimeoutAndAbsorbedLater() throws Exception {
        CountDownLatch claimed = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("slow")
                .lockTimeout(Duration.ofMillis(200))
                .handler((d, tx) -> {
                    Ledger.CREDIT.handle(d, tx);
                    if (d.attempt() == 1) {
                        claimed.countDown();
                        release.await(30, TimeUnit.SECONDS);
                    }
                })
                .build();
        Delivery event = Ledger.payment("evt-1", 20);
        CompletableFuture<Outcome> first =
                CompletableFuture.supplyAsync(() -> consumer.process(event), OwnThreads.each());
        assertThat(claimed.await(30, TimeUnit.SECONDS)).isTrue();
        Outcome second = consumer.process(event.redelivery());
        assertThat(second.status())
                .as("a duplicate arriving while the first holds the claim")
                .isEqualTo(Status.IN_PROGRESS);
        assertThat(second.retryable()).isTrue();
        assertThat(second.shouldAcknowledge()).isFalse();
        release.countDown();
        assertThat(first.get(30, TimeUnit.SECONDS).status()).isEqualTo(Status.APPLIED);
        assertThat(consumer.process(event.redelivery().redelivery()).status()).isEqualTo(Status.DUPLICATE);
        assertThat(balance()).isEqualTo(20);
    }

    @Test
    void aHandlerThatCommitsItselfIsRefusedAndNothingIsApplied() throws Exception {
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("rogue")
                .handler((d, tx) -> {
                    Ledger.CREDIT.handle(d, tx);
                    tx.connection().commit();
                })
                .build();
        Outcome o = consumer.process(Ledger.payment("evt-1", 20));
        assertThat(o.status()).isEqualTo(Status.FAILED_PERMANENT);
        assertThat(o.failure()).isInstanceOf(HandlerMisuseException.class).hasMessageContaining("commit");
        assertThat(balance())
                .as("the credit before the refused commit is rolled back")
                .isZero();
        assertThat(inboxRows()).as("the event is not claimed").isZero();
    }

    @Test
    void aHandlerThatClosesTheConnectionAndSwallowsTheRefusalIsStillRolledBack() throws Exception {
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("rogue")
                .handler((d, tx) -> {
                    Ledger.CREDIT.handle(d, tx);
                    try {
                        tx.connection().close();
                    } catch (HandlerMisuseException swallowed) {
                        // a careless handler
                    }
                })
                .build();
        Outcome o = consumer.process(Ledger.payment("evt-1", 20));
        assertThat(o.status()).isEqualTo(Status.FAILED_PERMANENT);
        assertThat(o.failure()).isInstanceOf(HandlerMisuseException.class).hasMessageContaining("close");
        assertThat(balance()).isZero();
        assertThat(inboxRows()).isZero();
    }

    @Test
    void regressionAnErrorThrownByTheHandlerDoesNotCommitTheClaimWhenAutoCommitIsRestored() throws Exception {
        // Found by the benchmark's fault injection: an Error escaped the handler, and restoring
        // auto-commit on the way out committed the claim together with the half-done effect.
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("crashing")
                .handler((d, tx) -> {
                    Ledger.CREDIT.handle(d, tx);
                    throw new OutOfMemoryError("simulated");
                })
                .build();
        assertThatThrownBy(() -> consumer.process(Ledger.payment("evt-1", 20))).isInstanceOf(OutOfMemoryError.class);
        assertThatThrownBy(
                        () -> consumer.processBatch(List.of(Ledger.payment("evt-2", 20), Ledger.payment("evt-3", 20))))
                .isInstanceOf(OutOfMemoryError.class);
        assertThat(balance()).as("nothing of the failed handlers committed").isZero();
        assertThat(inboxRows()).as("no event claimed").isZero();
    }

    @Test
    void aFailingHandlerLeavesTheEventUnclaimedSoTheRedeliveryApplies() throws Exception {
        AtomicBoolean fail = new AtomicBoolean(true);
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("flaky")
                .handler((d, tx) -> {
                    Ledger.CREDIT.handle(d, tx);
                    if (fail.getAndSet(false)) {
                        throw new IllegalStateException("downstream unavailable");
                    }
                })
                .build();
        Outcome first = consumer.process(Ledger.payment("evt-1", 20));
        assertThat(first.status()).isEqualTo(Status.FAILED_RETRYABLE);
        assertThat(balance()).isZero();
        assertThat(consumer.process(Ledger.payment("evt-1", 20).redelivery()).status())
                .isEqualTo(Status.APPLIED);
        assertThat(balance()).isEqualTo(20);
    }

    @Test
    void aConnectionKilledMidBatchRollsTheBatchBackAndEveryEventAppliesOnceAfterwards() throws Exception {
        AtomicBoolean killed = new AtomicBoolean();
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("killed")
                .handler((d, tx) -> {
                    if (d.eventId().equals("evt-50") && killed.compareAndSet(false, true)) {
                        terminate(tx.connection());
                    }
                    Ledger.CREDIT.handle(d, tx);
                })
                .build();
        List<Delivery> batch = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            batch.add(Ledger.payment("evt-" + i, 1));
        }
        List<Outcome> outcomes = consumer.processBatch(batch);
        assertThat(killed).isTrue();
        assertThat(outcomes).extracting(Outcome::status).containsOnly(Status.APPLIED);
        assertThat(balance()).as("no event applied twice, none lost").isEqualTo(100);
        assertThat(inboxRows()).isEqualTo(100);
    }

    @Test
    void aConnectionKilledBeforeCommitReportsRetryableAndAppliesNothing() throws Exception {
        AtomicBoolean killed = new AtomicBoolean();
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("killed")
                .handler((d, tx) -> {
                    Ledger.CREDIT.handle(d, tx);
                    if (killed.compareAndSet(false, true)) {
                        terminate(tx.connection());
                        Ledger.CREDIT.handle(d, tx);
                    }
                })
                .build();
        Outcome o = consumer.process(Ledger.payment("evt-1", 20));
        assertThat(o.status()).isEqualTo(Status.FAILED_RETRYABLE);
        assertThat(balance()).isZero();
        assertThat(consumer.process(Ledger.payment("evt-1", 20).redelivery()).status())
                .isEqualTo(Status.APPLIED);
        assertThat(balance()).isEqualTo(20);
    }

    /** Ends the backend behind {@code c} from a separate session, as a failover or a network cut would. */
    private static void terminate(Connection c) throws SQLException {
        int pid;
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT pg_backend_pid()")) {
            rs.next();
            pid = rs.getInt(1);
        }
        try (Connection admin =
                        DriverManager.getConnection(TestPostgres.shared().jdbcUrl());
                PreparedStatement ps = admin.prepareStatement("SELECT pg_terminate_backend(?)")) {
            ps.setInt(1, pid);
            ps.executeQuery().close();
        }
    }

    @Test
    void aGuardedTransitionTellsWhetherThisDeliveryMovedTheRow() throws Exception {
        List<Boolean> moved = new ArrayList<>();
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("shipping")
                .handler((d, tx) -> moved.add(tx.transition("orders", 42L, "packed", "shipped")))
                .build();
        consumer.process(Delivery.of("ship-42", ""));
        consumer.process(Delivery.of("ship-42-again-with-another-id", ""));
        assertThat(moved).containsExactly(true, false);
        assertThat(db.queryLong("SELECT count(*) FROM orders WHERE status = 'shipped'"))
                .isEqualTo(1);
    }

    @Test
    void aWriteWithAStaleFencingTokenIsRejectedInTheSameTransaction() throws Exception {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("fenced")
                .meterRegistry(registry)
                .handler((d, tx) -> {
                    tx.fence("account-1", Long.parseLong(d.headers().get("token")));
                    Ledger.CREDIT.handle(d, tx);
                })
                .build();
        Delivery newer = Delivery.builder("evt-new")
                .payload("10")
                .headers(java.util.Map.of("token", "42"))
                .build();
        Delivery stale = Delivery.builder("evt-old")
                .payload("10")
                .headers(java.util.Map.of("token", "41"))
                .build();
        Delivery same = Delivery.builder("evt-same")
                .payload("10")
                .headers(java.util.Map.of("token", "42"))
                .build();
        assertThat(consumer.process(newer).status()).isEqualTo(Status.APPLIED);
        Outcome rejected = consumer.process(stale);
        assertThat(rejected.failure())
                .isInstanceOf(StaleFencingTokenException.class)
                .hasMessageContaining("41")
                .hasMessageContaining("42");
        assertThat(rejected.shouldAcknowledge()).isFalse();
        assertThat(consumer.process(same).status())
                .as("the current holder may write again")
                .isEqualTo(Status.APPLIED);
        assertThat(balance()).isEqualTo(20);
        assertThat(registry.get("once.fence.rejections").counter().count()).isEqualTo(1.0);
    }

    @Test
    void metricsCountRedeliveriesAndDuplicatesApart() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("metered")
                .meterRegistry(registry)
                .handler(Ledger.CREDIT)
                .build();
        Delivery event = Ledger.payment("evt-1", 1);
        consumer.process(event); // first delivery: applied
        consumer.process(event); // double publish: a first delivery, a duplicate
        consumer.process(event.redelivery()); // broker redelivery: also a duplicate
        consumer.process(Ledger.payment("evt-2", 1).redelivery()); // a redelivery whose first copy never arrived
        assertThat(registry.get("once.redeliveries").counter().count()).isEqualTo(2.0);
        assertThat(registry.get("once.duplicates").counter().count()).isEqualTo(2.0);
        assertThat(registry.get("once.deliveries")
                        .tag("outcome", "applied")
                        .counter()
                        .count())
                .isEqualTo(2.0);
        assertThat(registry.get("once.deliveries")
                        .tag("outcome", "duplicate")
                        .counter()
                        .count())
                .isEqualTo(2.0);
        assertThat(registry.get("once.handler.duration").timer().count()).isEqualTo(2);
    }

    @Test
    void aFailedCommitIsRetryableNotLost() {
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("deferred")
                .handler((d, tx) -> {
                    try (Statement s = tx.connection().createStatement()) {
                        // A deferred constraint fails only at commit: the outcome must not be APPLIED.
                        s.execute("CREATE TEMP TABLE IF NOT EXISTS t (id int UNIQUE DEFERRABLE INITIALLY DEFERRED)");
                        s.execute("INSERT INTO t VALUES (1), (1)");
                    }
                })
                .build();
        Outcome o = consumer.process(Delivery.of("evt-1", ""));
        assertThat(o.status()).isEqualTo(Status.FAILED_RETRYABLE);
        assertThat(o.failure()).isInstanceOf(RetryableException.class);
        assertThat(inboxRows()).isZero();
    }
}
