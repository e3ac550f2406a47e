package dev.once.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.IdempotentConsumerBuilder;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The contract every handler must meet, run against real PostgreSQL: whatever the broker does,
 * the end state after any number of deliveries of one event equals the state after one.
 *
 * <p>Extend it with your handler, an event and a probe of the state the handler changes:
 *
 * <pre>{@code
 * class BillingHandlerTest extends IdempotentHandlerContract {
 *     protected void createTables(Connection c) throws SQLException { ... }
 *     protected Handler handler() { return new BillingHandler(); }
 *     protected Delivery event(String id) { return Delivery.of(id, "{\"account\":1,\"amount\":20}"); }
 *     protected Object state(Connection c) throws SQLException { ... balance, rows, outbox count ... }
 * }
 * }</pre>
 *
 * <p>A handler wired by Spring (a {@code @Transactional} service writing with {@code JdbcTemplate} or
 * a JPA repository) is tested the same way by overriding {@link #consumer(DataSource)} instead of
 * {@link #handler()}; see docs/spring.md.
 *
 * <p>Four cases: one delivery (it must change the state, or the contract would prove nothing),
 * a sequential duplicate, a crash in the ack gap (commit, lose the ack, redeliver), and N
 * concurrent deliveries released together by a barrier. Each runs on a fresh schema. The case
 * methods are final: the contract is the same for everybody.
 */
public abstract class IdempotentHandlerContract {

    /** For a subclass: one per handler under test. */
    protected IdempotentHandlerContract() {}

    private TestDatabase database;

    /** Creates the business tables the handler writes, in the test's fresh schema. */
    protected abstract void createTables(Connection connection) throws SQLException;

    /**
     * The handler under test, run by the default {@link #consumer(DataSource)}. A subclass that
     * overrides that method instead need not implement this one.
     */
    protected Handler handler() {
        throw new UnsupportedOperationException(
                "override handler(), or consumer(DataSource) to test a consumer" + " built elsewhere");
    }

    /** A representative event with the given id. */
    protected abstract Delivery event(String eventId);

    /**
     * Everything the handler's effect can change (balances, row counts, outbox rows), as a value
     * with a meaningful {@code equals}: a record, a list, a string.
     */
    protected abstract Object state(Connection connection) throws SQLException;

    /** Deliveries racing in {@link #concurrentDuplicateAppliesOnce()}; default 8. */
    protected int concurrency() {
        return 8;
    }

    /** Adjusts the consumer under test (lock timeout, metrics, …); the data source and handler are set already. */
    protected IdempotentConsumerBuilder configure(IdempotentConsumerBuilder builder) {
        return builder;
    }

    /**
     * A fresh database for one case, with the once tables; default a new schema on
     * {@link TestPostgres#shared()}. Override to run the contract on another database
     * ({@code TestMariaDb.shared().freshDatabase(poolSize)}).
     */
    protected TestDatabase newDatabase(int poolSize) {
        return TestPostgres.shared().freshDatabase(poolSize);
    }

    @BeforeEach
    final void freshDatabase() throws SQLException {
        database = newDatabase(concurrency() + 2);
        try (Connection c = database.dataSource().getConnection()) {
            createTables(c);
        }
    }

    @AfterEach
    final void dropDatabase() {
        if (database != null) {
            database.close();
        }
    }

    /** The data source of the current case. */
    protected final DataSource dataSource() {
        return database.dataSource();
    }

    /**
     * The consumer under test on {@code dataSource}, named {@code contract}: by default
     * {@link #handler()} on its own transactions, adjusted by {@link #configure}. Override it to test
     * a consumer wired elsewhere, such as a Spring handler that joins the Spring-managed transaction
     * ({@code OnceSpring.transactionalConsumer} in once-spring). It is called for the case's
     * database and for the side database the reference state is computed on; each {@code process}
     * call must run in, and commit, a transaction of its own.
     */
    protected IdempotentConsumer consumer(DataSource dataSource) {
        return configure(IdempotentConsumer.builder()
                        .dataSource(dataSource)
                        .consumer("contract")
                        .handler(handler()))
                .build();
    }

    private IdempotentConsumer consumer() {
        return consumer(dataSource());
    }

    private Object state() throws SQLException {
        try (Connection c = dataSource().getConnection()) {
            return state(c);
        }
    }

    @Test
    final void firstDeliveryChangesState() throws Exception {
        Object before = state();
        Outcome outcome = consumer().process(event("evt-1"));
        assertThat(outcome.status())
                .as("first delivery outcome (%s)", outcome.failure())
                .isEqualTo(Status.APPLIED);
        assertThat(state())
                .as("the handler's first delivery must change the probed state, or duplicates"
                        + " could not be told apart")
                .isNotEqualTo(before);
    }

    @Test
    final void sequentialDuplicateAppliesOnce() throws Exception {
        IdempotentConsumer consumer = consumer();
        Delivery event = event("evt-1");
        assertThat(consumer.process(event).status()).isEqualTo(Status.APPLIED);
        Object once = state();
        Outcome second = consumer.process(event.redelivery());
        assertThat(second.status()).as("second delivery of the same event").isEqualTo(Status.DUPLICATE);
        assertThat(state())
                .as("effect applied exactly once after a sequential duplicate")
                .isEqualTo(once);
    }

    @Test
    final void crashInTheAckGapAppliesOnce() throws Exception {
        IdempotentConsumer consumer = consumer();
        Object expected = stateAfterOneDeliveryOnTheSide();
        FaultInjectingSource source = new FaultInjectingSource(consumer);
        List<Outcome> outcomes =
                source.publish(event("evt-1")).crashInAckGap("evt-1").drain();
        assertThat(outcomes).extracting(Outcome::status).containsExactly(Status.APPLIED, Status.DUPLICATE);
        assertThat(state())
                .as("effect applied exactly once after a crash between commit and ack")
                .isEqualTo(expected);
    }

    @Test
    final void concurrentDuplicateAppliesOnce() throws Exception {
        IdempotentConsumer consumer = consumer();
        Object expected = stateAfterOneDeliveryOnTheSide();
        Delivery event = event("evt-1");
        int n = concurrency();
        CyclicBarrier barrier = new CyclicBarrier(n);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            List<Future<Outcome>> futures = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                futures.add(pool.submit(() -> {
                    barrier.await(30, TimeUnit.SECONDS);
                    return consumer.process(event);
                }));
            }
            List<Outcome> outcomes = new ArrayList<>();
            for (Future<Outcome> f : futures) {
                outcomes.add(f.get(60, TimeUnit.SECONDS));
            }
            // A delivery still in progress is left unacknowledged and comes back: deliver it again.
            FaultInjectingSource redeliveries = new FaultInjectingSource(consumer);
            outcomes.stream().filter(Outcome::retryable).forEach(o -> redeliveries.publish(event.redelivery()));
            List<Outcome> all = new ArrayList<>(outcomes);
            all.addAll(redeliveries.drain());
            assertThat(all)
                    .filteredOn(o -> o.status() == Status.APPLIED)
                    .as("exactly one of %d concurrent deliveries applies: %s", n, all)
                    .hasSize(1);
            assertThat(all)
                    .filteredOn(o -> o.status() == Status.FAILED_PERMANENT || o.status() == Status.FAILED_RETRYABLE)
                    .as("no concurrent delivery fails")
                    .isEmpty();
        } finally {
            pool.shutdownNow();
        }
        assertThat(state())
                .as("effect applied exactly once after %d concurrent deliveries", n)
                .isEqualTo(expected);
    }

    // The reference end state, computed by the handler itself (not guessed by the contract): the
    // same event delivered exactly once, in a schema of its own.
    private Object stateAfterOneDeliveryOnTheSide() throws Exception {
        try (TestDatabase side = newDatabase(2)) {
            try (Connection c = side.dataSource().getConnection()) {
                createTables(c);
            }
            IdempotentConsumer once = consumer(side.dataSource());
            assertThat(once.process(event("evt-1")).status()).isEqualTo(Status.APPLIED);
            try (Connection c = side.dataSource().getConnection()) {
                return state(c);
            }
        }
    }
}
