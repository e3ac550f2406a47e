package dev.once.core;

import static dev.once.core.Unchecked.call;
import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.TransactionOutbox;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.Transformer;

/**
 * The caller's transaction as a state machine (issue 19): random sequences of begin, savepoint,
 * rollback-to, release, commit and rollback, with {@code process} (plain, with a handler that rolls
 * back a part of its own, or with a nested {@code process} inside the handler), {@code processBatch}
 * with a savepoint per record, and the caller's own {@link TransactionOutbox} rows, through
 * {@link ManualTransactions} on plain JDBC, on PostgreSQL and MariaDB. The caller makes its outbox on its
 * first row, so savepoints set before it (which it never heard of) and after it are both rolled back to, and
 * flushes it when it likes (rows written mid-transaction, then more buffered). Behind the scope's back, the
 * caller also rolls back the connection itself after {@code process} and then commits through the scope, or
 * processes inside a savepoint set and rolled back to on the connection: the scope's commit must then refuse
 * the transaction, unless a rollback to an earlier savepoint of the scope dropped what was undone (found by
 * hand first; with the check at the scope's commit off, both moves fail on the first try on either database).
 * The oracle is the input: the model replays the caller's moves on a list of what the open transaction
 * holds; what committed must be applied once, its outbox rows present once and reported APPLIED once; what
 * rolled back (whole or to a savepoint) must be absent, and reported once as not applied. Tries per database: {@value #TRIES}
 * (CI), more with {@code -Donce.callerTx.tries=N}, which runs N chains in each try.
 */
class CallerTransactionPropertyTest {

    static final int TRIES = 12;
    static final int REPEATS = Integer.getInteger("once.callerTx.tries", 1);
    static final AtomicLong postgresSequences = new AtomicLong();
    static final AtomicLong mariadbSequences = new AtomicLong();

    private static TestDatabase postgres;
    private static TestDatabase mariadb;

    @AfterContainer
    static void stop() {
        if (postgres != null) {
            postgres.close();
        }
        if (mariadb != null) {
            mariadb.close();
        }
        // The CHAOS line RELIABILITY.md is made of (see once-testkit's ReliabilityReport): every sequence
        // that ran passed the oracle, so lost, phantom and wrong outcomes are 0 whenever this prints.
        for (String db : List.of("postgres", "mariadb")) {
            long n = db.equals("postgres") ? postgresSequences.get() : mariadbSequences.get();
            if (n > 0) {
                System.out.println("CHAOS name=caller-transactions rounds=" + n
                        + " lost=0 applied_twice=0 phantom=0 wrong_outcomes=0 db=" + db);
            }
        }
    }

    @Property(tries = TRIES)
    void postgresCallerTransactions(@ForAll("chains") ActionChain<World> chain) throws Exception {
        if (postgres == null) {
            postgres = Ledger.on(TestPostgres.shared().freshDatabase(4));
        }
        run(chain, postgres, Dialects.POSTGRESQL, postgresSequences);
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = TRIES)
    void mariadbCallerTransactions(@ForAll("chains") ActionChain<World> chain) throws Exception {
        if (mariadb == null) {
            mariadb = Ledger.on(TestMariaDb.shared().freshDatabase(4));
        }
        run(chain, mariadb, Dialects.MARIADB, mariadbSequences);
    }

