package dev.once.core;

import static dev.once.testsupport.StateMachines.move;
import static org.assertj.core.api.Assertions.assertThat;

import dev.once.OnceException;
import dev.once.StaleFencingTokenException;
import dev.once.jdbc.Dialects;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.KeyTransaction;
import dev.once.retention.IdempotencyKeyPruner;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.StateMachines;
import dev.once.testsupport.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import java.util.function.Supplier;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.ActionChainArbitrary;

/**
 * {@link IdempotencyKeys} against a model, through its public API only: random sequences of what
 * callers and time do to two keys (a begin with the request's fingerprint or another one; a
 * started caller completing, completing in {@link IdempotencyKeys#transaction} with an effect row
 * on its connection, failing for good or failing retryably, possibly long after its claim lapsed or
 * twice; the clock moving by seconds or hours; the pruner running with its shortest retention).
 * Every begin must answer what the model says (started, replay of the last accepted result, in
 * progress, mismatch), every finish must be accepted exactly when its caller still holds the key's
 * current claim, a refused finish changes nothing, and the effect rows are exactly those of the
 * accepted transactional completes.
 *
 * <p>Found on its first run: a caller stalled past its claim and past the retention, the pruner
 * deleted the key, a retry claimed it anew with fencing token 1 again, and the stalled caller's
 * {@code complete} (token 1) was accepted as the successor's, overwriting its claim; the successor's
 * own {@code complete} was then refused as "already finished". Shrunk (MariaDB) to: begin k0, advance 61 s,
 * prune, begin k0, complete (the first caller).
 *
 * <p><b>The caller's own transaction</b> ({@code *CallerTransaction}). A caller also opens a
 * transaction on a connection of its own and finishes started callers in it with
 * {@link IdempotencyKeys#complete(Connection, BeginResult.Started, int, byte[])} and
 * {@link IdempotencyKeys#fail(Connection, BeginResult.Started, boolean, int, byte[])}, each after
 * writing its effect row there (a retryable failure writes none), with or without a savepoint first;
 * refused, it rolls back to that savepoint, or the whole transaction. It takes savepoints, rolls back
 * to them, releases them, commits and rolls back, while the other moves run on other connections,
 * long after a claim lapsed and around the pruner. For each of those the model says whether it must,
 * may or cannot wait for the open transaction's locks. PostgreSQL: a begin of a key whose finish the
 * transaction holds waits, so does a finish by the key's committed holder (an update skips a row
 * whose committed version does not match without waiting), and the pruner skips locked rows; a
 * rollback to a savepoint releases the row of a finish made after it, except for a call already
 * waiting once the finish's own savepoint was released (it waits for the top transaction then). MariaDB:
 * every key row a statement of the transaction touched (a refused finish too) stays locked to its end,
 * a rollback to a savepoint notwithstanding, unless the savepoint came before the transaction's first
 * statement, when InnoDB rolls its whole transaction back; a finish of a missing key locks the gap,
 * which may hold up the insert of another; the pruner's scan waits for the locked rows it deletes and
 * may for others. A begin, and a finish in a transaction of its own, wait at most the keys' lock wait
 * ({@value #LOCK_WAIT_MILLIS} ms; MariaDB keeps a whole second): where the model says they wait, a begin
 * must answer in progress (now plus the lock wait) and such a finish fail having saved nothing, both
 * within that and some slack; a move begins a key the transaction holds on purpose (a retry of a
 * request whose transaction is still open), and once it ends the begins answer as the model says
 * (the committed result replayed; after a rollback the key in progress, or taken over). The calls
 * that still wait (a finish in {@link KeyTransaction}, the pruner) are judged when those locks go,
 * against the model then. After every move the committed effect rows are exactly those of the
 * committed finishes that wrote one. {@value #TX_TRIES} tries per database in CI; {@code -Donce.keysTx.tries=N} runs N
 * distinct chains in each try.
 *
 * <p>No hole found in the library (480 chains per database). Wrong in the model first, each seen in a
 * counterexample: that InnoDB keeps locks after any rollback to a savepoint; that PostgreSQL's finish
 * waits for a locked row it does not match; that a rollback to a savepoint wakes a call waiting for a
 * row updated in a savepoint released since (open, savepoint, begin k0, fail in the transaction after
 * a savepoint, begin k0 waits, release the inner savepoint, roll back to the outer: it still waited). Red on purpose, each restored:
 * {@code complete(Connection, …)} committing the caller's connection (an effect row committed while
 * the caller's transaction was open, both databases, first run); {@code keyFinish} without its
 * {@code locked_until} match (the stalled caller of a pruned and reclaimed key finished it, on
 * MariaDB inside the caller's transaction; first run); PostgreSQL's pruner without {@code SKIP
 * LOCKED} (it waited for a transaction holding a finished, lapsed key: begin k1 with another
 * fingerprint, advance 1 s, open, begin k1 (mismatch), advance 61 s, fail retryably in the
 * transaction, prune; found with
 * {@code -Donce.keysTx.tries=10}, not in CI's tries); the keys' statements without their lock wait
 * (a begin of a key the transaction holds got no answer in 4 s: open, begin k1, begin k0, fail with an
 * effect in the transaction after a savepoint, begin k1; both databases, first run).
 */
