package dev.once.retention;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.StreamPositions;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.math.BigInteger;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * What {@link StreamPositionPruner} deletes, on both databases: the positions of streams that did not move within
 * the retention, chunk by chunk, and never one a move is committing: a stream that moves while a chunk runs keeps its
 * new position, so a message behind it is still refused. A stream that was pruned starts afresh.
 */
class StreamPositionPruningTest {

    enum Db {
        POSTGRES,
        MARIADB;

        TestDatabase fresh() {
            return this == POSTGRES
                    ? TestPostgres.shared().freshDatabase(4)
                    : TestMariaDb.shared().freshDatabase(4);
        }
    }

    private static final Duration RETENTION = StreamPositionPruner.DEFAULT_RETENTION;
    private static final String CONSUMER = "fifo";

    @ParameterizedTest(name = "{0}")
    @EnumSource(Db.class)
    void theStreamsThatDidNotMoveWithinTheRetentionArePrunedAndStartAfresh(Db which) throws Exception {
        try (TestDatabase db = which.fresh()) {
            MutableClock clock = MutableClock.startingNow();
            IdempotentConsumer engine = engine(db, clock, null);
            assertThat(run(engine, "quiet", "q-1", 10)).isEqualTo(Status.APPLIED);
            assertThat(run(engine, "moved-again", "m-1", 10)).isEqualTo(Status.APPLIED);
            clock.advance(Duration.ofDays(10));
            assertThat(run(engine, "moved-again", "m-2", 20)).isEqualTo(Status.APPLIED);
            clock.advance(Duration.ofDays(4));
            assertThat(run(engine, "new", "n-1", 10)).isEqualTo(Status.APPLIED);
            clock.advance(Duration.ofDays(1));
            StreamPositionPruner pruner = pruner(db.dataSource(), clock, 5_000, new SimpleMeterRegistry());

            assertThat(pruner.prune())
                    .as("15 days to the millisecond: not older yet")
                    .isZero();
            clock.advance(Duration.ofMillis(1));
            assertThat(pruner.prune())
                    .as("quiet, last moved 15 days and 1 ms ago")
                    .isEqualTo(1);
            assertThat(streams(db)).containsExactlyInAnyOrder("moved-again", "new");
            assertThat(run(engine, "moved-again", "m-0", 15))
                    .as("behind a stream moved within the retention: refused")
                    .isEqualTo(Status.FAILED_PERMANENT);
            assertThat(run(engine, "new", "n-0", 5))
                    .as("behind a stream that started within the retention: refused")
                    .isEqualTo(Status.FAILED_PERMANENT);
            assertThat(run(engine, "quiet", "q-0", 5))
                    .as("a pruned stream starts afresh: a message behind its old position applies")
                    .isEqualTo(Status.APPLIED);
            assertThat(position(db, "quiet")).isEqualTo(5);
        }
    }

    static Stream<Arguments> chunkSizes() {
        return Stream.of(Db.values()).flatMap(db -> Stream.of(1, 7, 5_000).map(size -> Arguments.of(db, size)));
    }

    @ParameterizedTest(name = "{0}, chunks of {1}")
    @MethodSource("chunkSizes")
    void deletesExactlyTheStreamsLastMovedBeforeTheCutoffOneChunkPerTransaction(Db which, int chunkSize)
            throws Exception {
        try (TestDatabase db = which.fresh()) {
            MutableClock clock = MutableClock.startingNow();
            Instant cutoff = clock.instant().minus(RETENTION);
            List<Object[]> rows = new ArrayList<>();
            Set<String> kept = new HashSet<>();
            for (int i = 0; i < 500; i++) {
                rows.add(new Object[] {"old-" + i, cutoff.minusMillis(1 + i * 997L)});
                rows.add(new Object[] {"new-" + i, cutoff.plusMillis(i * 997L)}); // new-0 exactly at the cutoff
                kept.add("new-" + i);
            }
            Collections.shuffle(rows, new Random(chunkSize));
            insert(db, rows);
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            Gated gated = new Gated(db.dataSource());
            StreamPositionPruner pruner = pruner(gated.dataSource(), clock, chunkSize, registry);

            assertThat(pruner.prune())
                    .as("streams last moved before the cutoff")
                    .isEqualTo(500);
            assertThat(gated.deletes.get())
                    .as("one DELETE of at most %d rows per transaction, until one comes back short", chunkSize)
                    .isEqualTo(500 / chunkSize + 1);
            assertThat(gated.commits.get()).as("each chunk committed").isGreaterThanOrEqualTo(gated.deletes.get());
            assertThat(streams(db)).isEqualTo(kept);
            assertThat(registry.get("once.retention.deleted")
                            .tag("table", "once_stream_position")
                            .counter()
                            .count())
                    .isEqualTo(500.0);
            assertThat(pruner.prune()).as("a second run finds nothing").isZero();
        }
    }