    private static void run(ActionChain<World> chain, TestDatabase db, Dialect dialect, AtomicLong sequences)
            throws Exception {
        for (int i = 0; i < REPEATS; i++) {
            World.next = new World(db, dialect);
            World w = chain.run();
            w.end();
            try {
                w.check();
            } catch (AssertionError e) {
                throw new AssertionError("after " + chain.transformations() + ": " + e.getMessage(), e);
            }
            sequences.incrementAndGet();
        }
    }

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        return ActionChain.<World>startWith(() -> World.next)
                .withAction(2, when(w -> w.connection == null, "begin", World::begin))
                .withAction(3, when(w -> w.connection != null, "savepoint", World::savepoint))
                .withAction(
                        3,
                        indexed(w -> w.connection != null && !w.savepoints.isEmpty(), "rollback to", World::rollbackTo))
                .withAction(1, indexed(w -> w.connection != null && !w.savepoints.isEmpty(), "release", World::release))
                .withAction(5, indexed(w -> w.connection != null, "process", World::process))
                .withAction(2, when(w -> w.connection != null, "processBatch", World::processBatch))
                .withAction(3, indexed(w -> w.connection != null, "caller outbox add", World::callerRows))
                .withAction(1, when(w -> w.callerOutbox != null, "caller outbox flush", World::callerFlush))
                .withAction(2, when(w -> w.connection != null, "commit", World::commit))
                .withAction(1, when(w -> w.connection != null, "rollback", World::rollback))
                .withAction(
                        1,
                        when(
                                w -> w.connection != null,
                                "process in a savepoint of the connection's own, rolled back to",
                                World::processUndoneOnTheConnection))
                .withAction(
                        1,
                        when(
                                w -> w.connection != null,
                                "rollback on the connection itself, then commit",
                                World::rollbackOnTheConnectionThenCommit))
                .withMaxTransformations(25);
    }

    interface Move {
        void on(World w) throws Exception;
    }

    interface IndexedMove {
        void on(World w, int i) throws Exception;
    }

    private static Action<World> when(java.util.function.Predicate<World> pre, String name, Move move) {
        return new Action.Independent<>() {
            @Override
            public boolean precondition(World w) {
                return pre.test(w);
            }

            @Override
            public Arbitrary<Transformer<World>> transformer() {
                return Arbitraries.just(Transformer.mutate(name, w -> call(() -> move.on(w))));
            }
        };
    }

    private static Action<World> indexed(java.util.function.Predicate<World> pre, String name, IndexedMove move) {
        return new Action.Independent<>() {
            @Override
            public boolean precondition(World w) {
                return pre.test(w);
            }

            @Override
            public Arbitrary<Transformer<World>> transformer() {
                return Arbitraries.integers()
                        .between(0, 5)
                        .map(i -> Transformer.mutate(name + " " + i, w -> call(() -> move.on(w, i))));
            }
        };
    }

    /** Something the open transaction holds, as the model sees it. */
    record Item(String eventId, long amount, String row) {}

    /** The database, the consumers, and the model of the caller's transaction. */
    static final class World {
        static World next;

        final TestDatabase db;
        final ManualTransactions manual = new ManualTransactions();
        final Map<String, List<Status>> heard = new HashMap<>();
        final IdempotentConsumer billing;
        final IdempotentConsumer nested;
        final IdempotentConsumer batch;
        final Dialect dialect;
        Connection connection;
        ManualTransactions.Scope scope;
        TransactionOutbox callerOutbox;
        int physical;
        long counter;
        // the open transaction's items in order, and each live savepoint with how many items preceded it
        final List<Item> live = new ArrayList<>();
        final List<Savepoint> savepoints = new ArrayList<>();
        final List<Integer> marks = new ArrayList<>();
        final List<Item> committed = new ArrayList<>();
        final List<Item> undone = new ArrayList<>();
        // A claim undone on the connection behind the scope's back dooms the transaction: its check at the
        // scope's commit fails, unless a rollback through the scope to a savepoint set before it dropped the
        // check. -1, or how many of the scope's savepoints are older than the oldest such claim.
        int doomedAfter = -1;

        World(TestDatabase db, Dialect dialect) throws SQLException {
            this.db = db;
            this.dialect = dialect;
            try (Connection c = db.dataSource().getConnection();
                    Statement s = c.createStatement()) {
                s.execute("DELETE FROM once_inbox");
                s.execute("DELETE FROM once_outbox");
                s.execute("UPDATE account SET balance = 0");
            }
            nested = consumer("nested", (d, tx) -> work(d, tx.connection(), tx.outbox()));
            billing = consumer("billing", (d, tx) -> {
                String[] p = d.payloadText().split("\\|");
                Connection c = tx.connection();
                if (p[1].equals("inner")) {
                    Savepoint sp = c.setSavepoint();
                    tx.outbox().add("out", null, bytes("phantom-" + d.eventId()), null, null);
                    CallerTransactionScenarios.credit(c, 1_000_000);
                    c.rollback(sp);
                } else if (p[1].startsWith("nested:")) {
                    nested.process(Delivery.of(p[1].substring(7), p[2] + "|plain"));
                }
                work(d, c, tx.outbox());
            });
            batch = IdempotentConsumer.builder()
                    .transactions(manual)
                    .dialect(dialect)
                    .consumer("batch")
                    .batchHandler((claimed, tx) -> {
                        Connection c = tx.connection();
                        for (Delivery d : claimed) {
                            Savepoint sp = c.setSavepoint();
                            tx.outbox(d).add("out", null, bytes("phantom-" + d.eventId()), null, null);
                            c.rollback(sp);
                            work(d, c, tx.outbox(d));
                        }
                    })
                    .outcomeListener((d, o) -> heard(d, o))
                    .build();
        }

        private IdempotentConsumer consumer(String name, dev.once.Handler handler) {
            return IdempotentConsumer.builder()
                    .transactions(manual)
                    .dialect(dialect)
                    .consumer(name)
                    .handler(handler)
                    .outcomeListener((d, o) -> heard(d, o))
                    .build();
        }

        private synchronized void heard(Delivery d, Outcome o) {
            heard.computeIfAbsent(d.eventId(), k -> new ArrayList<>()).add(o.status());
        }

        private static void work(Delivery d, Connection c, dev.once.Outbox outbox) throws SQLException {
            long amount = Long.parseLong(d.payloadText().split("\\|")[0]);
            CallerTransactionScenarios.credit(c, amount);
            outbox.add("out", null, bytes("row-" + d.eventId()), null, null);
        }

        static byte[] bytes(String s) {
            return s.getBytes(StandardCharsets.UTF_8);
        }

        void begin() throws SQLException {
            connection = db.dataSource().getConnection();
            connection.setAutoCommit(false);
            scope = manual.join(connection);
            physical++;
        }

        void savepoint() throws SQLException {
            Savepoint sp = scope.setSavepoint();
            if (callerOutbox != null) {
                callerOutbox.savepoint(sp);
            }
            savepoints.add(sp);
            marks.add(live.size());
        }

        void rollbackTo(int i) throws SQLException {
            int at = i % savepoints.size();
            Savepoint sp = savepoints.get(at);
            scope.rollback(sp);
            if (callerOutbox != null) {
                callerOutbox.rollbackToSavepoint(sp); // one set before the outbox was made undoes all its rows
            }
            List<Item> gone = live.subList(marks.get(at), live.size());
            undone.addAll(gone);
            gone.clear();
            savepoints.subList(at + 1, savepoints.size()).clear();
            marks.subList(at + 1, marks.size()).clear();
            if (at < doomedAfter) {
                doomedAfter = -1; // the checks of the claims undone on the connection were registered after sp
            }
        }

        void release(int i) throws SQLException {
            int at = i % savepoints.size();
            Savepoint sp = savepoints.get(at);
            scope.releaseSavepoint(sp);
            if (callerOutbox != null) {
                callerOutbox.releaseSavepoint(sp);
            }
            savepoints.subList(at, savepoints.size()).clear();
            marks.subList(at, marks.size()).clear();
            if (doomedAfter > at) {
                doomedAfter = at;
            }
        }

        void process(int variant) {
            String id = "e" + (++counter);
            long amount = counter;
            String mode;
            Item inner = null;
            if (variant == 1 || variant == 4) {
                mode = "inner";
            } else if (variant == 2) {
                String nestedId = "n" + counter;
                mode = "nested:" + nestedId;
                inner = new Item(nestedId, amount * 1000, "row-" + nestedId);
            } else {
                mode = "plain";
            }
            Outcome o = billing.process(Delivery.of(id, amount + "|" + mode + "|" + amount * 1000));
            assertThat(o.status()).as("provisional outcome of %s: %s", id, o).isEqualTo(Status.APPLIED);
            if (inner != null) {
                live.add(inner); // claimed inside the handler, before the outer's flush
            }
            live.add(new Item(id, amount, "row-" + id));
        }

        void processBatch() {
            List<Delivery> ds = new ArrayList<>();
            List<Item> items = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                String id = "b" + (++counter);
                ds.add(Delivery.of(id, Long.toString(counter)));
                items.add(new Item(id, counter, "row-" + id));
            }
            List<Outcome> os = batch.processBatch(ds);
            assertThat(os).extracting(Outcome::status).containsOnly(Status.APPLIED);
            live.addAll(items);
        }

        /**
         * One row, or (variants 3 to 5) a row, a flush and a row: a caller writing part of its rows early.
         * In one move, so that a savepoint set before the outbox existed, rows both written and buffered,
         * and a rollback to it (which must drop what the buffer holds) come together in a few percent of
         * the chains; as separate add and flush moves they did in about one in five hundred.
         */
        void callerRows(int variant) throws SQLException {
            callerRow();
            if (variant >= 3) {
                callerFlush();
                callerRow();
            }
        }

        /** The caller makes its outbox where it needs one: savepoints set before are unknown to it. */
        void callerRow() throws SQLException {
            if (callerOutbox == null) {
                callerOutbox = TransactionOutbox.builder()
                        .connection(connection)
                        .dialect(dialect)
                        .source("caller")
                        .cause("tx-" + physical)
                        .build();
            }
            String row = "caller-" + (++counter);
            callerOutbox.add("out", null, bytes(row), null, null);
            live.add(new Item(null, 0, row));
        }

        /** Writes the rows so far before the commit (the caller may): later ones are buffered again. */
        void callerFlush() throws SQLException {
            callerOutbox.flush();
        }

        void commit() throws SQLException {
            if (callerOutbox != null) {
                callerOutbox.flush();
            }
            boolean doomed = doomedAfter >= 0;
            assertThat(commitThroughScope())
                    .as("the scope's commit refuses a transaction holding a claim undone on the connection")
                    .isEqualTo(doomed);
            (doomed ? undone : committed).addAll(live);
            close();
        }

        /** Commits through the scope: false, or true when it refused (a claim of the transaction was undone). */
        private boolean commitThroughScope() throws SQLException {
            try {
                scope.commit();
                return false;
            } catch (SQLException e) {
                if (e.getMessage() == null || !e.getMessage().contains("undone")) {
                    throw e;
                }
                return true;
            }
        }

        /**
         * A savepoint of the caller's own on the connection (the scope never hears of it), a delivery processed,
         * and a rollback to that savepoint on the connection: the delivery's claim and effect are gone, and it
         * must not be reported APPLIED.
         */
        void processUndoneOnTheConnection() throws SQLException {
            Savepoint sp = connection.setSavepoint();
            String id = "e" + (++counter);
            Outcome o = billing.process(Delivery.of(id, counter + "|plain|0"));
            assertThat(o.status()).as("provisional outcome of %s: %s", id, o).isEqualTo(Status.APPLIED);
            connection.rollback(sp);
            undone.add(new Item(id, counter, "row-" + id));
            doomedAfter = doomedAfter < 0 ? savepoints.size() : Math.min(doomedAfter, savepoints.size());
        }

        /**
         * The caller rolls the whole transaction back on the connection (its own error handling, a DAO), then
         * commits through the scope, without flushing its outbox: the scope must refuse the commit where the
         * transaction held a claim, and commits the empty transaction where it held none.
         */
        void rollbackOnTheConnectionThenCommit() throws SQLException {
            boolean claims = doomedAfter >= 0 || live.stream().anyMatch(i -> i.eventId() != null);
            connection.rollback();
            assertThat(commitThroughScope())
                    .as("the scope's commit after a rollback on the connection refuses it where it held claims")
                    .isEqualTo(claims);
            undone.addAll(live);
            close();
        }

        void rollback() throws SQLException {
            scope.rollback();
            undone.addAll(live);
            close();
        }

        private void close() throws SQLException {
            scope.close();
            connection.setAutoCommit(true);
            connection.close();
            connection = null;
            scope = null;
            callerOutbox = null;
            live.clear();
            savepoints.clear();
            marks.clear();
            doomedAfter = -1;
        }

        void end() throws SQLException {
            if (connection != null) {
                rollback();
            }
        }

        void check() throws SQLException {
            long sum = 0;
            List<String> rows = new ArrayList<>();
            List<String> claims = new ArrayList<>();
            for (Item i : committed) {
                sum += i.amount();
                rows.add(i.row());
                if (i.eventId() != null) {
                    claims.add(i.eventId());
                }
            }
            assertThat(read("SELECT event_id FROM once_inbox"))
                    .as("claims: what committed is claimed once, what rolled back is not")
                    .containsExactlyInAnyOrderElementsOf(claims);
            assertThat(read("SELECT payload FROM once_outbox"))
                    .as("outbox rows: what committed once (lost otherwise), nothing rolled back (phantom)")
                    .containsExactlyInAnyOrderElementsOf(rows);
            assertThat(db.queryLong("SELECT balance FROM account WHERE id = 1"))
                    .as("effects applied exactly once")
                    .isEqualTo(sum);
            for (String id : claims) {
                assertThat(heard.get(id))
                        .as("outcome heard for committed %s", id)
                        .containsExactly(Status.APPLIED);
            }
            for (Item i : undone) {
                if (i.eventId() != null) {
                    assertThat(heard.get(i.eventId()))
                            .as("outcome heard for rolled-back %s", i.eventId())
                            .hasSize(1)
                            .doesNotContain(Status.APPLIED);
                }
            }
        }

        private List<String> read(String sql) throws SQLException {
            List<String> out = new ArrayList<>();
            try (Connection c = db.dataSource().getConnection();
                    PreparedStatement ps = c.prepareStatement(sql);
                    ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    Object v = rs.getObject(1);
                    out.add(v instanceof byte[] b ? new String(b, StandardCharsets.UTF_8) : String.valueOf(v));
                }
            }
            return out;
        }
    }
}
