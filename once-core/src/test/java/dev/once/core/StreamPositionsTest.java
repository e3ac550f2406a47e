package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.IdempotentConsumerBuilder;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.StreamPositions;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.math.BigInteger;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link IdempotentConsumer#processInOrder(List, StreamPositions)} on PostgreSQL and MariaDB: the stream's stored
 * position moves forward with what is applied, and a delivery the stream has passed is refused before its handler
 * runs; the transaction of a run holds the stream's row lock from before its handler to its commit, so a run of the
 * stream that comes meanwhile (a process that held a message past its lease while the broker handed out its
 * successors) waits for it and follows it.
 */
class StreamPositionsTest {

    static Stream<Arguments> databases() {
        return Stream.of(
                Arguments.of("PostgreSQL", (Supplier<TestDatabase>)
                        () -> TestPostgres.shared().freshDatabase(4)),
                Arguments.of("MariaDB", (Supplier<TestDatabase>)
                        () -> TestMariaDb.shared().freshDatabase(4)));
    }

    /** One engine of consumer {@code name} whose handler writes a row of {@code effect} and waits at {@code gate}. */
    private static IdempotentConsumer engine(
            TestDatabase db, String name, CountDownLatch entered, CountDownLatch gate) {
        return IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer(name)
                .handler((d, tx) -> {
                    if (d.payloadText().equals("wait")) {
                        entered.countDown();
                        assertThat(gate.await(30, TimeUnit.SECONDS)).isTrue();
                    }
                    if (d.payloadText().equals("swallow")) {
                        try (PreparedStatement ps =
                                tx.connection().prepareStatement("SELECT no_such_column FROM effect")) {
                            ps.executeQuery();
                        } catch (SQLException swallowed) {
                            return; // and returns as if done: PostgreSQL has aborted the transaction
                        }
                    }
                    try (PreparedStatement ps =
                            tx.connection().prepareStatement("INSERT INTO effect (event_id) VALUES (?)")) {
                        ps.setString(1, d.eventId());
                        ps.executeUpdate();
                    }
                })
                .build();
    }