    /**
     * A stream that has not moved for longer than the retention moves again while a chunk runs: the move holds the
     * row's lock until it commits. PostgreSQL's chunk skips the locked row; MariaDB's waits for the move's commit
     * and then reads the row as moved. Either way the row stays, at its new position, and a message behind it is
     * still refused. The move's transaction takes the row's lock in its handler, earlier than the engine's own
     * update does, so that the test holds it open while the chunk runs.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Db.class)
    void aStreamMovingWhileAChunkRunsKeepsItsNewPosition(Db which) throws Exception {
        try (TestDatabase db = which.fresh()) {
            MutableClock clock = MutableClock.startingNow();
            CountDownLatch entered = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            AtomicLong session = new AtomicLong();
            IdempotentConsumer engine = engine(db, clock, c -> {
                session.set(sessionId(which, c));
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT position FROM once_stream_position WHERE consumer = ? AND stream = ? FOR UPDATE")) {
                    ps.setString(1, CONSUMER);
                    ps.setString(2, "g");
                    ps.executeQuery().close();
                }
                entered.countDown();
                await(release);
            });
            assertThat(run(engine(db, clock, null), "g", "a", 10)).isEqualTo(Status.APPLIED);
            clock.advance(RETENTION.plusMinutes(1));
            StreamPositionPruner pruner = pruner(db.dataSource(), clock, 100, new SimpleMeterRegistry());

            CompletableFuture<Status> move =
                    CompletableFuture.supplyAsync(() -> run(engine, "g", "b", 20), OwnThreads.each());
            await(entered);
            CompletableFuture<Long> pruned = CompletableFuture.supplyAsync(pruner::prune, OwnThreads.each());
            Awaitility.await("the chunk done or waiting")
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> pruned.isDone() || lockWaits(db, which, session.get()));
            boolean passed = pruned.isDone(); // else it waits for the move
            release.countDown();

            assertThat(move.get(30, TimeUnit.SECONDS)).isEqualTo(Status.APPLIED);
            assertThat(pruned.get(30, TimeUnit.SECONDS))
                    .as("the moved row is not old any more")
                    .isZero();
            assertThat(streams(db)).containsExactly("g");
            assertThat(position(db, "g")).isEqualTo(20);
            assertThat(movedAt(db, "g")).isEqualTo(clock.instant());
            assertThat(run(engine(db, clock, null), "g", "c", 15))
                    .as("behind the moved stream: refused")
                    .isEqualTo(Status.FAILED_PERMANENT);
            assertThat(passed)
                    .as(
                            which == Db.POSTGRES
                                    ? "SKIP LOCKED: the chunk passes the row being moved, without waiting"
                                    : "InnoDB's delete waits on the row being moved")
                    .isEqualTo(which == Db.POSTGRES);
            assertThat(pruner.prune()).isZero();
        }
    }

    /**
     * The other order: a chunk has deleted an old stream's row and not committed yet when the stream moves. The move
     * waits for the row's lock; when the chunk commits, the move finds no row and stores the stream anew at its own
     * position, so a message behind that position is refused as before: the prune loses nothing the move wrote.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Db.class)
    void aStreamPrunedWhileItMovesIsStoredAgainAtItsNewPosition(Db which) throws Exception {
        try (TestDatabase db = which.fresh()) {
            MutableClock clock = MutableClock.startingNow();
            AtomicLong session = new AtomicLong();
            IdempotentConsumer engine = engine(db, clock, c -> session.set(sessionId(which, c)));
            assertThat(run(engine, "g", "a", 10)).isEqualTo(Status.APPLIED);
            clock.advance(RETENTION.plusMinutes(1));
            Gated gated = new Gated(db.dataSource());
            StreamPositionPruner pruner = pruner(gated.dataSource(), clock, 100, new SimpleMeterRegistry());

            gated.holdTheFirstChunksCommit();
            CompletableFuture<Long> pruned = CompletableFuture.supplyAsync(pruner::prune, OwnThreads.each());
            await(gated.atCommit);
            CompletableFuture<Status> move =
                    CompletableFuture.supplyAsync(() -> run(engine, "g", "b", 20), OwnThreads.each());
            Awaitility.await("the move done or waiting")
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> move.isDone() || lockWaits(db, which, session.get()));
            assertThat(move).as("the move waits on the row the chunk deleted").isNotDone();
            gated.release.countDown();

            assertThat(pruned.get(30, TimeUnit.SECONDS)).isEqualTo(1);
            assertThat(move.get(30, TimeUnit.SECONDS)).isEqualTo(Status.APPLIED);
            assertThat(position(db, "g"))
                    .as("stored again, at the move's position")
                    .isEqualTo(20);
            assertThat(movedAt(db, "g")).isEqualTo(clock.instant());
            assertThat(run(engine, "g", "c", 15))
                    .as("behind the stream stored again: refused")
                    .isEqualTo(Status.FAILED_PERMANENT);
        }
    }

    /**
     * A chunk holds only the rows it deletes: while it is open (deleted, not committed), the first run of a new stream
     * whose key falls among the rows it scanned and a move of a stream it scanned and keeps (moved within the
     * retention) go through without waiting. On MariaDB the chunk's delete ran under REPEATABLE READ, where InnoDB's
     * scan locks every record it reads with the gap before it (next-key locks) and keeps the locks of the rows it
     * does not delete: both waited for the chunk's commit.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Db.class)
    void anOpenChunkHoldsUpNeitherANewStreamNorAStreamItKeeps(Db which) throws Exception {
        try (TestDatabase db = which.fresh()) {
            MutableClock clock = MutableClock.startingNow();
            AtomicLong firstSession = new AtomicLong();
            AtomicLong moveSession = new AtomicLong();
            IdempotentConsumer engine = engine(db, clock, null);
            assertThat(run(engine, "b-old", "b-1", 10)).isEqualTo(Status.APPLIED);
            assertThat(run(engine, "f-old", "f-1", 10)).isEqualTo(Status.APPLIED);
            clock.advance(RETENTION.plusMinutes(1));
            assertThat(run(engine, "d-young", "d-1", 10)).isEqualTo(Status.APPLIED);
            Gated gated = new Gated(db.dataSource());
            StreamPositionPruner pruner = pruner(gated.dataSource(), clock, 100, new SimpleMeterRegistry());

            gated.holdTheFirstChunksCommit();
            CompletableFuture<Long> pruned = CompletableFuture.supplyAsync(pruner::prune, OwnThreads.each());
            await(gated.atCommit);
            IdempotentConsumer firstRuns = engine(db, clock, c -> firstSession.set(sessionId(which, c)));
            CompletableFuture<Status> first =
                    CompletableFuture.supplyAsync(() -> run(firstRuns, "c-new", "c-1", 1), OwnThreads.each());
            Awaitility.await("the new stream's first run done or waiting")
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> first.isDone() || sessionWaits(db, which, firstSession.get()));
            boolean firstWaited = !first.isDone();
            IdempotentConsumer moves = engine(db, clock, c -> moveSession.set(sessionId(which, c)));
            CompletableFuture<Status> move =
                    CompletableFuture.supplyAsync(() -> run(moves, "d-young", "d-2", 20), OwnThreads.each());
            Awaitility.await("the kept stream's move done or waiting")
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> move.isDone() || sessionWaits(db, which, moveSession.get()));
            boolean moveWaited = !move.isDone();
            gated.release.countDown();

            assertThat(pruned.get(30, TimeUnit.SECONDS)).isEqualTo(2);
            assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo(Status.APPLIED);
            assertThat(move.get(30, TimeUnit.SECONDS)).isEqualTo(Status.APPLIED);
            assertThat(streams(db)).containsExactlyInAnyOrder("c-new", "d-young");
            assertThat(position(db, "d-young")).isEqualTo(20);
            assertThat(List.of(firstWaited, moveWaited))
                    .as("[the new stream's first run, the kept stream's move] waited for the open chunk")
                    .containsExactly(false, false);
        }
    }

    @Test
    void theRetentionIsAtLeastAMinuteAndFifteenDaysByDefault() {
        assertThat(StreamPositionPruner.DEFAULT_RETENTION).isEqualTo(Duration.ofDays(15));
        assertThatThrownBy(() -> StreamPositionPruner.builder().retention(Duration.ofSeconds(59)))
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("retention must be at least 1 minute, but was PT59S")
                .hasMessageContaining("a message behind its position")
                .hasMessageContaining("after its successors");
        assertThatThrownBy(() -> StreamPositionPruner.builder().retention(null))
                .isInstanceOf(InvalidConfigurationException.class);
        try (TestDatabase db = TestPostgres.shared().freshDatabase(1)) {
            assertThat(StreamPositionPruner.builder()
                            .dataSource(db.dataSource())
                            .build()
                            .retention())
                    .isEqualTo(Duration.ofDays(15));
        }
    }

    // ---- helpers ---------------------------------------------------------------------------------------------

    private interface Hook {
        void run(Connection c) throws Exception;
    }

    /** An engine whose handler runs {@code hook} (if not null) on the claim transaction's connection. */
    private static IdempotentConsumer engine(TestDatabase db, MutableClock clock, Hook hook) {
        return IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer(CONSUMER)
                .clock(clock)
                .handler((d, tx) -> {
                    if (hook != null) {
                        try {
                            hook.run(tx.connection());
                        } catch (Exception e) {
                            throw new IllegalStateException(e);
                        }
                    }
                })
                .build();
    }

