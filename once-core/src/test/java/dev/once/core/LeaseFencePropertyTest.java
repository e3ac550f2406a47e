package dev.once.core;

import static dev.once.core.Unchecked.call;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.StaleFencingTokenException;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.KeyTransaction;
import dev.once.lease.Fence;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.Transformer;

/**
 * Leases and fencing tokens as a state machine over every write path a holder has, on PostgreSQL and
 * MariaDB: two holders, two leased resources, random steps (acquire, renew, release, the shared clock
 * moved to half or all of the time to live, begin a transaction on a path, fence, fence inside a savepoint
 * that is rolled back, write, commit, roll back). Each holder's transaction runs in a thread of its own
 * and stays open across steps while the others go on (a pause: GC, SIGSTOP, a lost network), so a
 * holder whose lease lapsed writes after its successor acquired it. The paths: {@link Fence#check} in the
 * caller's own JDBC transaction, a {@link dev.once.Handler}'s {@code Tx.fence}, a {@link dev.once.BatchHandler}'s
 * {@code BatchTx.fence}, {@link Fence#check} on a handler's {@code tx.connection()}, and {@link Fence#check} on a
 * {@link KeyTransaction}'s connection (which has no fence of its own), completed; on once's paths a fence may
 * run in a savepoint the handler (or the request's code) rolls back before it writes (what a Spring {@code
 * NESTED} step that failed leaves), or be refused and the refusal caught, and the code writes on; on the
 * caller's own a write comes after a fence that stands (a check rolled back with a savepoint is the caller's
 * to repeat: {@link Fence}). A pause: the clock passes the paused
 * holder's expiry, the other holder acquires the lease and writes at once. The model: the lease table (who holds which token until when), and the commits in the
 * order they happened. The invariants: per resource, the fenced writes committed are in non-decreasing
 * token order and none commits after a newer token was accepted; a stale check names its token, the
 * newest and the resource; acquisitions, renewals and releases answer as the lease table says (a stale
 * holder's renewal and release are refused and leave the successor's lease alone). Tries per database:
 * {@value #TRIES}, up to {@value #MOVES} steps each. Before the engine checked a handler's fences again at
 * the commit, the PostgreSQL property went red within 5 to 89 tries (three runs); on MariaDB, where a
 * rollback to a savepoint keeps the row lock of an updated fence row, only the examples below did. Before
 * {@link Fence#check} on once's guarded connections (a handler's, a key transaction's) was checked again at the
 * commit, the examples of those paths were red the same way.
 */
class LeaseFencePropertyTest {

    static final int TRIES = 30;
    static final Duration TTL = Duration.ofSeconds(10);
    static final int HOLDERS = 2;
    static final int RESOURCES = 2;
    static final int MOVES = 50;

    static final AtomicLong postgresChains = new AtomicLong();
    static final AtomicLong mariadbChains = new AtomicLong();

    private static Store postgres;
    private static Store mariadb;

    @AfterContainer
    static void stop() {
        for (Store s : new Store[] {postgres, mariadb}) {
            if (s != null) {
                s.db.close();
            }
        }
        // Every chain that ran passed the invariants: a stale write accepted fails the property first.
        for (String db : List.of("postgres", "mariadb")) {
            long n = db.equals("postgres") ? postgresChains.get() : mariadbChains.get();
            Store s = db.equals("postgres") ? postgres : mariadb;
            if (n > 0) {
                System.out.println("CHAOS name=lease-fence rounds=" + n + " lost=0 applied_twice=0"
                        + " stale_write_accepted=0 db=" + db + " commits=" + s.commits + " takeovers=" + s.takeovers
                        + " stale_refused=" + s.refused);
            }
        }
    }

    @Property(tries = TRIES)
    void postgresLeaseFencing(@ForAll("chains") ActionChain<World> chain) throws Exception {
        run(chain, postgres(), postgresChains);
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = TRIES)
    void mariadbLeaseFencing(@ForAll("chains") ActionChain<World> chain) throws Exception {
        run(chain, mariadb(), mariadbChains);
    }

    /**
     * Shrunk from the generator, red before the fence was asserted again at the commit: a handler fences
     * with token 1 in a savepoint it rolls back (on PostgreSQL the rollback frees the fence row, on MariaDB
     * too when the check inserted it); the lease lapses, holder 1 acquires token 2, fences, writes and
     * commits; then the paused handler writes and commits with token 1, after token 2.
     */
    @Example
    void postgresHandlerFenceUndoneBySavepointThenWrite() throws Exception {
        fenceUndoneBySavepoint(postgres(), Path.HANDLER);
    }

    @Example
    void mariadbHandlerFenceUndoneBySavepointThenWrite() throws Exception {
        fenceUndoneBySavepoint(mariadb(), Path.HANDLER);
    }

