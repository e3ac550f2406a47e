package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.StateMachines;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import org.awaitility.Awaitility;

/**
 * Several threads of ONE exclusive relay ({@link OutboxRelay#relayOnce} is thread-safe, also in
 * exclusive mode), interleaved at random: each thread is held at every connection it opens or
 * closes and at every send (a {@link DataSource} proxy and the publisher), and a move lets one
 * thread run to its next such point. Between moves the clock passes half the lease's time to live
 * or all of it, a rival relay under the same lease runs a batch (taking the lease over once it
 * lapsed) or releases the lease it holds, and rows are committed.
 *
 * <p>Checked: at every quiet moment (all threads between batches) a lease the table says the relay
 * holds unexpired is the lease the relay knows it holds (it never drops a lease it holds); no batch
 * commits after a batch under a newer token sent anything (fencing: never two holders sending under
 * different tokens unfenced); a batch that was fenced marked no row (each sent row's receipt names a
 * batch that committed); at the end every row was sent and marked sent once.
 *
 * <p>Found on its first runs, on both databases: a thread held between acquiring the lease and recording
 * its token at the fence while the lease lapsed and the rival took it over: {@code relayOnce} threw
 * {@code StaleFencingTokenException} ({@code [step 0, step 0, step 0, advance 2, rival 0]}). With that
 * mended, {@code RelayLease} keeping its lease by object identity and a plain set (seed
 * -5088568100896770841): a thread that acquired a token and was held before noting it overwrote the newer
 * token its other thread had acquired since; fenced, the stale one was cleared, and the relay held no
 * lease while the table said it held one. Goes red when the batch ignores a stale fence and skips its
 * last renewal ({@code OutboxRelay#sendBatch}: a batch committed after the rival, under a newer token,
 * had sent).
 */
class OutboxRelayExclusiveThreadsTest {

    static final Duration LEASE_TTL = Duration.ofMillis(30_500);
    static final Duration[] STEPS = {Duration.ofSeconds(1), Duration.ofMillis(15_500), Duration.ofSeconds(31)};
    static final int THREADS = 3;
    static final String[] KEYS = {"k0", "k1", null};

    private static final StateMachines.ThreadDatabases databases = new StateMachines.ThreadDatabases(20);
    private static final AtomicInteger worlds = new AtomicInteger();

    @AfterContainer
    static void close() {
        databases.close();
    }

    @Property(tries = 40)
    void postgresql(@ForAll("moves") List<Move> moves) throws Exception {
        run(databases.postgres(), moves);
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = 20)
    void mariadb(@ForAll("moves") List<Move> moves) throws Exception {
        run(databases.mariadb(), moves);
    }

    private static void run(TestDatabase db, List<Move> moves) throws Exception {
        try (World w = new World(db)) {
            for (Move m : moves) {
                w.moves.add(m.toString());
                w.apply(m);
                w.check();
            }
            w.drain();
        }
    }

    /**
     * A move: let thread {@code arg % THREADS} run to its next point ({@code arg / THREADS} more after
     * it), advance the clock, run the rival or release its lease, or commit a row.
     */
    record Move(String kind, int arg) {
        @Override
        public String toString() {
            return kind + " " + arg;
        }
    }

    @Provide
    Arbitrary<List<Move>> moves() {
        Arbitrary<Move> move = Arbitraries.frequencyOf(
                Tuple.of(12, Arbitraries.integers().between(0, 3 * THREADS - 1).map(i -> new Move("step", i))),
                Tuple.of(3, Arbitraries.integers().between(0, STEPS.length - 1).map(i -> new Move("advance", i))),
                Tuple.of(3, Arbitraries.just(new Move("rival", 0))),
                Tuple.of(1, Arbitraries.just(new Move("release", 0))),
                Tuple.of(2, Arbitraries.integers().between(0, KEYS.length - 1).map(i -> new Move("commit", i))));
        return move.list().ofMinSize(5).ofMaxSize(60);
    }

    /** What happened, in the one order the held threads allow: a send, or a batch's commit. */
    record Event(String what, String batch, long row) {}