    private static Status run(IdempotentConsumer engine, String stream, String id, int position) {
        List<Outcome> outcomes = engine.processInOrder(
                List.of(Delivery.of(id, "x")), new StreamPositions(stream, List.of(BigInteger.valueOf(position))));
        return outcomes.get(0).status();
    }

    private static StreamPositionPruner pruner(
            DataSource ds, MutableClock clock, int chunkSize, SimpleMeterRegistry registry) {
        return StreamPositionPruner.builder()
                .dataSource(ds)
                .chunkSize(chunkSize)
                .meterRegistry(registry)
                .clock(clock)
                .build();
    }

    private static long sessionId(Db which, Connection c) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs =
                        s.executeQuery(which == Db.POSTGRES ? "SELECT pg_backend_pid()" : "SELECT CONNECTION_ID()")) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /**
     * Whether a transaction of this test waits for a row lock: on PostgreSQL {@code session} or one it blocks, on
     * MariaDB any, on this test's stream positions. Not MariaDB's information_schema.INNODB_TRX: InnoDB refreshes
     * it only once nobody on the server has read it for 100 ms, so polling it (this test's own, or any other reader's
     * on the shared server) kept answering a snapshot from before the wait began, for the whole 30 s; the monitor's
     * output lists the lock queues as they are.
     */
    private static boolean lockWaits(TestDatabase db, Db which, long session) throws SQLException {
        if (which == Db.POSTGRES) {
            return db.queryLong("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND (pid = "
                            + session + " OR " + session + " = ANY(pg_blocking_pids(pid)))")
                    > 0;
        }
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SHOW ENGINE INNODB STATUS")) {
            rs.next();
            // RECORD LOCKS space id 5 page no 3 n bits 320 index PRIMARY of table `db`.`once_stream_position` trx id
            // 2856 lock_mode X waiting
            String table = " of table `" + db.name() + "`.`once_stream_position` ";
            return rs.getString("Status").lines().anyMatch(line -> line.contains(table) && line.endsWith(" waiting"));
        }
    }

    /**
     * Whether the transaction of database session {@code session} (0: not known yet) waits for a lock: on MariaDB,
     * its entry in the monitor's list of transactions says {@code LOCK WAIT}.
     */
    private static boolean sessionWaits(TestDatabase db, Db which, long session) throws SQLException {
        if (session == 0) {
            return false;
        }
        if (which == Db.POSTGRES) {
            return lockWaits(db, which, session);
        }
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SHOW ENGINE INNODB STATUS")) {
            rs.next();
            // ---TRANSACTION 2856, ACTIVE 3 sec inserting / LOCK WAIT 2 lock struct(s), ... / MariaDB thread id 45, ...
            for (String trx : rs.getString("Status").split("\n---TRANSACTION ")) {
                if (trx.contains("MariaDB thread id " + session + ",")) {
                    return trx.contains("LOCK WAIT");
                }
            }
            return false;
        }
    }

    private static void await(CountDownLatch latch) throws InterruptedException {
        assertThat(latch.await(30, TimeUnit.SECONDS)).isTrue();
    }

    /** Streams of {@link #CONSUMER} as the engine stores them: name, position, moved_at. */
    private static void insert(TestDatabase db, List<Object[]> rows) throws SQLException {
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement ps = c.prepareStatement(
                        "INSERT INTO once_stream_position (consumer, stream, position, moved_at) VALUES (?, ?, ?, ?)")) {
            int i = 0;
            for (Object[] row : rows) {
                ps.setString(1, CONSUMER);
                ps.setString(2, (String) row[0]);
                ps.setLong(3, i++);
                ps.setTimestamp(4, Timestamp.from((Instant) row[1]));
                ps.addBatch();
            }
            ps.executeBatch();
        }
    }

    private static Set<String> streams(TestDatabase db) throws SQLException {
        Set<String> streams = new HashSet<>();
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT stream FROM once_stream_position")) {
            while (rs.next()) {
                streams.add(rs.getString(1));
            }
        }
        return streams;
    }

    private static long position(TestDatabase db, String stream) {
        return db.queryLong("SELECT position FROM once_stream_position WHERE stream = '" + stream + "'");
    }

    private static Instant movedAt(TestDatabase db, String stream) throws SQLException {
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs =
                        s.executeQuery("SELECT moved_at FROM once_stream_position WHERE stream = '" + stream + "'")) {
            assertThat(rs.next()).isTrue();
            return rs.getTimestamp(1).toInstant();
        }
    }

    /**
     * A data source that counts the DELETE statements prepared on its connections and the commits, and can hold the
     * commit of the first transaction that prepared a DELETE until {@link #release}.
     */
    private static final class Gated {
        final AtomicInteger deletes = new AtomicInteger();
        final AtomicInteger commits = new AtomicInteger();
        final CountDownLatch atCommit = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        private final AtomicBoolean armed = new AtomicBoolean();
        private final DataSource dataSource;

        Gated(DataSource target) {
            this.dataSource = (DataSource) Proxy.newProxyInstance(
                    DataSource.class.getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                        Object result = invoke(method, target, args);
                        return method.getName().equals("getConnection") ? gated((Connection) result) : result;
                    });
        }

        void holdTheFirstChunksCommit() {
            armed.set(true);
        }

        DataSource dataSource() {
            return dataSource;
        }

        private Connection gated(Connection target) {
            AtomicBoolean deleted = new AtomicBoolean(); // this connection's transaction prepared a DELETE
            return (Connection) Proxy.newProxyInstance(
                    Connection.class.getClassLoader(), new Class<?>[] {Connection.class}, (proxy, method, args) -> {
                        if (method.getName().equals("prepareStatement")
                                && ((String) args[0]).stripLeading().startsWith("DELETE")) {
                            deletes.incrementAndGet();
                            deleted.set(true);
                        }
                        if (method.getName().equals("commit")) {
                            commits.incrementAndGet();
                            if (deleted.getAndSet(false) && armed.getAndSet(false)) {
                                atCommit.countDown();
                                await(release);
                            }
                        }
                        return invoke(method, target, args);
                    });
        }

        private static Object invoke(Method method, Object target, Object[] args) throws Throwable {
            try {
                return method.invoke(target, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        }
    }
}