    @Example
    void postgresBatchFenceUndoneBySavepointThenWrite() throws Exception {
        fenceUndoneBySavepoint(postgres(), Path.BATCH);
    }

    /**
     * Red before the fence was asserted again at the commit: a handler catches the refusal of its stale
     * token and goes on; nothing failed in the database, so the engine committed its write after the newer
     * holder's.
     */
    @Example
    void postgresHandlerCatchesTheRefusalAndWrites() throws Exception {
        catchesTheRefusalAndWrites(postgres());
    }

    @Example
    void mariadbHandlerCatchesTheRefusalAndWrites() throws Exception {
        catchesTheRefusalAndWrites(mariadb());
    }

    /**
     * Red before {@link Fence#check} on a {@link KeyTransaction}'s connection was checked again at its {@code
     * complete}: the request's code fences in a savepoint it rolls back, the successor fences, writes and commits,
     * and the request's write committed with the stale token after it.
     */
    @Example
    void postgresKeyTransactionFenceUndoneBySavepointThenWrite() throws Exception {
        fenceUndoneBySavepoint(postgres(), Path.KEY);
    }

    @Example
    void mariadbKeyTransactionFenceUndoneBySavepointThenWrite() throws Exception {
        fenceUndoneBySavepoint(mariadb(), Path.KEY);
    }

    @Example
    void postgresKeyTransactionCatchesTheRefusalAndWrites() throws Exception {
        catchesTheRefusalAndWrites(postgres(), Path.KEY);
    }

    @Example
    void mariadbKeyTransactionCatchesTheRefusalAndWrites() throws Exception {
        catchesTheRefusalAndWrites(mariadb(), Path.KEY);
    }

    /** As the key transaction's: {@link Fence#check} on a handler's {@code tx.connection()} rather than {@code tx.fence}. */
    @Example
    void postgresFenceCheckOnAHandlersConnectionUndoneBySavepointThenWrite() throws Exception {
        fenceUndoneBySavepoint(postgres(), Path.HANDLER_CHECK);
    }

    @Example
    void mariadbFenceCheckOnAHandlersConnectionCaughtAndWrites() throws Exception {
        catchesTheRefusalAndWrites(mariadb(), Path.HANDLER_CHECK);
    }

    private static void catchesTheRefusalAndWrites(Store store) throws Exception {
        catchesTheRefusalAndWrites(store, Path.HANDLER);
    }

    private static void catchesTheRefusalAndWrites(Store store, Path path) throws Exception {
        World w = new World(store);
        try {
            w.acquire(0, 0);
            w.begin(0, path);
            w.pause(0);
            w.begin(1, Path.PLAIN);
            w.fence(1, Kind.FENCE);
            w.commit(1);
            w.fence(0, Kind.FENCE_SWALLOWED);
            w.write(0);
            w.commit(0);
            w.end();
            w.check();
        } finally {
            w.abandon();
        }
    }

    private static void fenceUndoneBySavepoint(Store store, Path path) throws Exception {
        World w = new World(store);
        try {
            w.acquire(0, 0);
            w.begin(0, path);
            w.fence(0, Kind.FENCE_ROLLED_BACK);
            w.advance(true);
            w.acquire(1, 0);
            w.begin(1, Path.PLAIN);
            w.fence(1, Kind.FENCE);
            w.write(1);
            w.commit(1);
            w.write(0);
            w.commit(0);
            w.end();
            w.check();
        } finally {
            w.abandon();
        }
    }

    private static synchronized Store postgres() {
        if (postgres == null) {
            postgres = new Store(TestPostgres.shared().freshDatabase(10), Dialects.POSTGRESQL);
        }
        return postgres;
    }

    private static synchronized Store mariadb() {
        if (mariadb == null) {
            mariadb = new Store(TestMariaDb.shared().freshDatabase(10), Dialects.MARIADB);
        }
        return mariadb;
    }