class IdempotencyKeysStateMachineTest {

    static final Duration LOCK = Duration.ofSeconds(30);
    static final Duration RETENTION = Duration.ofMinutes(1); // the shortest the pruner allows
    static final String SCOPE = "s";
    /** Tries per database of the caller-transaction properties (CI); {@code -Donce.keysTx.tries=N} runs N chains in each. */
    static final int TX_TRIES = 60;

    static final int TX_CHAINS = Integer.getInteger("once.keysTx.tries", 1);
    /** How long a call on another connection may take to return or to be seen waiting for the caller's transaction. */
    static final Duration WAIT = Duration.ofSeconds(10);
    /** The keys' lock wait: how long a begin, or a finish of its own, waits for the caller's transaction. */
    static final long LOCK_WAIT_MILLIS = 100;

    static final Duration LOCK_WAIT = Duration.ofMillis(LOCK_WAIT_MILLIS);
    /** Beyond the lock wait the database keeps, for scheduling on a loaded machine (without it: forever, or 50 s). */
    static final Duration SLACK = Duration.ofSeconds(4);

    // Per thread: a chain that jqwik's bounded shrinking left running in the background has its own
    // tables, and on MariaDB the lock waits on its database (what lockWait() reads) are its own.
    private static final StateMachines.ThreadDatabases databases = new StateMachines.ThreadDatabases(4);

    @AfterContainer
    static void close() {
        World.abandonLast();
        databases.close();
    }

    @Property(tries = 150)
    void postgresql(@ForAll("chains") ActionChain<World> chain) {
        run(List.of(chain), databases::postgres);
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = 60)
    void mariadb(@ForAll("chains") ActionChain<World> chain) {
        run(List.of(chain), databases::mariadb);
    }

    @Property(tries = TX_TRIES)
    void postgresqlCallerTransaction(@ForAll("callerTransactions") List<ActionChain<World>> chains) {
        run(chains, databases::postgres);
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = TX_TRIES)
    void mariadbCallerTransaction(@ForAll("callerTransactions") List<ActionChain<World>> chains) {
        run(chains, databases::mariadb);
    }

