package dev.once.spring;

import static dev.once.testsupport.StateMachines.move;
import static org.assertj.core.api.Assertions.assertThat;

import dev.once.StaleFencingTokenException;
import dev.once.lease.Fence;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import dev.once.spring.SpringScopes.Ended;
import dev.once.spring.SpringScopes.Kind;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.ActionChain;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.jdbc.core.ConnectionCallback;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Fencing tokens inside Spring-managed transactions, as a state machine on PostgreSQL and MariaDB: two lease holders
 * of one resource and a shared clock. Holder 0 is a Spring application: it begins scopes (REQUIRED, NESTED,
 * REQUIRES_NEW), fences with {@link Fence#check} on the transaction's connection (through {@code JdbcTemplate}
 * or {@code DataSourceUtils}), sometimes catching the refusal and going on, writes once its transaction has
 * fenced, commits, rolls back, marks rollback-only; or its {@link IdempotentListener} body does the same (a
 * fence in a {@code NESTED} step it rolls back, or a refusal it catches, then a write), in the open scope or
 * in the listener's own transaction. Holder 1 takes the lease over when the clock passes the expiry and
 * writes in a plain JDBC transaction at once, fenced; the fence row lock makes it wait for holder 0's
 * transaction (up to the database's lock timeout, then it gives up). The invariant, observed in the
 * database after every move: no fenced write with a stale token commits after a newer token's write
 * (the committed tokens, in commit order, never decrease). Tries: {@value #TRIES} on PostgreSQL,
 * {@value #MARIADB_TRIES} on MariaDB, up to 40 moves each.
 */
class SpringFencePropertyTest {

    static final int TRIES = 40;
    static final int MARIADB_TRIES = 15;
    static final Duration TTL = Duration.ofSeconds(10);
    static final String RESOURCE = "ledger:42";
    static final AtomicLong chains = new AtomicLong();
    static final AtomicLong commits = new AtomicLong();
    static final AtomicLong refusedAtCommit = new AtomicLong();

    private static final Map<String, Setup> setups = new java.util.HashMap<>();

    @AfterContainer
    static void stop() {
        for (Setup s : setups.values()) {
            s.context().close();
            s.db().close();
        }
        setups.clear();
        System.out.println("CHAOS name=spring-fence rounds=" + chains.getAndSet(0) + " stale_write_committed=0"
                + " commits=" + commits.getAndSet(0) + " refused_at_commit=" + refusedAtCommit.getAndSet(0));
    }

    /** The transaction manager, once, the listener bean, the leases on the shared clock. */
    record Setup(
            TestDatabase db,
            JdbcTransactionManager tm,
            DataSource ds,
            JdbcTemplate jdbc,
            MutableClock clock,
            Leases leases,
            Listeners listeners,
            AnnotationConfigApplicationContext context) {}

    @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    static class ListenerConfig {}

    /**
     * A Kafka {@link IdempotentListener} as an application writes it, fencing on the transaction's connection:
     * the record's value says how ({@code plain}, {@code swallow}: the refusal caught, {@code nested}: the fence in
     * a {@code NESTED} step rolled back, as a step that failed for another reason) and with which token; then
     * it writes, as the fence let it.
     */
    public static class Listeners {
        final JdbcTemplate jdbc;
        final TransactionTemplate nested;

        Listeners(JdbcTemplate jdbc, JdbcTransactionManager tm) {
            this.jdbc = jdbc;
            this.nested = new TransactionTemplate(tm);
            nested.setPropagationBehavior(TransactionDefinition.PROPAGATION_NESTED);
        }

        @KafkaListener(topics = "fence", autoStartup = "false")
        @IdempotentListener(consumer = "fence")
        public void on(ConsumerRecord<String, String> record) {
            String[] how = record.value().split(":");
            long token = Long.parseLong(how[1]);
            switch (how[0]) {
                case "swallow" -> {
                    try {
                        fence(jdbc, token);
                    } catch (StaleFencingTokenException e) {
                        // an application that logs the refusal and goes on
                    }
                }
                case "nested" ->
                    nested.executeWithoutResult(s -> {
                        fence(jdbc, token);
                        s.setRollbackOnly();
                    });
                default -> fence(jdbc, token);
            }
            write(jdbc, token, "listener");
        }
    }

    static void fence(JdbcTemplate jdbc, long token) {
        jdbc.execute((ConnectionCallback<Void>) c -> {
            Fence.check(c, RESOURCE, token);
            return null;
        });
    }

    static void write(JdbcTemplate jdbc, long token, String via) {
        jdbc.update("INSERT INTO fenced_write (token, via) VALUES (?, ?)", token, via);
    }

    private static Setup postgres() {
        return setups.computeIfAbsent(
                "postgres",
                k -> setup(
                        TestPostgres.shared().freshDatabase(8),
                        "CREATE TABLE fenced_write (id bigserial PRIMARY KEY, token bigint NOT NULL, via varchar(20))",
                        "SET lock_timeout = '200ms'"));
    }

    private static Setup mariadb() {
        return setups.computeIfAbsent(
                "mariadb",
                k -> setup(
                        TestMariaDb.shared().freshDatabase(8),
                        "CREATE TABLE fenced_write (id bigint AUTO_INCREMENT PRIMARY KEY, token bigint NOT NULL,"
                                + " via varchar(20))",
                        "SET SESSION innodb_lock_wait_timeout = 1")); // seconds, InnoDB's least
    }

    private static Setup setup(TestDatabase db, String table, String lockTimeout) {
        db.execute(table);
        DataSource ds = lockTimeout(db.dataSource(), lockTimeout);
        JdbcTransactionManager tm = new JdbcTransactionManager(ds);
        JdbcTemplate jdbc = new JdbcTemplate(ds);
        MutableClock clock = MutableClock.startingNow();
        Leases leases = Leases.builder().dataSource(ds).clock(clock).build();
        OnceSpring once =
                OnceSpring.builder().dataSource(ds).transactionManager(tm).build();
        AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext();
        context.registerBean(OnceSpring.class, () -> once);
        context.registerBean(Listeners.class, () -> new Listeners(jdbc, tm));
        context.register(ListenerConfig.class);
        context.refresh();
        return new Setup(db, tm, ds, jdbc, clock, leases, context.getBean(Listeners.class), context);
    }

    /**
     * Every connection gives up waiting for a row lock soon (PostgreSQL 200 ms, MariaDB 1 s): holder 1 waiting for holder 0's fence row,
     * and holder 0's REQUIRES_NEW step waiting for the row its own suspended transaction holds (forever otherwise).
     */
    private static DataSource lockTimeout(DataSource pool, String statement) {
        return new org.springframework.jdbc.datasource.DelegatingDataSource(pool) {
            @Override
            public Connection getConnection() throws SQLException {
                Connection c = super.getConnection();
                try (var s = c.createStatement()) {
                    s.execute(statement);
                }
                return c;
            }
        };
    }

    @Property(tries = TRIES)
    void postgresSpringFencing(@ForAll("chains") ActionChain<World> chain) {
        run(chain, postgres());
    }

    // fewer: a holder waiting for a fence row waits InnoDB's least lock wait, a second
    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = MARIADB_TRIES)
    void mariadbSpringFencing(@ForAll("chains") ActionChain<World> chain) {
        run(chain, mariadb());
    }

    private static void run(ActionChain<World> chain, Setup setup) {
        World.next = new World(setup);
        try {
            chain.run().end();
        } finally {
            World.next.scopes.abandon();
        }
        chains.incrementAndGet();
    }

    /**
     * Shrunk from the generator, red before a fence taken in a Spring transaction was checked again at its
     * commit: holder 0 fences in a NESTED step that rolls back (the fence row is free again), holder 1 takes the
     * lease over and writes; holder 0 writes and commits after it with its stale token.
     */
    @Example
    void postgresFenceUndoneByNestedRollbackThenWrite() {
        fenceUndoneByNestedRollbackThenWrite(postgres());
    }

    private static void fenceUndoneByNestedRollbackThenWrite(Setup setup) {
        World.next = new World(setup);
        try {
            World w = World.next;
            w.acquire(0);
            w.begin(Kind.REQUIRED);
            w.begin(Kind.NESTED);
            w.fence(How.TEMPLATE);
            w.rollback();
            w.takeOver();
            w.write();
            w.commit();
            w.end();
        } finally {
            World.next.scopes.abandon();
        }
    }

    /** Red before: an {@link IdempotentListener} body catches the refusal of its stale token and writes on. */
    @Example
    void listenerCatchesTheRefusalAndWrites() {
        World.next = new World(postgres());
        try {
            World w = World.next;
            w.acquire(0);
            w.takeOver();
            w.listen("swallow");
            w.end();
        } finally {
            World.next.scopes.abandon();
        }
    }

    enum How {
        TEMPLATE,
        DATA_SOURCE_UTILS,
        SWALLOWED
    }

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        return ActionChain.<World>startWith(() -> World.next)
                .withAction(2, move(w -> w.token < 0 || w.expired(), "acquire", w -> w.acquire(0)))
                .withAction(2, move(w -> true, "take over", World::takeOver))
                .withAction(3, move(w -> w.scopes.size() < 4, "begin REQUIRED", w -> w.begin(Kind.REQUIRED)))
                .withAction(
                        3,
                        move(
                                w -> !w.scopes.isEmpty() && w.scopes.size() < 4,
                                "begin NESTED",
                                w -> w.begin(Kind.NESTED)))
                .withAction(1, move(w -> w.scopes.size() < 4, "begin REQUIRES_NEW", w -> w.begin(Kind.REQUIRES_NEW)))
                .withAction(
                        4,
                        move(
                                w -> !w.scopes.isEmpty() && w.token >= 0,
                                Arbitraries.of(How.class),
                                "fence",
                                World::fence))
                .withAction(4, move(World::fenced, "write", World::write))
                .withAction(
                        2,
                        move(
                                w -> w.token >= 0,
                                Arbitraries.of("plain", "swallow", "nested"),
                                "listener",
                                World::listen))
                .withAction(3, move(w -> !w.scopes.isEmpty(), "commit", World::commit))
                .withAction(2, move(w -> !w.scopes.isEmpty(), "rollback", World::rollback))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "setRollbackOnly", w -> w.scopes.setRollbackOnly()))
                .withMaxTransformations(40);
    }

    static final class World {
        static World next;
        static final AtomicLong offsets = new AtomicLong();

        final Setup setup;
        final SpringScopes scopes;
        final List<String> moves = new ArrayList<>();
        // holder 0's token, -1 before it acquired; the physical transactions (by number) that fenced
        long token = -1;
        Lease lease;
        final Set<Integer> fencedPhysicals = new HashSet<>();
        // what the database holds: the committed writes seen, and the newest token among them
        final Set<Long> seen = new HashSet<>();
        long newestCommitted;

        World(Setup setup) {
            this.setup = setup;
            this.scopes = new SpringScopes(setup.tm());
            // a fresh resource per chain: the fence table keeps the newest token of the last chain
            setup.jdbc().update("DELETE FROM once_fence");
            setup.jdbc().update("DELETE FROM once_lease");
            setup.jdbc().update("DELETE FROM fenced_write");
        }

        boolean expired() {
            return lease == null || lease.expiredAt(setup.clock().instant());
        }

        boolean fenced() {
            return !scopes.isEmpty() && fencedPhysicals.contains(scopes.top().physical.number);
        }

        void acquire(int holder) {
            Lease l = setup.leases().acquire(RESOURCE, "holder-" + holder, TTL).orElse(null);
            moves.add("acquire by " + holder + " -> " + (l == null ? "held" : "token " + l.token()));
            if (l != null) {
                lease = l;
                token = l.token();
            }
            observe();
        }

        /** The clock passes the lease's expiry; holder 1 acquires the lease and writes at once, fenced. */
        void takeOver() {
            setup.clock().advance(TTL.plusSeconds(1));
            Lease l = setup.leases().acquire(RESOURCE, "holder-1", TTL).orElseThrow();
            lease = l;
            String result;
            try (Connection c = setup.ds().getConnection()) {
                c.setAutoCommit(false);
                try {
                    Fence.check(c, RESOURCE, l.token());
                    try (PreparedStatement ps =
                            c.prepareStatement("INSERT INTO fenced_write (token, via) VALUES (?, 'holder 1')")) {
                        ps.setLong(1, l.token());
                        ps.executeUpdate();
                    }
                    c.commit();
                    result = "committed";
                } catch (StaleFencingTokenException | SQLException e) {
                    c.rollback();
                    result = e.getClass().getSimpleName();
                } finally {
                    c.setAutoCommit(true);
                }
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            moves.add("take over: holder 1 token " + l.token() + " writes, " + result);
            observe();
        }

        void begin(Kind kind) {
            moves.add("begin " + kind);
            try {
                scopes.begin(kind);
            } catch (RuntimeException e) {
                moves.add("  begin failed: " + e);
            }
        }

        /** Holder 0 fences in the innermost scope; a failure the body does not catch rolls the scope back. */
        void fence(How how) {
            moves.add("fence " + how + " token " + token);
            fencedPhysicals.add(scopes.top().physical.number);
            try {
                switch (how) {
                    case TEMPLATE -> SpringFencePropertyTest.fence(setup.jdbc(), token);
                    case DATA_SOURCE_UTILS -> Fence.check(DataSourceUtils.getConnection(setup.ds()), RESOURCE, token);
                    case SWALLOWED -> {
                        try {
                            SpringFencePropertyTest.fence(setup.jdbc(), token);
                        } catch (StaleFencingTokenException e) {
                            moves.add("  refusal caught");
                        }
                    }
                }
            } catch (Exception e) {
                failed(e);
            }
        }

        void write() {
            moves.add("write token " + token);
            try {
                SpringFencePropertyTest.write(setup.jdbc(), token, "holder 0");
            } catch (RuntimeException e) {
                failed(e);
            }
        }

        /** The listener called with a fresh record, in the innermost scope or in its own transaction. */
        void listen(String how) {
            long offset = offsets.incrementAndGet();
            ConsumerRecord<String, String> r = new ConsumerRecord<>("fence", 0, offset, "k", how + ":" + token);
            r.headers().add("once-event-id", ("fence-" + offset).getBytes(StandardCharsets.UTF_8));
            moves.add("listener " + how + " token " + token + (scopes.isEmpty() ? " (own transaction)" : ""));
            try {
                setup.listeners().on(r);
            } catch (RuntimeException e) {
                moves.add("  listener failed: " + e.getClass().getSimpleName());
            }
            observe();
        }

        // an exception leaving a @Transactional method: its scope rolls back
        private void failed(Exception e) {
            moves.add("  failed: " + e.getClass().getSimpleName() + ", the scope rolls back");
            rollback();
        }

        void commit() {
            moves.add("commit");
            if (!scopes.isEmpty()) { // an example's scope may have rolled back on a failure already
                ended(scopes.commit());
            }
        }

        void rollback() {
            moves.add("rollback");
            if (!scopes.isEmpty()) {
                ended(scopes.rollback());
            }
        }

        private void ended(Ended ended) {
            if (ended.thrown() != null) {
                moves.add("  " + ended.end() + ", thrown "
                        + ended.thrown().getClass().getSimpleName());
                if (causedBy(ended.thrown(), StaleFencingTokenException.class)) {
                    refusedAtCommit.incrementAndGet();
                }
            }
            observe();
        }

        private static boolean causedBy(Throwable t, Class<?> type) {
            for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
                if (type.isInstance(c)) {
                    return true;
                }
            }
            return false;
        }

        /** Reads the writes committed since the last look: none may carry a token older than one committed before. */
        void observe() {
            // on a connection of its own: a JdbcTemplate would join the open transaction and see its writes
            List<Map<String, Object>> rows = committedRows();
            long newestBefore = newestCommitted;
            for (Map<String, Object> row : rows) {
                long id = ((Number) row.get("id")).longValue();
                long t = ((Number) row.get("token")).longValue();
                if (seen.add(id)) {
                    commits.incrementAndGet();
                    assertThat(t)
                            .as(
                                    "no write with a stale token commits after a newer token's write: write %s with"
                                            + " token %s committed after token %s; moves %s",
                                    id, t, newestBefore, moves)
                            .isGreaterThanOrEqualTo(newestBefore);
                    newestCommitted = Math.max(newestCommitted, t);
                }
            }
        }

        private List<Map<String, Object>> committedRows() {
            List<Map<String, Object>> rows = new ArrayList<>();
            try (Connection c = setup.ds().getConnection();
                    var s = c.createStatement();
                    var rs = s.executeQuery("SELECT id, token FROM fenced_write")) {
                while (rs.next()) {
                    rows.add(Map.of("id", rs.getLong(1), "token", rs.getLong(2)));
                }
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            return rows;
        }

        void end() {
            while (!scopes.isEmpty()) {
                commit();
            }
            observe();
        }
    }
}