    private static void run(ActionChain<World> chain, Store store, AtomicLong chains) throws Exception {
        World.next = new World(store);
        World w = World.next;
        try {
            chain.run();
            w.end();
            w.check();
        } catch (AssertionError e) {
            throw new AssertionError("after " + chain.transformations() + ": " + e.getMessage(), e);
        } finally {
            w.abandon();
        }
        chains.incrementAndGet();
    }

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        return ActionChain.<World>startWith(() -> World.next)
                .withAction(
                        2,
                        step(
                                "acquire",
                                w -> w.all(),
                                (w, h) -> Arbitraries.frequency(Tuple.of(3, 0), Tuple.of(1, 1))
                                        .map(r -> Transformer.mutate("acquire " + h + " " + r, x -> x.acquire(h, r)))))
                .withAction(1, simple("renew", World::withLease, World::renew))
                .withAction(1, simple("release", World::withLease, World::release))
                .withAction(
                        2,
                        step(
                                "advance the clock by ttl / 2 (1: by ttl)",
                                w -> List.of(0, 1),
                                (w, i) -> Arbitraries.just(Transformer.mutate("advance " + i, x -> x.advance(i == 1)))))
                .withAction(
                        4,
                        simple(
                                "pause past the lease, a rival acquires it and writes",
                                World::withSession,
                                World::pause))
                .withAction(
                        4,
                        step(
                                "begin",
                                World::canBegin,
                                (w, h) -> Arbitraries.of(Path.values())
                                        .map(p -> Transformer.mutate(
                                                "begin " + h + " " + p, x -> call(() -> x.begin(h, p))))))
                .withAction(2, simple("fence", w -> w.ready(true), (w, h) -> w.fence(h, Kind.FENCE)))
                .withAction(
                        3,
                        simple(
                                "fence in a savepoint rolled back",
                                World::onTheEngine,
                                (w, h) -> w.fence(h, Kind.FENCE_ROLLED_BACK)))
                .withAction(
                        3,
                        simple(
                                "fence, a refusal caught",
                                World::onTheEngine,
                                (w, h) -> w.fence(h, Kind.FENCE_SWALLOWED)))
                .withAction(4, simple("write", World::canWrite, World::write))
                .withAction(3, simple("commit", w -> w.ready(true), World::commit))
                .withAction(1, simple("rollback", w -> w.ready(false), World::rollback))
                .withMaxTransformations(MOVES);
    }

    interface Move {
        void on(World w, int holder);
    }

    interface Transformers {
        Arbitrary<Transformer<World>> of(World w, int holder);
    }

    /** An action on one of the holders {@code eligible} names in the state it is generated from. */
    private static Action<World> step(String name, Function<World, List<Integer>> eligible, Transformers transformers) {
        return new Action.Dependent<>() {
            @Override
            public boolean precondition(World w) {
                return !eligible.apply(w).isEmpty();
            }

            @Override
            public Arbitrary<Transformer<World>> transformer(World w) {
                return Arbitraries.of(eligible.apply(w)).flatMap(h -> transformers.of(w, h));
            }
        };
    }

    private static Action<World> simple(String name, Function<World, List<Integer>> eligible, Move move) {
        return step(name, eligible, (w, h) -> Arbitraries.just(Transformer.mutate(name + " " + h, x -> move.on(x, h))));
    }

    /** Where a holder's transaction runs. */
    enum Path {
        /** {@link Fence#check} on a connection the caller manages. */
        PLAIN,
        /** A per-event handler's {@code Tx.fence} in the engine's transaction. */
        HANDLER,
        /** A batch handler's {@code BatchTx.fence}. */
        BATCH,
        /** {@link Fence#check} on a per-event handler's {@code tx.connection()}. */
        HANDLER_CHECK,
        /**
         * {@link Fence#check} on a {@link KeyTransaction}'s connection (a fresh key per transaction), the
         * commit its {@code complete}.
         */
        KEY
    }

    /** The database, the consumers of the engine's paths (built once per database), and the open sessions. */
    static final class Store {
        final TestDatabase db;
        final Dialect dialect;
        final IdempotentConsumer handler;
        final IdempotentConsumer batch;
        final IdempotentConsumer handlerCheck;
        final IdempotencyKeys keys;
        final Map<String, Session> sessions = new ConcurrentHashMap<>();
        final AtomicLong runs = new AtomicLong();
        final AtomicLong commits = new AtomicLong();
        final AtomicLong refused = new AtomicLong();
        final AtomicLong takeovers = new AtomicLong();

        Store(TestDatabase db, Dialect dialect) {
            this.db = db;
            this.dialect = dialect;
            db.execute(
                    dialect == Dialects.POSTGRESQL
                            ? "CREATE TABLE fence_ledger (id bigserial PRIMARY KEY, resource varchar(100) NOT NULL,"
                                    + " session varchar(100) NOT NULL, token bigint NOT NULL)"
                            : "CREATE TABLE fence_ledger (id bigint AUTO_INCREMENT PRIMARY KEY, resource varchar(100) NOT NULL,"
                                    + " session varchar(100) NOT NULL, token bigint NOT NULL)");
            // No conflict retries: a retry would run the handler again, which waits for the model's steps.
            handler = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("fence-handler")
                    .maxConflictRetries(0)
                    .handler((d, tx) -> sessions.get(d.eventId()).drive(tx.connection(), tx::fence))
                    .build();
            batch = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("fence-batch")
                    .maxConflictRetries(0)
                    .batchHandler((claimed, tx) ->
                            sessions.get(claimed.get(0).eventId()).drive(tx.connection(), tx::fence))
                    .build();
            handlerCheck = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("fence-handler-check")
                    .maxConflictRetries(0)
                    .handler((d, tx) -> sessions.get(d.eventId())
                            .drive(tx.connection(), (r, t) -> Fence.check(tx.connection(), r, t)))
                    .build();
            // Claims that outlast any chain: the fences are under test here, not the key's own token.
            keys = IdempotencyKeys.builder()
                    .dataSource(db.dataSource())
                    .lockDuration(Duration.ofDays(1))
                    .build();
        }
    }

    interface FenceCall {
        void check(String resource, long token) throws SQLException;
    }

    enum Kind {
        FENCE,
        FENCE_ROLLED_BACK,
        FENCE_SWALLOWED,
        WRITE,
        COMMIT,
        ROLLBACK
    }

    record Command(Kind kind, CompletableFuture<Void> done) {}

    /** Thrown by a handler told to roll back: the engine rolls its transaction back. */
    static final class RollBack extends RuntimeException {
        RollBack() {
            super("the model rolls this transaction back", null, false, false);
        }
    }

    /**
     * One holder's transaction, run by a thread of its own that takes the model's commands one at a time,
     * so it stays open (paused) while other holders go on.
     */
    static final class Session {
        final String id;
        final int holder;
        final Path path;
        final String resource;
        final long token;
        final Store store;
        final BlockingQueue<Command> commands = new LinkedBlockingQueue<>();
        final CompletableFuture<Long> backend = new CompletableFuture<>();
        final CompletableFuture<Void> ended = new CompletableFuture<>();
        final AtomicLong stamps;
        volatile long commitStamp = -1;
        volatile Outcome outcome;
        // KEY: why complete refused the transaction, or null
        volatile Exception keyFailure;
        // the model's view
        boolean fenced;
        boolean fenceStands;
        int writes;
        Command blocked;
        boolean over;

        Session(String id, int holder, Path path, String resource, long token, Store store, AtomicLong stamps) {
            this.id = id;
            this.holder = holder;
            this.path = path;
            this.resource = resource;
            this.token = token;
            this.store = store;
            this.stamps = stamps;
        }

        volatile Thread thread;

        void start() {
            thread = new Thread(this::run, "fence-" + id);
            thread.setDaemon(true);
            thread.start();
        }

        private void run() {
            try {
                switch (path) {
                    case PLAIN -> {
                        try (Connection c = store.db.dataSource().getConnection()) {
                            c.setAutoCommit(false);
                            try {
                                drive(c, (r, t) -> Fence.check(c, r, t));
                            } catch (RollBack e) {
                                c.rollback();
                            } catch (Exception e) {
                                c.rollback();
                            } finally {
                                c.setAutoCommit(true);
                            }
                        }
                    }
                    case HANDLER -> outcome = store.handler.process(Delivery.of(id, "fence"));
                    case BATCH ->
                        outcome = store.batch
                                .processBatch(List.of(Delivery.of(id, "fence")))
                                .get(0);
                    case HANDLER_CHECK -> outcome = store.handlerCheck.process(Delivery.of(id, "fence"));
                    case KEY -> runKeyTransaction();
                }
                if (outcome != null && outcome.status() == Status.APPLIED) {
                    commitStamp = stamps.incrementAndGet();
                }
            } catch (Throwable t) {
                backend.completeExceptionally(t);
                ended.completeExceptionally(t);
                return;
            }
            ended.complete(null);
        }

        /** The request's code in a key transaction: the model's commands, then {@code complete} on its commit. */
        private void runKeyTransaction() throws SQLException {
            BeginResult.Started started = (BeginResult.Started) store.keys.begin("fence", id, "fence");
            try (KeyTransaction t = store.keys.transaction(started)) {
                Connection c = t.connection();
                try {
                    drive(c, (r, token) -> Fence.check(c, r, token));
                } catch (Exception e) {
                    return; // told to roll back, or a refusal not caught: closed unfinished, rolled back
                }
                try {
                    t.complete(200, null);
                    commitStamp = stamps.incrementAndGet();
                } catch (StaleFencingTokenException | SQLException e) {
                    keyFailure = e;
                }
            }
        }

        /** The transaction's body, on any path: runs the model's commands until commit or rollback. */
        void drive(Connection c, FenceCall fence) throws Exception {
            try (PreparedStatement ps = c.prepareStatement(
                            store.dialect == Dialects.POSTGRESQL
                                    ? "SELECT pg_backend_pid()"
                                    : "SELECT CONNECTION_ID()");
                    ResultSet rs = ps.executeQuery()) {
                rs.next();
                backend.complete(rs.getLong(1));
            }
            while (true) {
                Command cmd = commands.take();
                try {
                    switch (cmd.kind()) {
                        case FENCE -> fence.check(resource, token);
                        case FENCE_ROLLED_BACK -> {
                            Savepoint sp = c.setSavepoint();
                            fence.check(resource, token);
                            c.rollback(sp);
                        }
                        case FENCE_SWALLOWED -> {
                            try {
                                fence.check(resource, token);
                            } catch (StaleFencingTokenException e) {
                                // a handler that catches the refusal and goes on
                            }
                        }
                        case WRITE -> {
                            try (PreparedStatement ps = c.prepareStatement(
                                    "INSERT INTO fence_ledger (resource, session, token) VALUES (?, ?, ?)")) {
                                ps.setString(1, resource);
                                ps.setString(2, id);
                                ps.setLong(3, token);
                                ps.executeUpdate();
                            }
                        }
                        case COMMIT -> {
                            if (path == Path.PLAIN) {
                                // Stamped while the fence row is still locked: commits of one resource get stamps
                                // in the order they happen.
                                commitStamp = stamps.incrementAndGet();
                                c.commit();
                            }
                            return; // on the engine's paths, the engine commits
                        }
                        case ROLLBACK -> throw new RollBack();
                    }
                } catch (RollBack e) {
                    throw e;
                } catch (Exception e) {
                    cmd.done().completeExceptionally(e);
                    throw e;
                }
                cmd.done().complete(null);
            }
        }
    }

    /** The lease table as the model keeps it. */
    static final class LeaseRow {
        int owner = -1;
        long token;
        Instant expiresAt;
    }

    static final class Holder {
        Lease lease;
        Session session;
    }

    /** One chain's world: the leases, the holders, their sessions, and what committed. */
    static final class World {
        static World next;

        final Store store;
        final MutableClock clock = MutableClock.startingNow();
        final Leases leases;
        final String run;
        final Holder[] holders = new Holder[HOLDERS];
        final LeaseRow[] rows = new LeaseRow[RESOURCES];
        final List<Session> sessions = new ArrayList<>();
        final AtomicLong stamps = new AtomicLong();
        final List<String> log = new ArrayList<>();
        int sessionCount;

        World(Store store) {
            this.store = store;
            this.run = "run" + store.runs.incrementAndGet();
            this.leases = Leases.builder()
                    .dataSource(store.db.dataSource())
                    .clock(clock)
                    .build();
            for (int i = 0; i < HOLDERS; i++) {
                holders[i] = new Holder();
            }
            for (int r = 0; r < RESOURCES; r++) {
                rows[r] = new LeaseRow();
            }
        }

        String resource(int r) {
            return run + "-resource-" + r;
        }

        int resourceIndex(String name) {
            return name.endsWith("-0") ? 0 : 1;
        }

        void acquire(int h, int r) {
            settle();
            LeaseRow row = rows[r];
            boolean free = row.owner < 0 || !clock.instant().isBefore(row.expiresAt);
            Optional<Lease> got = leases.acquire(resource(r), "holder-" + h, TTL);
            assertThat(got.isPresent())
                    .as("acquire %s by holder %d: the model has it %s", resource(r), h, free ? "free" : "held")
                    .isEqualTo(free);
            if (got.isPresent()) {
                if (row.owner >= 0) {
                    store.takeovers.incrementAndGet();
                }
                assertThat(got.get().token())
                        .as("the token after %d", row.token)
                        .isEqualTo(row.token + 1);
                row.owner = h;
                row.token = got.get().token();
                row.expiresAt = got.get().expiresAt();
                holders[h].lease = got.get();
            }
        }

        void renew(int h) {
            Mine mine = mine(h);
            if (mine == null) {
                return;
            }
            Optional<Lease> renewed = leases.renew(mine.lease(), TTL);
            mine.assertDoneAsModelled("renew", renewed.isPresent());
            if (renewed.isPresent()) {
                mine.row().expiresAt = renewed.get().expiresAt();
                holders[h].lease = renewed.get();
            }
        }

        void release(int h) {
            Mine mine = mine(h);
            if (mine == null) {
                return;
            }
            mine.assertDoneAsModelled("release", leases.release(mine.lease()));
            if (mine.held()) {
                mine.row().owner = -1;
            }
        }

        /** Holder {@code h}'s lease, its row in the model and whether the model says {@code h} still holds it; null if none. */
        private Mine mine(int h) {
            Lease lease = holders[h].lease;
            if (lease == null) {
                return null;
            }
            LeaseRow row = rows[resourceIndex(lease.name())];
            return new Mine(h, lease, row, row.owner == h && row.token == lease.token());
        }

        private record Mine(int holder, Lease lease, LeaseRow row, boolean held) {
            /** A renewal or a release of the lease is done exactly when the model says its holder still holds it. */
            void assertDoneAsModelled(String what, boolean done) {
                assertThat(done)
                        .as(
                                "%s token %d by holder %d: the lease's token is %d, owner %d",
                                what, lease.token(), holder, row.token, row.owner)
                        .isEqualTo(held);
            }
        }

        /**
         * Holder {@code h} pauses with its transaction open: the clock passes the expiry of the lease its
         * transaction writes under, the next holder acquires that lease and, if it has no transaction
         * open, writes under it at once (fence, write, commit; what blocks waits).
         */
        void pause(int h) {
            Session s = holders[h].session;
            if (s == null) {
                return;
            }
            int r = resourceIndex(s.resource);
            if (rows[r].owner >= 0 && clock.instant().isBefore(rows[r].expiresAt)) {
                clock.advance(Duration.between(clock.instant(), rows[r].expiresAt));
            }
            int rival = (h + 1) % HOLDERS;
            acquire(rival, r);
            Holder next = holders[rival];
            if (next.lease != null && next.lease.token() == rows[r].token && next.session == null) {
                // the rival writes at once, in a transaction of its own (blocked behind h's fence, it waits)
                begin(rival, Path.PLAIN);
                fence(rival, Kind.FENCE);
                write(rival);
                commit(rival);
            }
        }

        void advance(boolean wholeTtl) {
            clock.advance(wholeTtl ? TTL : TTL.dividedBy(2));
        }

        void begin(int h, Path path) {
            Holder holder = holders[h];
            if (holder.lease == null || holder.session != null) {
                return;
            }
            Session s = new Session(
                    run + "-s" + (++sessionCount), h, path, holder.lease.name(), holder.lease.token(), store, stamps);
            store.sessions.put(s.id, s);
            sessions.add(s);
            holder.session = s;
            s.start();
            try {
                s.backend.get(20, TimeUnit.SECONDS);
            } catch (Exception e) {
                throw new IllegalStateException("session " + s.id + " did not start", e);
            }
        }

        List<Integer> all() {
            return holders(h -> true);
        }

        List<Integer> withLease() {
            return holders(h -> holders[h].lease != null);
        }

        List<Integer> withSession() {
            return holders(h -> holders[h].session != null);
        }

        List<Integer> canBegin() {
            return holders(h -> holders[h].lease != null && holders[h].session == null);
        }

        /** Holders whose session takes a command now; {@code mayWait}: one that may wait for a lock. */
        List<Integer> ready(boolean mayWait) {
            settle();
            return holders(h -> session(h, mayWait) != null);
        }

        List<Integer> onTheEngine() {
            return holders(h -> session(h, true) != null && holders[h].session.path != Path.PLAIN);
        }

        List<Integer> canWrite() {
            return holders(h -> session(h, false) != null
                    && (holders[h].session.path == Path.PLAIN
                            ? holders[h].session.fenceStands
                            : holders[h].session.fenced));
        }

        private List<Integer> holders(java.util.function.IntPredicate p) {
            List<Integer> hs = new ArrayList<>();
            for (int h = 0; h < HOLDERS; h++) {
                if (p.test(h)) {
                    hs.add(h);
                }
            }
            return hs;
        }

        /** A session open, not blocked, and (for what may wait on a lock) no other session blocked. */
        private Session session(int h, boolean mayWait) {
            Session s = holders[h].session;
            if (s == null || s.blocked != null) {
                return null;
            }
            if (mayWait && sessions.stream().anyMatch(o -> o.blocked != null)) {
                return null; // one waiter at a time: commits then happen in the order their stamps say
            }
            return s;
        }

        void fence(int h, Kind how) {
            settle();
            Session s = session(h, true);
            if (s == null || (how != Kind.FENCE && s.path == Path.PLAIN)) {
                return;
            }
            send(s, how);
        }

        void write(int h) {
            settle();
            Session s = session(h, false);
            if (s == null || !(s.path == Path.PLAIN ? s.fenceStands : s.fenced)) {
                return;
            }
            send(s, Kind.WRITE);
        }

        void commit(int h) {
            settle();
            Session s = session(h, true);
            if (s != null) {
                send(s, Kind.COMMIT);
            }
        }

        void rollback(int h) {
            settle();
            Session s = session(h, false);
            if (s != null) {
                send(s, Kind.ROLLBACK);
            }
        }

        private void send(Session s, Kind kind) {
            log.add(s.id + " " + kind);
            Command cmd = new Command(kind, new CompletableFuture<>());
            s.commands.add(cmd);
            if (!finishedOrWaiting(s, cmd)) {
                s.blocked = cmd;
                return;
            }
            observe(s, cmd);
        }

        // Done (the session's thread has answered, or ended), or waiting for a lock another session holds.
        private boolean finishedOrWaiting(Session s, Command cmd) {
            try {
                await().pollInterval(Duration.ofMillis(2))
                        .atMost(Duration.ofSeconds(30))
                        .until(() -> settled(s, cmd) || (waitsForLock(s) && !settled(s, cmd)));
            } catch (org.awaitility.core.ConditionTimeoutException e) {
                StringBuilder stack = new StringBuilder();
                for (StackTraceElement el : s.thread.getStackTrace()) {
                    stack.append("\n  at ").append(el);
                }
                throw new AssertionError(
                        s.id + " (backend " + s.backend.join() + ") neither answered " + cmd.kind()
                                + " nor waits for a lock within 30 s; steps: " + log + "; the database's transactions: "
                                + transactions() + "; its thread:" + stack,
                        e);
            }
            return settled(s, cmd);
        }

        private static boolean settled(Session s, Command cmd) {
            return cmd.done().isDone() || s.ended.isDone();
        }

        private List<String> transactions() {
            List<String> trx = new ArrayList<>();
            String sql = store.dialect == Dialects.POSTGRESQL
                    ? "SELECT pid, state, wait_event_type, query FROM pg_stat_activity"
                    : "SELECT id, state, command, info FROM information_schema.PROCESSLIST";
            try (Connection c = store.db.dataSource().getConnection();
                    PreparedStatement ps = c.prepareStatement(sql);
                    ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    trx.add(rs.getString(1) + " " + rs.getString(2) + " " + rs.getString(3) + " " + rs.getString(4));
                }
            } catch (SQLException e) {
                trx.add(e.toString());
            }
            return trx;
        }

        private boolean waitsForLock(Session s) throws Exception {
            long backend = s.backend.get();
            String sql = store.dialect == Dialects.POSTGRESQL
                    ? "SELECT count(*) FROM pg_stat_activity WHERE pid = ? AND wait_event_type = 'Lock'"
                    // Not INNODB_TRX: InnoDB refreshes that table only once nobody has read it for 100 ms, which
                    // this polling never lets happen. A statement of these running past 50 ms waits for a lock
                    // (taken for one when it merely runs slowly, it is observed when it answers: no harm).
                    : "SELECT count(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND COMMAND = 'Query'"
                            + " AND TIME_MS > 50";
            try (Connection c = store.db.dataSource().getConnection();
                    PreparedStatement ps = c.prepareStatement(sql)) {
                ps.setLong(1, backend);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    return rs.getLong(1) > 0;
                }
            }
        }

        /** Takes in what blocked sessions did since, now that others may have let them go. */
        void settle() {
            boolean again = true;
            while (again) {
                again = false;
                for (Session s : sessions) {
                    if (s.blocked != null && finishedOrWaiting(s, s.blocked)) {
                        Command cmd = s.blocked;
                        s.blocked = null;
                        observe(s, cmd);
                        again = true;
                    }
                }
            }
        }

        // A command has finished: what it did to the model.
        private void observe(Session s, Command cmd) {
            boolean ends = cmd.kind() == Kind.COMMIT
                    || cmd.kind() == Kind.ROLLBACK
                    || s.ended.isDone()
                    || cmd.done().isCompletedExceptionally();
            if (ends) {
                try {
                    s.ended.get(30, TimeUnit.SECONDS);
                } catch (Exception e) {
                    throw new AssertionError("session " + s.id + " failed: " + e, e);
                }
                s.over = true;
                holders[s.holder].session = null;
                Throwable failure = failureOf(s, cmd);
                if (failure != null) {
                    log.add(s.id + " failed: " + failure);
                    expectRefusalOrConflict(s, failure);
                } else if (cmd.kind() == Kind.COMMIT) {
                    log.add(s.id + " committed #" + s.commitStamp);
                    store.commits.incrementAndGet();
                    assertThat(s.commitStamp).as("%s committed, stamped", s.id).isPositive();
                }
                return;
            }
            switch (cmd.kind()) {
                case FENCE -> {
                    s.fenced = true;
                    s.fenceStands = true;
                }
                case FENCE_ROLLED_BACK, FENCE_SWALLOWED -> s.fenced = true;
                case WRITE -> s.writes++;
                default -> throw new IllegalStateException(cmd.kind().name());
            }
        }

        private static Throwable failureOf(Session s, Command cmd) {
            if (s.keyFailure != null) {
                return s.keyFailure;
            }
            if (cmd.done().isCompletedExceptionally()) {
                try {
                    cmd.done().join();
                } catch (Exception e) {
                    return e.getCause();
                }
            }
            if (s.outcome != null && s.outcome.status() != Status.APPLIED) {
                for (Throwable t = s.outcome.failure(); t != null; t = t.getCause()) {
                    if (t instanceof RollBack) {
                        return null;
                    }
                }
                return s.outcome.failure();
            }
            return null;
        }

        // A refusal must name the session's token, a newer one and the resource; a deadlock or lock wait
        // timeout is the database's own refusal, and rolls everything back too.
        private void expectRefusalOrConflict(Session s, Throwable failure) {
            Throwable t = failure;
            while (t != null && !(t instanceof StaleFencingTokenException) && !(t instanceof SQLException)) {
                t = t.getCause();
            }
            if (t instanceof StaleFencingTokenException stale) {
                store.refused.incrementAndGet();
                LeaseRow row = rows[resourceIndex(s.resource)];
                assertThat(stale.resource()).as("the refused resource").isEqualTo(s.resource);
                assertThat(stale.token()).as("the refused token").isEqualTo(s.token);
                assertThat(stale.newest())
                        .as("the newest token: newer than the refused one, no newer than any issued")
                        .isGreaterThan(s.token)
                        .isLessThanOrEqualTo(row.token);
                assertThat(stale.getMessage())
                        .contains(s.resource, String.valueOf(s.token), String.valueOf(stale.newest()));
            } else if (t instanceof SQLException e && store.dialect.isTransientConflict(e)) {
                log.add(s.id + " conflict " + e.getSQLState());
            } else {
                throw new AssertionError(
                        "session " + s.id + " failed otherwise than a stale token or a conflict", failure);
            }
        }

        /**
         * Ends every open session with a rollback, the blocked ones once they are let go. A blocked session's
         * backend may still show its lock wait for a moment after the session it waited for rolled back (on a
         * loaded machine the woken backend is not scheduled at once), so when only blocked sessions are left this
         * waits for one of them to answer rather than counting rounds.
         */
        void end() {
            while (sessions.stream().anyMatch(s -> !s.over)) {
                settle();
                boolean rolledBack = false;
                for (Session s : sessions) {
                    if (!s.over && s.blocked == null) {
                        send(s, Kind.ROLLBACK);
                        rolledBack = true;
                    }
                }
                List<Session> blocked = sessions.stream().filter(s -> !s.over).toList();
                if (!rolledBack && !blocked.isEmpty()) {
                    try {
                        await().pollInterval(Duration.ofMillis(2))
                                .atMost(Duration.ofSeconds(30))
                                .until(() -> blocked.stream().anyMatch(s -> settled(s, s.blocked)));
                    } catch (org.awaitility.core.ConditionTimeoutException e) {
                        throw new AssertionError(
                                "sessions still open, each waiting for a lock, none let go"
                                        + " within 30 s: "
                                        + blocked.stream().map(s -> s.id).toList()
                                        + "; the database's transactions: " + transactions(),
                                e);
                    }
                }
            }
        }

        /**
         * The invariants on what committed, in commit order: per resource, every committed write's token is
         * at least the newest accepted by an earlier commit; and the ledger holds exactly the committed writes.
         */
        void check() {
            List<Session> committed = sessions.stream()
                    .filter(s -> s.commitStamp > 0)
                    .sorted(Comparator.comparingLong(s -> s.commitStamp))
                    .toList();
            Map<String, Long> newest = new HashMap<>();
            Map<String, String> by = new HashMap<>();
            for (Session s : committed) {
                long accepted = newest.getOrDefault(s.resource, 0L);
                if (s.writes > 0 && s.token < accepted) {
                    throw new AssertionError("stale write accepted: " + s.id + " (" + s.path + ") committed "
                            + s.writes + " write(s) to " + s.resource + " with token " + s.token + " after "
                            + by.get(s.resource) + " had token " + accepted + " accepted; steps: " + log);
                }
                if (s.fenced && s.token >= accepted) {
                    newest.put(s.resource, s.token);
                    by.put(s.resource, s.id);
                }
            }
            Map<String, Long> expected = new HashMap<>();
            for (Session s : committed) {
                if (s.writes > 0) {
                    expected.put(s.id, (long) s.writes);
                }
            }
            Map<String, Long> actual = new HashMap<>();
            try (Connection c = store.db.dataSource().getConnection();
                    PreparedStatement ps = c.prepareStatement(
                            "SELECT session, count(*) FROM fence_ledger WHERE session LIKE ? GROUP BY session")) {
                ps.setString(1, run + "-%");
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        actual.put(rs.getString(1), rs.getLong(2));
                    }
                }
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            assertThat(actual)
                    .as("the ledger's writes per session: those committed, once; steps: %s", log)
                    .isEqualTo(expected);
        }

        /** After a failure: lets every session's thread go, so none waits forever. */
        void abandon() {
            for (Session s : sessions) {
                store.sessions.remove(s.id);
                if (!s.over) {
                    s.commands.add(new Command(Kind.ROLLBACK, new CompletableFuture<>()));
                }
            }
        }
    }
}