    /**
     * Runs each chain on a new world of this thread's database: jqwik leaves a shrinking step that
     * outlasts its time bound running in its thread and goes on, and a chain run beside it must share
     * neither its tables nor its transaction's locks.
     */
    private static void run(List<ActionChain<World>> chains, Supplier<TestDatabase> db) {
        for (ActionChain<World> chain : chains) {
            World.next.set(new World(db.get()));
            chain.run().end();
        }
    }

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        return keyMoves().withMaxTransformations(16);
    }

    /** What callers and time do to the keys, each caller's finish in a transaction of its own. */
    private static ActionChainArbitrary<World> keyMoves() {
        return ActionChain.<World>startWith(World.next::get)
                .withAction(
                        4, move(w -> w.pending == null, Arbitraries.integers().between(0, 3), "begin", World::begin))
                .withAction(
                        4,
                        move(
                                w -> w.pending == null && !w.callers.isEmpty(),
                                Arbitraries.integers().between(0, 299),
                                "finish",
                                World::finish))
                .withAction(2, move(w -> true, Arbitraries.integers().between(0, 4), "advance", World::advance))
                .withAction(1, move(w -> w.pending == null, Arbitraries.just(0), "prune", (w, n) -> w.prune()));
    }

    /** {@value #TX_TRIES} tries of {@link #TX_CHAINS} chains each (shrinking keeps the failing one). */
    @Provide
    Arbitrary<List<ActionChain<World>>> callerTransactions() {
        return withCallerTransaction().list().ofSize(TX_CHAINS);
    }

    /** The moves of {@link #chains()}, and a caller running its own transaction on its own connection. */
    private static Arbitrary<ActionChain<World>> withCallerTransaction() {
        Arbitrary<InTx> finishes = Combinators.combine(
                        Arbitraries.integers().between(0, 9), Arbitraries.of(IN_TX), Arbitraries.of(false, true))
                .as(InTx::new);
        Arbitrary<Integer> savepoint = Arbitraries.integers().between(0, 3);
        return keyMoves()
                .withAction(2, move(w -> w.tx == null, Arbitraries.just(0), "open", (w, n) -> w.open()))
                .withAction(
                        5,
                        move(
                                w -> w.tx != null && w.pending == null && !w.callers.isEmpty(),
                                finishes,
                                "finish in the caller's transaction",
                                World::finishInTx))
                .withAction(
                        2,
                        move(
                                w -> w.tx != null
                                        && w.pending == null
                                        && !w.held().isEmpty(),
                                Arbitraries.integers().between(0, 3),
                                "begin a key the caller's transaction holds",
                                World::beginHeld))
                .withAction(2, move(w -> w.tx != null, Arbitraries.just(0), "savepoint", (w, n) -> w.savepoint()))
                .withAction(
                        2,
                        move(w -> w.tx != null && !w.savepoints.isEmpty(), savepoint, "rollback to", World::rollbackTo))
                .withAction(1, move(w -> w.tx != null && !w.savepoints.isEmpty(), savepoint, "release", World::release))
                .withAction(2, move(w -> w.tx != null, Arbitraries.just(0), "commit", (w, n) -> w.commit()))
                .withAction(1, move(w -> w.tx != null, Arbitraries.just(0), "roll back", (w, n) -> w.rollBack()))
                .withMaxTransformations(24);
    }

    /** A key's row as the model sees it; a new object each time the key is created anew. */
    static final class Row {
        final String key;
        final String fingerprint;
        final Instant createdAt;
        String state = "processing";
        Caller holder;
        Instant lockedUntil;
        int status;
        byte[] body;

        Row(String key, String fingerprint, Instant createdAt) {
            this.key = key;
            this.fingerprint = fingerprint;
            this.createdAt = createdAt;
        }

        /** What the pruner deletes at {@code now}: created before the retention, and finished or past its claim. */
        boolean prunable(Instant now) {
            return createdAt.isBefore(now.minus(RETENTION))
                    && (!state.equals("processing") || lockedUntil.isBefore(now));
        }
    }

    /** A caller that got {@link BeginResult.Started}, and the row it was started on. */
    record Caller(String key, Row row, BeginResult.Started started) {}

    static final String COMPLETE = "complete with an effect";
    static final String FAIL = "fail with an effect";
    static final String RETRY = "fail retryably";
    static final String[] IN_TX = {COMPLETE, FAIL, RETRY};

    /**
     * A finish on the caller's connection inside its transaction: which started caller (modulo their
     * number), how, and whether the caller takes a savepoint first (and rolls back to it when the
     * finish is refused) or rolls the whole transaction back on a refusal.
     */
    record InTx(int caller, String how, boolean guarded) {}

    /**
     * A finish the caller's open transaction holds: what its commit makes of the key, and how many
     * savepoints enclosed it, 0 once it belongs to the top transaction (see {@link World#release}).
     */
    record Finish(Caller caller, String how, int status, byte[] body, int depth) {}

    /** Whether a call on another connection must, may or cannot wait for the caller's transaction. */
    enum Waits {
        YES,
        MAYBE,
        NO
    }

    /** What a call on another connection returned or threw. */
    record Result(Object value, RuntimeException error) {
        Object get() {
            if (error != null) {
                throw error;
            }
            return value;
        }
    }

    /** A call on another connection seen waiting for the caller's transaction; judged when it returns. */
    record Pending(String what, String key, Future<Result> result, Consumer<Result> judge) {}

    static final class World {
        /** The world of the chain this thread runs. */
        static final ThreadLocal<World> next = new ThreadLocal<>();
        /** This thread's last world, which a failed chain may leave with its transaction open. */
        private static final ThreadLocal<World> last = new ThreadLocal<>();

        final MutableClock clock = MutableClock.startingNow();
        final Instant start = clock.instant();
        final IdempotencyKeys keys;
        final IdempotencyKeyPruner pruner;
        final Map<String, Row> rows = new HashMap<>();
        final List<Caller> callers = new ArrayList<>();
        // "key/status" of each committed effect row
        final List<String> effects = new ArrayList<>();
        final TestDatabase db;
        final boolean postgres;
        int finishes;
        // The caller's transaction: its connection (null when none is open), the server's id of it, its
        // savepoints with the number of finishes before each, and its finishes not rolled back.
        Connection tx;
        long session;
        final List<Savepoint> savepoints = new ArrayList<>();
        final List<Integer> marks = new ArrayList<>();
        final List<Finish> live = new ArrayList<>();
        // InnoDB keeps the row locks of a statement to the transaction's end, rollback to a savepoint
        // or not, and locks the gap where a missing key would be: the keys whose rows the caller's
        // transaction touched, and whether it touched a missing one. Except that a rollback to a
        // savepoint taken before the transaction's first statement reached InnoDB rolls InnoDB's
        // whole transaction back, and releases them all: whether it has reached InnoDB, and, per
        // savepoint, whether it had.
        final Set<String> touched = new HashSet<>();
        boolean touchedMissing;
        boolean inInnoDb;
        final List<Boolean> afterInnoDb = new ArrayList<>();
        Pending pending;
        // PostgreSQL: the waiting call waits for the top transaction, not the savepoint that locked its row
        boolean pendingUntilEnd;
        // The calls of other callers while the caller's transaction is open: they may wait for its locks.
        final ExecutorService elsewhere = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "other-caller");
            t.setDaemon(true);
            return t;
        });

        World(TestDatabase db) {
            abandonLast();
            last.set(this);
            this.db = db;
            db.execute(
                    "DELETE FROM once_idempotency_key",
                    "CREATE TABLE IF NOT EXISTS key_effect (idem_key varchar(10) NOT NULL, status int NOT NULL)",
                    "DELETE FROM key_effect");
            postgres = Dialects.detect(db.dataSource()).equals(Dialects.POSTGRESQL);
            keys = IdempotencyKeys.builder()
                    .dataSource(db.dataSource())
                    .clock(clock)
                    .lockDuration(LOCK)
                    .lockWait(LOCK_WAIT)
                    .build();
            pruner = IdempotencyKeyPruner.builder()
                    .dataSource(db.dataSource())
                    .clock(clock)
                    .retention(RETENTION)
                    .build();
        }

        /** A failed chain (jqwik goes on shrinking) leaves its transaction open: end it before the next. */
        static void abandonLast() {
            World w = last.get();
            last.remove();
            if (w == null) {
                return;
            }
            if (w.tx != null) {
                try (Connection c = w.tx) {
                    c.rollback();
                } catch (SQLException e) {
                    // the connection is gone, and its transaction with it
                }
            }
            w.elsewhere.shutdown();
            try {
                if (!w.elsewhere.awaitTermination(WAIT.toMillis(), TimeUnit.MILLISECONDS)) {
                    last.set(w); // the next chain waits for it again
                    throw new IllegalStateException("a call of the last chain still runs after its transaction ended");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                last.set(w);
                throw new IllegalStateException("interrupted waiting for the calls of the last chain", e);
            }
        }

        /** Ends the chain: the caller's transaction, if still open, rolls back. */
        void end() {
            if (tx != null) {
                rollBack();
            }
        }

        /** n: bit 0 the key, bit 1 the fingerprint (the request's, or another request's). */
        void begin(int n) {
            begin("k" + (n & 1), (n & 2) == 0 ? "fp" : "other");
        }

        /** The keys whose rows the caller's open transaction holds, so that a begin of one must wait. */
        List<String> held() {
            return (postgres ? live.stream().map(f -> f.caller().key()) : touched.stream())
                    .distinct()
                    .sorted()
                    .toList();
        }

        /**
         * Another caller begins a key the caller's transaction holds (a finish it has not committed), as a
         * retry of a request whose transaction is still open does. n: bit 0 which of them, bit 1 the fingerprint.
         */
        void beginHeld(int n) {
            List<String> keys = held();
            begin(keys.get((n & 1) % keys.size()), (n & 2) == 0 ? "fp" : "other");
        }

        /**
         * A begin on another connection. While the caller's transaction holds the key's row (or, on MariaDB,
         * may hold the gap where a missing key would go) the begin must answer in progress within the lock
         * wait, never wait for the transaction's end; otherwise what the model says.
         */
        void begin(String key, String fingerprint) {
            Instant now = clock.instant();
            String what = "begin " + key + " " + fingerprint + " at +" + elapsed();
            Waits waits;
            if (tx == null) {
                waits = Waits.NO;
            } else if (postgres) {
                waits = holdsFinish(key) ? Waits.YES : Waits.NO;
            } else if (touched.contains(key)) {
                waits = Waits.YES;
            } else {
                waits = rows.get(key) == null && touchedMissing ? Waits.MAYBE : Waits.NO;
            }
            Supplier<Object> call = () -> keys.begin(SCOPE, key, fingerprint);
            BeginResult got = (BeginResult) (tx == null ? attempt(call) : withinLockWait(what, call)).get();
            BeginResult held = new BeginResult.InProgress(now.plus(LOCK_WAIT));
            if (waits == Waits.YES) {
                assertThat(got)
                        .as(what + ": the caller's open transaction holds the key, in progress within the lock wait")
                        .isEqualTo(held);
            } else if (!(waits == Waits.MAYBE && got.equals(held))) {
                began(what, key, fingerprint, now, got);
            }
        }

        private void began(String what, String key, String fingerprint, Instant now, BeginResult got) {
            Row row = rows.get(key);
            if (row == null) {
                assertThat(got).as(what + ": no row").isInstanceOf(BeginResult.Started.class);
                row = new Row(key, fingerprint, now);
                rows.put(key, row);
            } else if (!row.fingerprint.equals(fingerprint)) {
                assertThat(got).as(what).isEqualTo(new BeginResult.Mismatch(SCOPE, key));
                return;
            } else if (row.state.equals("succeeded") || row.state.equals("failed")) {
                assertThat(got)
                        .as(what + ": replays the accepted result")
                        .isEqualTo(new BeginResult.Replay(row.status, row.body, row.state.equals("failed")));
                return;
            } else if (row.state.equals("processing") && now.isBefore(row.lockedUntil)) {
                assertThat(got).as(what).isEqualTo(new BeginResult.InProgress(row.lockedUntil));
                return;
            } else {
                assertThat(got)
                        .as(what + ": " + row.state + " past its claim, taken over")
                        .isInstanceOf(BeginResult.Started.class);
                assertThat(((BeginResult.Started) got).token())
                        .as(what + ": a takeover's token is larger")
                        .isGreaterThan(row.holder.started().token());
            }
            row.state = "processing";
            row.lockedUntil = now.plus(LOCK);
            row.status = 0;
            row.body = null;
            row.holder = new Caller(key, row, (BeginResult.Started) got);
            callers.add(row.holder);
        }

        private static final String[] FINISHES = {"complete", "fail", "fail retryably", "complete with an effect"};

        /** n: which started caller (modulo their number), and how it finishes (n % 4), in a transaction of its own. */
        void finish(int n) {
            Caller caller = callers.get(n % callers.size());
            int kind = n % 4;
            int status = 100 + finishes++;
            byte[] body = ("result " + status).getBytes(StandardCharsets.UTF_8);
            String what = "finish (" + FINISHES[kind] + ") of the caller started with token "
                    + caller.started().token() + " on " + caller.key() + " at +" + elapsed();
            // PostgreSQL's update skips a row whose committed version does not match without waiting for
            // its lock: only the holder of the committed claim waits; InnoDB locks the row before it looks.
            Row committed = rows.get(caller.key());
            boolean holdsCommitted =
                    committed == caller.row() && committed.holder == caller && committed.state.equals("processing");
            boolean locked = postgres ? holdsFinish(caller.key()) && holdsCommitted : touched.contains(caller.key());
            Waits waits = tx != null && locked ? Waits.YES : Waits.NO;
            if (waits == Waits.YES && kind != 3) {
                // A finish in a transaction of its own waits at most the lock wait, then saves nothing. (One in
                // KeyTransaction, kind 3, runs in a transaction the request uses: its session's timeout governs.)
                int k = kind;
                RuntimeException refused = withinLockWait(what, () -> {
                            switch (k) {
                                case 0 -> keys.complete(caller.started(), status, body);
                                case 1 -> keys.fail(caller.started(), false, status, body);
                                default -> keys.fail(caller.started(), true, status, body);
                            }
                            return null;
                        })
                        .error();
                assertThat(refused)
                        .as(what + ": the caller's open transaction holds the key's row, refused within the lock wait")
                        .isInstanceOf(OnceException.class)
                        .hasMessageContaining("waited longer than lockWait");
                checkEffects(what);
                return;
            }
            elsewhere(
                    what,
                    waits,
                    caller.key(),
                    () -> {
                        switch (kind) {
                            case 0 -> keys.complete(caller.started(), status, body);
                            case 1 -> keys.fail(caller.started(), false, status, body);
                            case 2 -> keys.fail(caller.started(), true, status, body);
                            default -> completeWithEffect(caller, status, body);
                        }
                        return null;
                    },
                    r -> {
                        Row row = rows.get(caller.key());
                        boolean holds = row == caller.row() && row.holder == caller && row.state.equals("processing");
                        RuntimeException refused = refusal(r);
                        if (kind == 3 && refused == null) {
                            effects.add(caller.key() + "/" + status);
                        }
                        checkEffects(what);
                        if (judged(what, caller, holds, refused)) {
                            row.state = kind == 1 ? "failed" : kind == 2 ? "retryable" : "succeeded";
                            row.status = status;
                            row.body = kind == 2 ? null : body;
                        }
                    });
        }

        /** The effect and the result in one transaction, as the keys' documentation says to. */
        private void completeWithEffect(Caller caller, int status, byte[] body) {
            try (KeyTransaction t = keys.transaction(caller.started())) {
                insertEffect(t.connection(), caller.key(), status);
                t.complete(status, body);
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        private static void insertEffect(Connection c, String key, int status) throws SQLException {
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO key_effect (idem_key, status) VALUES (?, ?)")) {
                ps.setString(1, key);
                ps.setInt(2, status);
                ps.executeUpdate();
            }
        }

        /** The refusal a finish met ({@link OnceException}), null when accepted; anything else fails the test. */
        private static RuntimeException refusal(Result r) {
            if (r.error() != null && !(r.error() instanceof OnceException)) {
                throw r.error();
            }
            return r.error();
        }

        /**
         * Asserts that a finish was accepted exactly when its caller {@code holds} the key's current
         * claim, and refused as stale when a successor holds the key; true when accepted.
         */
        private boolean judged(String what, Caller caller, boolean holds, RuntimeException refused) {
            Row row = rows.get(caller.key());
            if (!holds) {
                assertThat(refused)
                        .as(what + ": it no longer holds the key's claim, so it must be refused")
                        .isNotNull();
                if (row != null && (row != caller.row() || row.holder != caller)) {
                    assertThat(refused)
                            .as(what + ": a successor holds the key")
                            .isInstanceOf(StaleFencingTokenException.class);
                }
                return false;
            }
            assertThat(refused).as(what + ": it holds the claim").isNull();
            return true;
        }

        private static final Duration[] STEPS = {
            Duration.ofSeconds(1),
            Duration.ofSeconds(29),
            Duration.ofSeconds(31),
            Duration.ofSeconds(61),
            Duration.ofHours(2)
        };

        void advance(int n) {
            clock.advance(STEPS[n]);
        }

        void prune() {
            Instant now = clock.instant();
            String what = "prune at +" + elapsed();
            Waits waits = Waits.NO;
            if (tx != null && !postgres && !touched.isEmpty()) {
                // Its scan locks the rows it reads: it waits for the touched rows it deletes, and may for the others.
                waits = touched.stream().anyMatch(k -> rows.get(k).prunable(now)) ? Waits.YES : Waits.MAYBE;
            }
            elsewhere(what, waits, null, pruner::prune, r -> {
                // PostgreSQL's skips the rows the caller's transaction has locked.
                List<String> gone = rows.values().stream()
                        .filter(row -> row.prunable(now) && !(postgres && holdsFinish(row.key)))
                        .map(row -> row.key)
                        .toList();
                assertThat(r.get()).as(what + ": keys deleted, of " + gone).isEqualTo((long) gone.size());
                gone.forEach(rows::remove);
            });
        }

        // ---- the caller's own transaction on its own connection ----------------------------------

        void open() {
            try {
                tx = db.dataSource().getConnection();
                try (Statement s = tx.createStatement();
                        ResultSet rs =
                                s.executeQuery(postgres ? "SELECT pg_backend_pid()" : "SELECT CONNECTION_ID()")) {
                    rs.next();
                    session = rs.getLong(1);
                }
                tx.setAutoCommit(false);
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        /**
         * A started caller finishes on the caller's connection, after writing its effect row there
         * (unless it fails retryably), as {@link IdempotencyKeys#complete(Connection, BeginResult.Started,
         * int, byte[])} says to; refused, it undoes what it wrote (to its savepoint, or all of it).
         */
        void finishInTx(InTx m) {
            Caller caller = callers.get(m.caller() % callers.size());
            String key = caller.key();
            int status = 100 + finishes++;
            byte[] body = ("result " + status).getBytes(StandardCharsets.UTF_8);
            String what = m.how() + " in the caller's transaction" + (m.guarded() ? " after a savepoint" : "")
                    + ", by the caller started with token " + caller.started().token() + " on " + key + " at +"
                    + elapsed();
            Row row = rows.get(key);
            boolean holds =
                    row == caller.row() && row.holder == caller && row.state.equals("processing") && !holdsFinish(key);
            if (m.guarded()) {
                savepoint();
            }
            RuntimeException refused = null;
            try {
                if (!m.how().equals(RETRY)) {
                    insertEffect(tx, key, status);
                }
                switch (m.how()) {
                    case COMPLETE -> keys.complete(tx, caller.started(), status, body);
                    case FAIL -> keys.fail(tx, caller.started(), false, status, body);
                    default -> keys.fail(tx, caller.started(), true, status, body);
                }
            } catch (OnceException e) {
                refused = e;
            } catch (SQLException e) {
                throw new IllegalStateException(what + ": " + e.getMessage(), e);
            }
            inInnoDb = true;
            if (row == null) {
                touchedMissing = true;
            } else {
                touched.add(key);
            }
            if (judged(what, caller, holds, refused)) {
                live.add(new Finish(caller, m.how(), status, body, savepoints.size()));
            } else if (m.guarded()) {
                rollbackTo(savepoints.size() - 1);
            } else {
                rollBack();
            }
            checkEffects(what);
        }

        void savepoint() {
            try {
                savepoints.add(tx.setSavepoint());
                marks.add(live.size());
                afterInnoDb.add(inInnoDb);
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        void rollbackTo(int i) {
            int at = i % savepoints.size();
            try {
                tx.rollback(savepoints.get(at));
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            live.subList(marks.get(at), live.size()).clear();
            if (!afterInnoDb.get(at)) {
                inInnoDb = false;
                touched.clear();
                touchedMissing = false;
            }
            savepoints.subList(at + 1, savepoints.size()).clear();
            marks.subList(at + 1, marks.size()).clear();
            afterInnoDb.subList(at + 1, afterInnoDb.size()).clear();
            settle();
            checkEffects("rollback to savepoint " + at);
        }

        void release(int i) {
            int at = i % savepoints.size();
            try {
                tx.releaseSavepoint(savepoints.get(at));
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            savepoints.subList(at, savepoints.size()).clear();
            marks.subList(at, marks.size()).clear();
            afterInnoDb.subList(at, afterInnoDb.size()).clear();
            // A released savepoint's subtransaction drops its own lock, and a call waiting for a row it
            // updated waits for the top transaction from then on: a rollback to an enclosing savepoint
            // undoes the update, yet does not wake that call (a call that comes after it does not wait).
            live.replaceAll(f -> f.depth() > at ? new Finish(f.caller(), f.how(), f.status(), f.body(), 0) : f);
            pendingUntilEnd |= pending != null && topHoldsFinish(pending.key());
        }

        void commit() {
            try {
                tx.commit();
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            for (Finish f : live) {
                Row row = rows.get(f.caller().key());
                row.state = f.how().equals(COMPLETE) ? "succeeded" : f.how().equals(FAIL) ? "failed" : "retryable";
                row.status = f.status();
                row.body = f.how().equals(RETRY) ? null : f.body();
                if (!f.how().equals(RETRY)) {
                    effects.add(f.caller().key() + "/" + f.status());
                }
            }
            ended("commit at +" + elapsed());
        }

        void rollBack() {
            try {
                tx.rollback();
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            ended("rollback at +" + elapsed());
        }

        private void ended(String what) {
            try {
                tx.close();
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            tx = null;
            savepoints.clear();
            marks.clear();
            live.clear();
            afterInnoDb.clear();
            touched.clear();
            touchedMissing = false;
            inInnoDb = false;
            settle();
            checkEffects(what);
        }

        private boolean topHoldsFinish(String key) {
            return live.stream()
                    .anyMatch(f -> f.depth() == 0 && f.caller().key().equals(key));
        }

        /** Whether the caller's open transaction holds a finish of {@code key} (and so its row lock). */
        private boolean holdsFinish(String key) {
            return live.stream().anyMatch(f -> f.caller().key().equals(key));
        }

        /**
         * Runs a call of another caller on another connection, and judges what it returned against the
         * model: at once, or, when it waits for the caller's transaction (which the model says it
         * must or may), once the locks it waits for are released.
         */
        private void elsewhere(String what, Waits waits, String key, Supplier<Object> call, Consumer<Result> judge) {
            if (tx == null) {
                judge.accept(attempt(call));
                return;
            }
            Future<Result> result = elsewhere.submit(() -> attempt(call));
            if (waitsForTx(result, what)) {
                assertThat(waits)
                        .as(what + ": waits for the caller's open transaction")
                        .isNotEqualTo(Waits.NO);
                pending = new Pending(what, key, result, judge);
                pendingUntilEnd = postgres && topHoldsFinish(key);
                return;
            }
            assertThat(waits)
                    .as(what + ": returned while the caller's open transaction holds what it needs")
                    .isNotEqualTo(Waits.YES);
            judge.accept(returned(what, result));
        }

        /**
         * A call on another connection that may wait for the caller's transaction at most the lock wait
         * (what the database keeps of it: MariaDB's whole seconds), and some slack.
         */
        private Result withinLockWait(String what, Supplier<Object> call) {
            Duration bound = (postgres ? LOCK_WAIT : Duration.ofSeconds(1)).plus(SLACK);
            Future<Result> result = elsewhere.submit(() -> attempt(call));
            try {
                return result.get(bound.toMillis(), TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                throw new AssertionError(
                        what + ": no answer within " + bound + ", it waits for the caller's transaction");
            } catch (InterruptedException | ExecutionException e) {
                throw new IllegalStateException(e);
            }
        }

        private static Result attempt(Supplier<Object> call) {
            try {
                return new Result(call.get(), null);
            } catch (RuntimeException e) {
                return new Result(null, e);
            }
        }

        /** Whether the call waits for a lock of the caller's transaction (false: it returned). */
        private boolean waitsForTx(Future<Result> result, String what) {
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (System.nanoTime() < deadline) {
                if (result.isDone()) {
                    return false;
                }
                if (lockWait()) {
                    return true;
                }
                LockSupport.parkNanos(1_000_000);
            }
            throw new AssertionError(what + ": neither returned nor waited for the caller's transaction in " + WAIT);
        }

        /**
         * Whether a session waits for a lock the caller's transaction holds. On MariaDB, only a lock
         * wait on this test's database (whose only other transaction is the caller's): its
         * information_schema.INNODB_LOCK_WAITS missed a wait for a row the caller's transaction had
         * updated (an implicit lock) that SHOW ENGINE INNODB STATUS listed.
         */
        private boolean lockWait() {
            if (postgres) {
                return db.queryLong("SELECT count(*) FROM pg_stat_activity WHERE " + session
                                + " = ANY(pg_blocking_pids(pid))")
                        > 0;
            }
            try (Connection c = db.dataSource().getConnection();
                    Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SHOW ENGINE INNODB STATUS")) {
                rs.next();
                String table = "of table `" + db.name() + "`.";
                return rs.getString("Status")
                        .lines()
                        .anyMatch(line -> line.contains(table) && line.endsWith("waiting"));
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        private static Result returned(String what, Future<Result> result) {
            try {
                return result.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                throw new AssertionError(
                        what + ": still waits " + WAIT + " after the locks it waited for were released");
            } catch (InterruptedException | ExecutionException e) {
                throw new IllegalStateException(e);
            }
        }

        /** Judges the waiting call once the model says the caller's transaction no longer holds what it waits for. */
        private void settle() {
            if (pending == null) {
                return;
            }
            boolean stillHeld = tx != null && (postgres ? pendingUntilEnd || holdsFinish(pending.key()) : inInnoDb);
            if (stillHeld) {
                return;
            }
            Pending p = pending;
            pending = null;
            p.judge().accept(returned(p.what(), p.result()));
        }

        /** The committed effect rows are exactly those of the committed finishes that wrote one. */
        private void checkEffects(String what) {
            List<String> found = new ArrayList<>();
            try (Connection c = db.dataSource().getConnection();
                    Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SELECT idem_key, status FROM key_effect")) {
                while (rs.next()) {
                    found.add(rs.getString(1) + "/" + rs.getInt(2));
                }
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            assertThat(found)
                    .as(what + ": the committed effect rows (key/status), one per committed finish that wrote one")
                    .containsExactlyInAnyOrderElementsOf(effects);
        }

        private String elapsed() {
            return Duration.between(start, clock.instant()).toString();
        }
    }
}