    static final class World implements AutoCloseable {
        final TestDatabase db;
        final Dialect dialect;
        final MutableClock clock = MutableClock.startingNow();
        final String leaseName = "threads-" + worlds.getAndIncrement();
        final SimpleMeterRegistry registry = new SimpleMeterRegistry();
        final OutboxRelay x;
        final OutboxRelay rival;
        final OutboxAdmin admin;
        final List<Worker> workers = new ArrayList<>();
        final List<String> moves = new ArrayList<>();
        final List<Event> events = new CopyOnWriteArrayList<>();
        final Map<String, Long> tokenOf = new ConcurrentHashMap<>(); // batch -> the token its lease statements carried
        final Map<String, Integer> handled = new ConcurrentHashMap<>(); // batch -> what relayOnce returned
        final List<Throwable> failures = new CopyOnWriteArrayList<>();
        final ThreadLocal<String> batch = new ThreadLocal<>();
        final ThreadLocal<Connection> batchConnection = new ThreadLocal<>();
        final String fenceSql;
        final String renewSql;
        int rivalBatches;
        int driverBatches;
        int rows;

        World(TestDatabase db) throws SQLException {
            this.db = db;
            db.execute("DELETE FROM once_outbox");
            dialect = Dialects.detect(db.dataSource());
            fenceSql = dialect.fence(TablePrefix.DEFAULT);
            renewSql = dialect.leaseRenew(TablePrefix.DEFAULT);
            admin = OutboxAdmin.builder()
                    .dataSource(db.dataSource())
                    .clock(clock)
                    .build();
            DataSource held = held(db.dataSource());
            x = relay("x", held);
            rival = relay("y", held);
            for (int i = 0; i < 4; i++) {
                commit(i % KEYS.length);
            }
            for (int i = 0; i < THREADS; i++) {
                Worker w = new Worker(i);
                workers.add(w);
                w.start();
                w.awaitParked(0);
            }
        }

        private OutboxRelay relay(String name, DataSource ds) {
            return OutboxRelay.builder()
                    .dataSource(ds)
                    .name(name)
                    .clock(clock)
                    .batchSize(2)
                    .meterRegistry(registry)
                    .lease(leaseName, LEASE_TTL)
                    .publisher(publisher())
                    .build();
        }

        /** Sends at once through publishAll, each row's receipt naming the batch that sent it. */
        private Publisher publisher() {
            return new Publisher() {
                @Override
                public Receipt publish(OutboxMessage m) {
                    throw new AssertionError("sends go through publishAll");
                }

                @Override
                public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
                    hold("send " + messages.stream().map(OutboxMessage::id).toList());
                    String b = batch.get();
                    return messages.stream()
                            .map(m -> {
                                events.add(new Event("send", b, m.id()));
                                return (CompletionStage<Receipt>)
                                        CompletableFuture.completedFuture(new Receipt(200, b));
                            })
                            .toList();
                }
            };
        }

        void apply(Move m) throws Exception {
            switch (m.kind()) {
                case "step" -> {
                    for (int i = 0; i <= m.arg() / THREADS; i++) {
                        workers.get(m.arg() % THREADS).step();
                    }
                }
                case "advance" -> clock.advance(STEPS[m.arg()]);
                case "rival" -> {
                    String b = "y-" + rivalBatches++;
                    batch.set(b);
                    handled.put(b, rival.relayOnce());
                    batch.remove();
                }
                case "release" -> rival.close(); // frees its lease, if it holds it, before the expiry
                case "commit" -> {
                    // Only between batches: an insert on MariaDB may wait for a held batch's next-key locks.
                    if (workers.stream().allMatch(Worker::idle)) {
                        commit(m.arg());
                    }
                }
                default -> throw new IllegalArgumentException(m.kind());
            }
        }

        void commit(int key) throws SQLException {
            OutboxRows.add(db.dataSource(), clock, "e-" + rows, KEYS[key], Integer.toString(rows));
            rows++;
        }

