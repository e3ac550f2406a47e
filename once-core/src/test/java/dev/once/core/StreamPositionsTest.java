package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.StreamPositions;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.math.BigInteger;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
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
 * position moves forward with what is applied, and a delivery the stream has passed is refused, also when a
 * transaction that applied a later one committed while it was being handled (a process that held a message past its
 * lease while the broker handed out its successors).
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

    @ParameterizedTest(name = "{0}")
    @MethodSource("databases")
    void aDeliveryWhoseSuccessorCommittedWhileItWasHandledIsRefused(String name, Supplier<TestDatabase> fresh)
            throws Exception {
        try (TestDatabase db = fresh.get()) {
            db.execute("CREATE TABLE effect (event_id varchar(255) NOT NULL)");
            CountDownLatch entered = new CountDownLatch(1);
            CountDownLatch gate = new CountDownLatch(1);
            IdempotentConsumer zombie = engine(db, "fifo", entered, gate);
            IdempotentConsumer other = engine(db, "fifo", null, null);
            CompletableFuture<List<Outcome>> held = CompletableFuture.supplyAsync(() -> zombie.processInOrder(
                    List.of(Delivery.of("m1", "wait")), new StreamPositions("q#g", List.of(BigInteger.ONE))));
            assertThat(entered.await(30, TimeUnit.SECONDS)).isTrue();

            assertThat(run(other, "q#g", "m2", 2, "m3", 3))
                    .as("the group went on while m1 was worked on")
                    .containsExactly(Status.APPLIED, Status.APPLIED);
            gate.countDown();
            Outcome m1 = held.get(30, TimeUnit.SECONDS).get(0);

            assertThat(m1.status()).isEqualTo(Status.FAILED_PERMANENT);
            assertThat(m1.failure())
                    .hasMessageContaining("event 'm1' not applied: it is at position 1 of stream 'q#g'")
                    .hasMessageContaining("already applied up to position 3");
            assertThat(db.queryLong("SELECT count(*) FROM effect WHERE event_id = 'm1'"))
                    .as("m1 is not applied after m2 and m3")
                    .isZero();
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox WHERE event_id = 'm1'"))
                    .as("nor claimed")
                    .isZero();
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