    private static List<Status> run(IdempotentConsumer engine, String stream, Object... idsAndPositions) {
        List<Delivery> ds = new ArrayList<>();
        List<BigInteger> positions = new ArrayList<>();
        for (int i = 0; i < idsAndPositions.length; i += 2) {
            ds.add(Delivery.of((String) idsAndPositions[i], "ok"));
            positions.add(BigInteger.valueOf((Integer) idsAndPositions[i + 1]));
        }
        return engine.processInOrder(ds, new StreamPositions(stream, positions)).stream()
                .map(Outcome::status)
                .toList();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("databases")
    void thePositionMovesForwardAndADeliveryTheStreamPassedIsRefused(String name, Supplier<TestDatabase> fresh)
            throws Exception {
        try (TestDatabase db = fresh.get()) {
            db.execute("CREATE TABLE effect (event_id varchar(255) NOT NULL)");
            IdempotentConsumer engine = engine(db, "fifo", null, null);

            assertThat(run(engine, "q#g", "a", 10, "b", 20)).containsExactly(Status.APPLIED, Status.APPLIED);
            assertThat(run(engine, "q#g", "c", 15))
                    .as("behind the stream: refused, not applied after b")
                    .containsExactly(Status.FAILED_PERMANENT);
            assertThat(run(engine, "q#g", "b", 20, "d", 30))
                    .as("a duplicate is a duplicate wherever it stands")
                    .containsExactly(Status.DUPLICATE, Status.APPLIED);
            assertThat(run(engine, "q#g", "e", 25, "f", 40))
                    .as("the first behind is refused and the run stops there")
                    .containsExactly(Status.FAILED_PERMANENT, Status.FAILED_RETRYABLE);
            assertThat(run(engine, "q#g", "f", 40)).containsExactly(Status.APPLIED);
            assertThat(run(engine, "q#other", "c", 15))
                    .as("another stream has its own position")
                    .containsExactly(Status.APPLIED);
            assertThat(run(engine(db, "fifo-2", null, null), "q#g", "g", 5))
                    .as("another consumer has its own position")
                    .containsExactly(Status.APPLIED);
            assertThat(db.queryLong("SELECT count(*) FROM effect WHERE event_id IN ('c', 'e')"))
                    .as("c once, by the other stream; e never")
                    .isEqualTo(1);
            assertThat(db.queryLong(
                            "SELECT position FROM once_stream_position WHERE consumer = 'fifo' AND stream = 'q#g'"))
                    .isEqualTo(40);
        }
    }

    /**
     * A process that holds a message in its handler past its lease while the broker hands out the successors (cut off
     * from the broker, not from the database): its transaction took the stream's row lock before its handler, so the
     * successors' run waits for its commit before its own handler and follows it; the stream never goes on without a
     * delivery whose handler is running. A process that wakes up late before its run reached the fence is refused
     * instead (the stale runs of {@link #aRefusedRunsHandlerIsNeverCalled}).
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("databases")
    void theSuccessorsOfADeliveryInItsHandlerWaitForItsCommitAndFollowIt(String name, Supplier<TestDatabase> fresh)
            throws Exception {
        try (TestDatabase db = fresh.get()) {
            db.execute("CREATE TABLE effect (event_id varchar(255) NOT NULL)");
            CountDownLatch entered = new CountDownLatch(1);
            CountDownLatch gate = new CountDownLatch(1);
            IdempotentConsumer zombie = engine(db, "fifo", entered, gate);
            IdempotentConsumer other = engine(db, "fifo", null, null);
            CompletableFuture<List<Outcome>> held = CompletableFuture.supplyAsync(
                    () -> zombie.processInOrder(
                            List.of(Delivery.of("m1", "wait")), new StreamPositions("q#g", List.of(BigInteger.ONE))),
                    OwnThreads.each());
            assertThat(entered.await(30, TimeUnit.SECONDS)).isTrue();

            CompletableFuture<List<Status>> successors =
                    CompletableFuture.supplyAsync(() -> run(other, "q#g", "m2", 2, "m3", 3), OwnThreads.each());
            await().atMost(30, TimeUnit.SECONDS)
                    .until(() -> successors.isDone() || waitsForTheStreamsRowLock(db, name.equals("MariaDB")));
            assertThat(successors)
                    .as("the successors wait for m1's commit: the stream's row lock, taken before m1's handler")
                    .isNotDone();
            assertThat(db.queryLong("SELECT count(*) FROM effect"))
                    .as("nothing committed while m1's handler runs")
                    .isZero();
            gate.countDown();

            assertThat(held.get(30, TimeUnit.SECONDS))
                    .extracting(Outcome::status)
                    .containsExactly(Status.APPLIED);
            assertThat(successors.get(30, TimeUnit.SECONDS))
                    .as("m2 and m3 after m1")
                    .containsExactly(Status.APPLIED, Status.APPLIED);
            assertThat(db.queryLong(
                            "SELECT position FROM once_stream_position WHERE consumer = 'fifo' AND stream = 'q#g'"))
                    .isEqualTo(3);
            assertThat(run(other, "q#g", "m1", 1)).as("m1 again: a duplicate").containsExactly(Status.DUPLICATE);
        }
    }

    /** In a transaction the caller opened: the position moves with its commit, and a refusal rolls it back. */
    @Test
    void inTheCallersTransactionThePositionMovesWithItAndARefusalRollsItBack() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            db.execute("CREATE TABLE effect (event_id varchar(255) NOT NULL)");
            ManualTransactions manual = new ManualTransactions();
            IdempotentConsumer joined = IdempotentConsumer.builder()
                    .transactions(manual)
                    .dialect(Dialects.POSTGRESQL)
                    .consumer("fifo")
                    .handler((d, tx) -> {
                        try (PreparedStatement ps =
                                tx.connection().prepareStatement("INSERT INTO effect (event_id) VALUES (?)")) {
                            ps.setString(1, d.eventId());
                            ps.executeUpdate();
                        }
                    })
                    .build();
            try (Connection c = db.dataSource().getConnection()) {
                c.setAutoCommit(false);
                try (ManualTransactions.Scope tx = manual.join(c)) {
                    assertThat(run(joined, "q#g", "a", 10, "b", 20)).containsExactly(Status.APPLIED, Status.APPLIED);
                    tx.commit();
                }
                try (ManualTransactions.Scope tx = manual.join(c)) {
                    List<Status> late = run(joined, "q#g", "c", 15);
                    assertThat(late).containsExactly(Status.FAILED_PERMANENT);
                    assertThat(tx.rollbackOnly())
                            .as("the caller's transaction must not commit")
                            .isTrue();
                }
            }
            assertThat(db.queryLong("SELECT count(*) FROM effect")).isEqualTo(2);
            assertThat(db.queryLong("SELECT position FROM once_stream_position"))
                    .isEqualTo(20);
        }
    }

    /** A handler that swallows its failed statement in a run with positions: told so, and the run split around it. */
    @Test
    void aSwallowedFailureInARunWithPositionsIsReportedAsTheClaimCheckReportsIt() {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            db.execute("CREATE TABLE effect (event_id varchar(255) NOT NULL)");
            List<Outcome> outcomes = engine(db, "fifo", null, null)
                    .processInOrder(
                            List.of(Delivery.of("a", "ok"), Delivery.of("b", "swallow"), Delivery.of("c", "ok")),
                            new StreamPositions("s", List.of(BigInteger.ONE, BigInteger.TWO, BigInteger.valueOf(3))));
            assertThat(outcomes)
                    .extracting(Outcome::status)
                    .containsExactly(Status.APPLIED, Status.FAILED_RETRYABLE, Status.FAILED_RETRYABLE);
            assertThat(outcomes.get(1).failure())
                    .hasMessageContaining("(it caught the SQLException), so the database aborted the transaction");
            assertThat(db.queryLong("SELECT position FROM once_stream_position"))
                    .isEqualTo(1);
        }
    }

    static Stream<Arguments> databasesAndModes() {
        return databases()
                .flatMap(db -> Stream.of(
                        Arguments.of(db.get()[0], db.get()[1], false), Arguments.of(db.get()[0], db.get()[1], true)));
    }

    /**
     * The fence comes before the handler: a run the stream has passed never runs its handler, whose effects outside
     * the transaction (here a list; an HTTP call, a record kept elsewhere) a rollback cannot undo, and two runs of one
     * stream at once take turns before their handlers, not after. Stale runs, a replay, a run split at its first
     * delivery behind the stream, two runs at once of which the second is stale; in the engine's transactions and in
     * the caller's.
     */
    @ParameterizedTest(name = "{0}, joined {2}")
    @MethodSource("databasesAndModes")
    void aRefusedRunsHandlerIsNeverCalled(String name, Supplier<TestDatabase> fresh, boolean joined) throws Exception {
        try (TestDatabase db = fresh.get()) {
            db.execute("CREATE TABLE effect (event_id varchar(255) NOT NULL)");
            List<String> calls = Collections.synchronizedList(new ArrayList<>());
            CountDownLatch entered = new CountDownLatch(1);
            CountDownLatch gate = new CountDownLatch(1);
            ManualTransactions manual = new ManualTransactions();
            IdempotentConsumerBuilder builder = IdempotentConsumer.builder()
                    .consumer("fifo")
                    .handler((d, tx) -> {
                        calls.add(d.eventId()); // outside the transaction: no rollback undoes it
                        if (d.payloadText().equals("wait")) {
                            entered.countDown();
                            assertThat(gate.await(30, TimeUnit.SECONDS)).isTrue();
                        }
                        try (PreparedStatement ps =
                                tx.connection().prepareStatement("INSERT INTO effect (event_id) VALUES (?)")) {
                            ps.setString(1, d.eventId());
                            ps.executeUpdate();
                        }
                    });
            IdempotentConsumer engine = joined
                    ? builder.transactions(manual)
                            .dialect(name.equals("MariaDB") ? Dialects.MARIADB : Dialects.POSTGRESQL)
                            .build()
                    : builder.dataSource(db.dataSource()).build();
            Run run = (payload, idsAndPositions) -> joined
                    ? inCallersTransaction(db, manual, () -> runWith(engine, payload, idsAndPositions))
                    : runWith(engine, payload, idsAndPositions);

            assertThat(run.of("ok", "a", 1, "b", 2)).containsExactly(Status.APPLIED, Status.APPLIED);
            assertThat(run.of("ok", "c", 2)).as("stale").containsExactly(Status.FAILED_PERMANENT);
            assertThat(run.of("ok", "c", 1)).as("stale").containsExactly(Status.FAILED_PERMANENT);
            assertThat(run.of("ok", "a", 1, "b", 2)).as("a replay").containsExactly(Status.DUPLICATE, Status.DUPLICATE);
            assertThat(run.of("ok", "d", 2, "e", 3))
                    .as("split at its first delivery behind the stream")
                    .containsExactly(Status.FAILED_PERMANENT, Status.FAILED_RETRYABLE);

            CompletableFuture<List<Status>> first =
                    CompletableFuture.supplyAsync(() -> run.of("wait", "f", 3), OwnThreads.each());
            assertThat(entered.await(30, TimeUnit.SECONDS)).isTrue();
            CompletableFuture<List<Status>> second =
                    CompletableFuture.supplyAsync(() -> run.of("ok", "g", 3, "h", 4), OwnThreads.each());
            await().atMost(30, TimeUnit.SECONDS)
                    .until(() -> calls.contains("g") || waitsForTheStreamsRowLock(db, name.equals("MariaDB")));
            List<String> whileTheFirstRan = List.copyOf(calls);
            gate.countDown();
            List<Status> firstDone = first.get(30, TimeUnit.SECONDS);
            List<Status> secondDone = second.get(30, TimeUnit.SECONDS);
            List<Status> last = run.of("ok", "h", 4);

            assertThat(calls)
                    .as("the handler's calls: never one of a run the stream had passed")
                    .containsExactly("a", "b", "f", "h");
            assertThat(whileTheFirstRan)
                    .as("while f's handler ran, the run of g and h waited for the stream's row lock before its handler")
                    .containsExactly("a", "b", "f");
            assertThat(firstDone).containsExactly(Status.APPLIED);
            assertThat(secondDone)
                    .as("stale once the first committed")
                    .containsExactly(Status.FAILED_PERMANENT, Status.FAILED_RETRYABLE);
            assertThat(last).containsExactly(Status.APPLIED);
            assertThat(db.queryLong("SELECT count(*) FROM effect")).isEqualTo(4);
            assertThat(db.queryLong("SELECT position FROM once_stream_position"))
                    .isEqualTo(4);
        }
    }

    /** A run of stream q#g: deliveries with {@code payload}, ids and positions in turn. */
    private interface Run {
        List<Status> of(String payload, Object... idsAndPositions);
    }

    /** {@code work} in a transaction of the caller's own, committed unless once marked it rollback-only. */
    private static List<Status> inCallersTransaction(
            TestDatabase db, ManualTransactions manual, Supplier<List<Status>> work) {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                List<Status> statuses = work.get();
                if (tx.rollbackOnly()) {
                    tx.rollback();
                } else {
                    tx.commit();
                }
                return statuses;
            }
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
    }

    private static List<Status> runWith(IdempotentConsumer engine, String payload, Object... idsAndPositions) {
        List<Delivery> ds = new ArrayList<>();
        List<BigInteger> positions = new ArrayList<>();
        for (int i = 0; i < idsAndPositions.length; i += 2) {
            ds.add(Delivery.of((String) idsAndPositions[i], payload));
            positions.add(BigInteger.valueOf((Integer) idsAndPositions[i + 1]));
        }
        return engine.processInOrder(ds, new StreamPositions("q#g", positions)).stream()
                .map(Outcome::status)
                .toList();
    }

    /**
     * Whether a transaction of this test's database waits for the stream's row lock. On MariaDB from the monitor's
     * lock queues, not information_schema.INNODB_TRX, which InnoDB refreshes only once nobody has read it for 100 ms
     * (see StreamPositionPruningTest).
     */
    private static boolean waitsForTheStreamsRowLock(TestDatabase db, boolean mariaDb) throws SQLException {
        if (!mariaDb) {
            return db.queryLong("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                            + " AND wait_event_type = 'Lock'")
                    > 0;
        }
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SHOW ENGINE INNODB STATUS")) {
            rs.next();
            String table = " of table `" + db.name() + "`.`once_stream_position` ";
            return rs.getString("Status").lines().anyMatch(line -> line.contains(table) && line.endsWith(" waiting"));
        }
    }

    @Test
    void badPositionsAreRefusedNamingTheValue() {
        assertThatThrownBy(() -> new StreamPositions("s", List.of(BigInteger.TWO, BigInteger.ONE)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("position 1 is 1 after 2");
        assertThatThrownBy(() -> new StreamPositions("s", List.of(BigInteger.valueOf(-1))))
                .hasMessageContaining("0 or more");
        assertThatThrownBy(() -> new StreamPositions(" ", List.of()))
                .hasMessageContaining("1 to 255 characters and not blank, but was ' '");
        assertThatThrownBy(() -> new StreamPositions("x".repeat(256), List.of()))
                .hasMessageContaining("256 characters");
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            IdempotentConsumer engine = engine(db, "fifo", null, null);
            assertThatThrownBy(() -> engine.processInOrder(
                            List.of(Delivery.of("a", "ok"), Delivery.of("b", "ok")),
                            new StreamPositions("s", Arrays.asList(BigInteger.ONE))))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("1 positions of stream 's' for 2 deliveries: expected one per delivery");
        }
    }
}