        /** Checked after every move. */
        void check() throws SQLException {
            assertThat(failures).as("relayOnce threw, after " + moves).isEmpty();
            if (!workers.stream().allMatch(Worker::idle)) {
                return;
            }
            try (Connection c = db.dataSource().getConnection();
                    PreparedStatement ps =
                            c.prepareStatement("SELECT owner, token, expires_at FROM once_lease WHERE name = ?")) {
                ps.setString(1, leaseName);
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next()
                            || rs.getString(1) == null
                            || !rs.getString(1).startsWith("x@")) {
                        return;
                    }
                    long token = rs.getLong(2);
                    Instant expires = rs.getTimestamp(3).toInstant();
                    if (clock.instant().isBefore(expires)) {
                        assertThat(x.lease().map(l -> l.token()))
                                .as("the table says relay x holds token " + token + " until " + expires
                                        + "; the relay's own lease, after " + moves)
                                .contains(token);
                    }
                }
            }
        }

        /** Lets every thread finish its batch, then sends what is left from this thread. */
        void drain() throws Exception {
            moves.add("drain");
            for (Worker w : workers) {
                for (int i = 0; !w.idle(); i++) {
                    assertThat(i)
                            .as("thread " + w.index + " finishing its batch after " + moves)
                            .isLessThan(100);
                    w.step();
                }
            }
            check();
            clock.advance(LEASE_TTL.plusSeconds(1));
            for (int i = 0; admin.stats().pending() > 0; i++) {
                assertThat(i).as("draining after " + moves).isLessThan(20);
                String b = "x-drain-" + driverBatches++;
                batch.set(b);
                handled.put(b, x.relayOnce());
                batch.remove();
            }
            assertThat(failures).as("relayOnce threw, after " + moves).isEmpty();

            // Fencing: a batch that sent commits only if no batch under a newer token has sent anything
            // yet (a batch that found no rows commits nothing, unfenced).
            Map<String, Long> tokens = Map.copyOf(tokenOf);
            for (int i = 0; i < events.size(); i++) {
                Event commit = events.get(i);
                String b = commit.batch();
                if (!commit.what().equals("commit")
                        || events.stream()
                                .noneMatch(e ->
                                        e.what().equals("send") && e.batch().equals(b))) {
                    continue;
                }
                assertThat(tokens)
                        .as("the token of batch " + b + ", which sent")
                        .containsKey(b);
                long token = tokens.get(commit.batch());
                for (Event e : events.subList(0, i)) {
                    if (e.what().equals("send")) {
                        assertThat(tokens.getOrDefault(e.batch(), 0L))
                                .as("batch " + commit.batch() + " committed under token " + token + " after batch "
                                        + e.batch() + " sent row " + e.row() + " under a newer one; " + events
                                        + " after " + moves)
                                .isLessThanOrEqualTo(token);
                    }
                }
            }
            // Each row sent at least once, marked sent once, by a batch that committed.
            assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent'"))
                    .as("rows sent after " + moves)
                    .isEqualTo(rows);
            assertThat(registry.get("once.outbox.sent").counters().stream()
                            .mapToDouble(c -> c.count())
                            .sum())
                    .as("rows marked sent after " + moves)
                    .isEqualTo(rows);
            try (Connection c = db.dataSource().getConnection();
                    PreparedStatement ps = c.prepareStatement("SELECT id, response FROM once_outbox");
                    ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    String b = rs.getString(2);
                    assertThat(handled.getOrDefault(b, 0))
                            .as("row " + rs.getLong(1) + " marked by batch " + b + ", which returned; " + handled + " "
                                    + events + " after " + moves)
                            .isPositive();
                }
            }
        }

        /**
         * The data source of both relays: a worker thread is held when it opens or closes a
         * connection; the token a batch's renewal and fence carry is noted, and so is the commit of
         * the connection a batch sent from.
         */
        private DataSource held(DataSource ds) {
            return (DataSource) Proxy.newProxyInstance(
                    getClass().getClassLoader(), new Class<?>[] {DataSource.class}, (p, method, args) -> {
                        if (method.getName().equals("getConnection")) {
                            hold("open a connection");
                            Connection c = (Connection) CountingDataSource.invoke(method, ds, args);
                            return connection(c);
                        }
                        return CountingDataSource.invoke(method, ds, args);
                    });
        }

        private Connection connection(Connection c) {
            Connection[] self = new Connection[1];
            self[0] = (Connection) Proxy.newProxyInstance(
                    getClass().getClassLoader(), new Class<?>[] {Connection.class}, (p, method, args) -> {
                        switch (method.getName()) {
                            case "prepareStatement" -> {
                                String sql = (String) args[0];
                                PreparedStatement ps = (PreparedStatement) CountingDataSource.invoke(method, c, args);
                                if (sql.equals(fenceSql) || sql.equals(renewSql)) {
                                    int tokenAt = sql.equals(fenceSql) ? 2 : 3;
                                    return statement(ps, tokenAt);
                                }
                                if (sql.contains("SKIP LOCKED") && sql.contains("ORDER BY")) {
                                    batchConnection.set(self[0]); // the lock query: this batch's connection
                                }
                                return ps;
                            }
                            case "commit" -> {
                                Object r = CountingDataSource.invoke(method, c, args);
                                if (batchConnection.get() == self[0] && batch.get() != null) {
                                    events.add(new Event("commit", batch.get(), 0));
                                }
                                return r;
                            }
                            case "close" -> {
                                Object r = CountingDataSource.invoke(method, c, args);
                                if (batchConnection.get() == self[0]) {
                                    batchConnection.remove();
                                }
                                hold("closed a connection");
                                return r;
                            }
                            default -> {
                                return CountingDataSource.invoke(method, c, args);
                            }
                        }
                    });
            return self[0];
        }

        private PreparedStatement statement(PreparedStatement ps, int tokenAt) {
            return (PreparedStatement) Proxy.newProxyInstance(
                    getClass().getClassLoader(), new Class<?>[] {PreparedStatement.class}, (p, method, args) -> {
                        if (method.getName().equals("setLong") && (int) args[0] == tokenAt && batch.get() != null) {
                            tokenOf.put(batch.get(), (Long) args[1]);
                        }
                        return CountingDataSource.invoke(method, ps, args);
                    });
        }

        /** Holds a worker thread here until the next move that steps it; other threads pass. */
        private void hold(String point) {
            if (Thread.currentThread() instanceof Worker w && w.world == this) {
                w.park(point);
            }
        }

        @Override
        public void close() {
            for (Worker w : workers) {
                w.free = true;
                w.go.release(1_000);
            }
            for (Worker w : workers) {
                try {
                    w.join(30_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            x.close();
            rival.close();
        }

        /** A thread of relay x: batch after batch, held at every point until stepped. */
        final class Worker extends Thread {
            final World world = World.this;
            final int index;
            final Semaphore go = new Semaphore(0);
            final AtomicInteger parks = new AtomicInteger();
            volatile String parkedAt;
            volatile boolean free;
            int batches;

            Worker(int index) {
                super("x-" + index);
                this.index = index;
                setDaemon(true);
            }

            @Override
            public void run() {
                while (!free) {
                    park("idle");
                    if (free) {
                        return;
                    }
                    String b = "x" + index + "-" + batches++;
                    batch.set(b);
                    try {
                        int n = x.relayOnce();
                        handled.put(b, n);
                    } catch (Throwable e) {
                        failures.add(new AssertionError("thread " + index + " batch " + b + ": " + e, e));
                    }
                    batch.remove();
                }
            }

            void park(String point) {
                if (free) {
                    return;
                }
                parkedAt = point;
                parks.incrementAndGet();
                go.acquireUninterruptibly();
                parkedAt = null;
            }

            boolean idle() {
                return "idle".equals(parkedAt);
            }

            /** Runs this thread to its next point. */
            void step() {
                int before = parks.get();
                go.release();
                awaitParked(before);
            }

            void awaitParked(int before) {
                Awaitility.await("thread " + index + " reaching its next point (else it waits on the database)"
                                + " after " + moves)
                        .atMost(Duration.ofSeconds(20))
                        .pollInterval(Duration.ofMillis(1))
                        .until(() -> parks.get() > before && parkedAt != null);
            }
        }
    }
}
