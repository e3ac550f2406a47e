package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.OutboxHeaders;
import dev.once.RetryPolicy;
import dev.once.Schema;
import dev.once.internal.JdbcOutbox;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import dev.once.testsupport.SchemaScript;
import dev.once.testsupport.StateMachines;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;

/**
 * Started relays of several tenants on one PostgreSQL database, a schema per tenant, woken only by NOTIFY (poll
 * interval one hour), against a model. A try makes 2 to 4 schemas, each at schema version 9 (its trigger's payload
 * names no schema) or 10 (it names the schema), with the table prefix {@code once_} (the channel every other test JVM
 * notifies on) or {@code t_}, the schema named plainly and reached through {@code currentSchema} in the JDBC URL, or
 * named {@code Rg-...} (mixed case and a hyphen: it needs quoting) and reached through a {@code SET search_path}
 * {@code connectionInitSql}. Then up to 24 random moves: commit 1 to 3 outbox rows in a tenant; open a tenant's
 * transaction that inserts a row and leave it open, and commit it moves later; start or stop a tenant's relay; migrate
 * a tenant's schema from V9 to V10 ({@link Schema#migrate}, concurrently: it waits for the tenant's open transaction,
 * and meanwhile the tenant's commits and its relay's marks of sent rows wait for it, so the model holds them back)
 * while relays run; terminate the backend of a relay's LISTEN connection ({@code pg_terminate_backend}); make a
 * running relay's publisher fail its next 1 to 3 sends (retryable: the rows are tried again after 100 ms, doubling to
 * 400 ms, and nothing notifies when they fall due); terminate the backend of a relay's batch while it sends (a row
 * committed for it, its send held until the backend is gone: the batch's marks and commit fail, its rows stay pending
 * and are sent again, the send of the killed batch being the at-least-once repeat the relay documents, recorded apart);
 * commit 1 to 3 rows to a running relay and freeze their sends (a tenant whose publisher overrides {@code publishAll},
 * drawn per tenant: a frozen send's stage never completes, the relay's send timeout of {@value #SEND_TIMEOUT_MILLIS} ms fails it, retryable; a
 * publisher sending in the relay's thread has no timeout of the relay's, and there the move does nothing).
 *
 * <p>Checked after every move, for every tenant whose relay runs: every row its transactions committed has been
 * published within {@value #PROMPT_SECONDS} s (waited on, the poll interval is an hour: only a wake-up sends it);
 * never a row twice, never by another tenant's relay. And the cost: a relay whose listener opened on a V10 schema (its
 * relay started, or its LISTEN connection reopened, after its schema was at V10) polls at most {@code 2 + 2 x} (its
 * tenant's commits while it ran) {@code + 2 x} (its LISTEN connections lost) {@code + 2 x} (its failed or frozen sends)
 * {@code + 2 x} (its batches killed): nothing for any other schema's commit,
 * whether that schema is at V10 (another payload) or not (an empty one), nor for the other test JVMs'. A relay whose
 * listener opened while its schema was at V9 wakes for every notification of its channel, any schema's and any JVM's:
 * allowed, unbounded here (that is the cost V10 removes). At the end the open transactions commit, every relay starts,
 * and every committed row has been published exactly once by its own tenant's relay.
 *
 * <p>Goes red when the mechanism is broken: see {@link OutboxRelayTenantsTest} for the cases it found and the
 * evidence.
 */
class OutboxRelayTenantsPropertyTest {

    static final int TRIES = 15;
    static final long PROMPT_SECONDS = 10;
    static final Duration PROMPT = Duration.ofSeconds(PROMPT_SECONDS);
    static final long SEND_TIMEOUT_MILLIS = 500;
    // The first line of PgListener's query after its LISTEN: the last statement its backend ran while it listens.
    static final String LISTENER_QUERY = "SELECT n.nspname, EXISTS%";

    private static final AtomicLong SEQUENCE = new AtomicLong();
    private static final AtomicLong tries = new AtomicLong();
    private static final AtomicLong moves = new AtomicLong();
    private static final AtomicLong published = new AtomicLong();
    private static final AtomicLong dropped = new AtomicLong();
    private static final AtomicLong migrated = new AtomicLong();
    private static final AtomicLong filteredPolls = new AtomicLong();
    private static final AtomicLong failedSends = new AtomicLong();
    private static final AtomicLong frozenSends = new AtomicLong();
    private static final AtomicLong killedBatches = new AtomicLong();
    // Failed sends are tried again soon, and never given up in a try: a row fails at most a few times in a row.
    private static final RetryPolicy RETRIES = RetryPolicy.builder()
            .initialDelay(Duration.ofMillis(100))
            .maxDelay(Duration.ofMillis(400))
            .jitter(RetryPolicy.Jitter.NONE)
            .maxRetries(20)
            .build();
    private static final ThreadLocal<World> next = new ThreadLocal<>();

    @AfterContainer
    static void report() {
        if (tries.get() < TRIES) {
            return; // failed: jqwik printed the moves
        }
        System.out.println("CHAOS name=relay-tenants tries=" + tries + " moves=" + moves + " published=" + published
                + " listeners_dropped=" + dropped + " migrated=" + migrated + " failed_sends=" + failedSends
                + " frozen_sends=" + frozenSends + " killed_batches=" + killedBatches
                + " v10_listener_polls=" + filteredPolls
                + " lost=0 twice=0 wrong_tenant=0 foreign_polls=0");
    }

    /**
     * One tenant as a try begins: its schema version (9 or 10), table prefix, whether its name needs quoting, and
     * whether its relay's publisher overrides {@code publishAll} (its sends bounded by the relay's send timeout).
     */
    record Tenant(int version, String prefix, boolean quoted, boolean concurrent) {
        Tenant(int version, String prefix, boolean quoted) {
            this(version, prefix, quoted, false);
        }
    }

    @Provide
    Arbitrary<List<Tenant>> tenants() {
        return Combinators.combine(
                        Arbitraries.of(9, 10),
                        Arbitraries.of("once_", "t_"),
                        Arbitraries.of(false, true),
                        Arbitraries.of(false, true))
                .as(Tenant::new)
                .list()
                .ofMinSize(2)
                .ofMaxSize(4);
    }

    @Property(tries = TRIES)
    void everyRowIsSentOnceByItsTenantPromptlyAndV10RelaysPollForNoOtherSchema(
            @ForAll("tenants") List<Tenant> tenants, @ForAll("chains") ActionChain<World> chain) throws Exception {
        try (World w = new World(tenants)) {
            next.set(w);
            chain.run();
            w.finish();
            tries.incrementAndGet();
        }
    }

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        Arbitrary<Integer> tenant = Arbitraries.integers().between(0, 3);
        return ActionChain.<World>startWith(next::get)
                .withAction(
                        4,
                        move(
                                w -> true,
                                Combinators.combine(
                                                tenant, Arbitraries.integers().between(1, 3))
                                        .as(List::of),
                                "commit",
                                (w, a) -> w.commit(a.get(0), a.get(1))))
                .withAction(2, move(w -> true, tenant, "hold", World::hold))
                .withAction(2, move(w -> true, tenant, "release", World::release))
                .withAction(3, move(w -> true, tenant, "start", World::start))
                .withAction(2, move(w -> true, tenant, "stop", World::stop))
                .withAction(2, move(w -> true, tenant, "migrate", World::migrate))
                .withAction(2, move(w -> true, tenant, "drop listener", World::drop))
                .withAction(
                        2,
                        move(
                                w -> true,
                                Combinators.combine(
                                                tenant, Arbitraries.integers().between(1, 3))
                                        .as(List::of),
                                "fail sends",
                                (w, a) -> w.fail(a.get(0), a.get(1))))
                .withAction(2, move(w -> true, tenant, "kill batch", World::kill))
                .withAction(
                        1,
                        move(
                                w -> true,
                                Combinators.combine(
                                                tenant, Arbitraries.integers().between(1, 3))
                                        .as(List::of),
                                "freeze sends",
                                (w, a) -> w.freeze(a.get(0), a.get(1))))
                .withMaxTransformations(24);
    }

    // A move whose tenant does not fit (no relay to stop, ...) does nothing: jqwik then draws the next one.
    private static <T> Action<World> move(
            Predicate<World> pre, Arbitrary<T> arg, String name, BiConsumer<World, T> body) {
        return StateMachines.move(pre, arg, name, (w, a) -> {
            w.log.add(name + " " + a);
            moves.incrementAndGet();
            body.accept(w, a);
            w.settle();
        });
    }

    /** One tenant of a try: its schema, pool, relay and what the model expects of them. */
    static final class Tenants {
        final int index;
        final String schema;
        final String prefix;
        final boolean quoted;
        final boolean concurrent;
        final String app;
        final String url;
        final HikariDataSource pool;
        final CountingDataSource counting;
        final Set<String> committed = ConcurrentHashMap.newKeySet();
        int version;
        Future<?> migration;
        OutboxRelay relay;
        Connection held;
        String heldLabel;
        int rows;
        // the cost bound of the running relay: null while its listener may have opened on a V9 schema
        Long baseline;
        int commitsSince;
        int dropsSince;
        int killsSince;
        // the running relay's publisher fails (or freezes) this many sends next; the sends it failed or froze since
        // the cost bound's baseline
        final AtomicInteger failing = new AtomicInteger();
        final AtomicInteger freezing = new AtomicInteger();
        final AtomicInteger failedSince = new AtomicInteger();
        // the running relay's next send waits here until the test has killed its batch's backend
        final AtomicReference<Stall> stall = new AtomicReference<>();

        Tenants(int index, Tenant spec, String baseUrl) {
            this.index = index;
            long n = SEQUENCE.incrementAndGet();
            long pid = ProcessHandle.current().pid();
            this.schema = spec.quoted() ? "Rg-" + pid + "-" + n : "rg_" + pid + "_" + n;
            this.prefix = spec.prefix();
            this.quoted = spec.quoted();
            this.concurrent = spec.concurrent();
            this.version = spec.version();
            this.app = "relaygen-" + pid + "-" + n;
            this.url = baseUrl + (baseUrl.contains("?") ? "&" : "?") + "ApplicationName=" + app
                    + (quoted ? "" : "&currentSchema=" + schema);
            HikariConfig config = new HikariConfig();
            config.setJdbcUrl(url);
            config.setMaximumPoolSize(6);
            config.setMinimumIdle(0);
            config.setPoolName(app);
            if (quoted) {
                config.setConnectionInitSql(searchPath());
            }
            this.pool = new HikariDataSource(config);
            this.counting = new CountingDataSource(pool);
        }

        String searchPath() {
            return "SET search_path TO \"" + schema + "\"";
        }

        long polls() {
            return counting.prepared().stream()
                    .filter(sql -> sql.contains(" AS pred "))
                    .count();
        }

        boolean migrating() {
            return migration != null;
        }

        @Override
        public String toString() {
            return "tenant " + index + " (" + schema + ", prefix " + prefix + ", V" + version
                    + (concurrent ? ", concurrent publisher" : "") + ")";
        }
    }

    /** A send held in the relay's thread: {@code entered} once it is, it goes on once {@code go} is counted down. */
    record Stall(CountDownLatch entered, CountDownLatch go) {
        Stall() {
            this(new CountDownLatch(1), new CountDownLatch(1));
        }
    }

    /**
     * A tenant's publisher, sending in the relay's thread: records each send, fails the sends asked of it, holds the
     * one a kill waits for. A send held for a kill is recorded apart: its batch cannot mark it, so the row is sent
     * again (at least once), and only that second send counts as its publication.
     */
    static class TenantPublisher implements Publisher {
        final Tenants t;
        final World w;

        TenantPublisher(Tenants t, World w) {
            this.t = t;
            this.w = w;
        }

        @Override
        public Receipt publish(OutboxMessage m) throws Exception {
            String label = new String(m.payload(), StandardCharsets.UTF_8);
            Stall stall = t.stall.getAndSet(null);
            if (stall != null) {
                stall.entered().countDown();
                if (!stall.go().await(PROMPT_SECONDS * 3, TimeUnit.SECONDS)) {
                    w.violations.add("the send of " + label + " held for a kill was never let go");
                }
                w.killedSends.add(label);
                return Receipt.NONE;
            }
            if (t.failing.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                t.failedSince.incrementAndGet();
                failedSends.incrementAndGet();
                throw PublishFailure.retryable("fails on purpose: " + label, Receipt.NONE, null);
            }
            if (!label.startsWith("t" + t.index + "-")) {
                w.violations.add("relay of " + t + " published " + label);
            }
            w.sends.computeIfAbsent(label, k -> new CopyOnWriteArrayList<>()).add(t.index);
            published.incrementAndGet();
            return Receipt.NONE;
        }
    }

    /**
     * The same, overriding {@code publishAll} (so the relay bounds its sends by its send timeout): a frozen send's stage
     * never completes.
     */
    static final class ConcurrentTenantPublisher extends TenantPublisher {
        ConcurrentTenantPublisher(Tenants t, World w) {
            super(t, w);
        }

        @Override
        public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
            List<CompletionStage<Receipt>> stages = new ArrayList<>(messages.size());
            for (OutboxMessage m : messages) {
                if (t.stall.get() == null && t.freezing.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                    t.failedSince.incrementAndGet();
                    frozenSends.incrementAndGet();
                    stages.add(new CompletableFuture<>());
                    continue;
                }
                try {
                    stages.add(CompletableFuture.completedFuture(publish(m)));
                } catch (Exception e) {
                    stages.add(CompletableFuture.failedFuture(e));
                }
            }
            return stages;
        }
    }

    static final class World implements AutoCloseable {
        final List<String> log = new ArrayList<>();
        final List<Tenants> tenants = new ArrayList<>();
        final Map<String, List<Integer>> sends = new ConcurrentHashMap<>();
        final List<String> killedSends = new CopyOnWriteArrayList<>();
        final List<String> violations = new CopyOnWriteArrayList<>();
        final ExecutorService migrations = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "relaygen-migrate");
            t.setDaemon(true);
            return t;
        });
        final Connection admin;

        World(List<Tenant> specs) throws SQLException {
            String url = TestPostgres.shared().jdbcUrl();
            admin = DriverManager.getConnection(url);
            for (Tenant spec : specs) {
                Tenants t = new Tenants(tenants.size(), spec, url);
                tenants.add(t);
                try (Statement s = admin.createStatement()) {
                    s.execute("CREATE SCHEMA \"" + t.schema + "\"");
                }
                SchemaScript.run(t.pool, upTo(t.pool, t.prefix, spec.version()));
            }
            log.add("tenants " + tenants);
        }

        // The statements that take an empty schema to {@code version}, recorded as Schema.migrate records them.
        private static List<String> upTo(HikariDataSource ds, String prefix, int version) throws SQLException {
            Dialect dialect;
            try (Connection c = ds.getConnection()) {
                dialect = Dialects.detect(c);
            }
            int n = 1
                    + Schema.migrations(dialect, prefix).stream()
                            .filter(m -> m.version() <= version)
                            .mapToInt(m -> m.statements().size() + 1)
                            .sum();
            return Schema.freshDatabaseStatements(dialect, prefix).subList(0, n);
        }

        Tenants tenant(int i) {
            return tenants.get(i % tenants.size());
        }

        void commit(int i, int rows) {
            Tenants t = tenant(i);
            if (t.migrating()) {
                return; // it would wait for the migration, which may wait for this tenant's open transaction
            }
            List<String> labels = new ArrayList<>();
            try (Connection c = t.pool.getConnection()) {
                c.setAutoCommit(false);
                for (int r = 0; r < rows; r++) {
                    labels.add(insert(t, c));
                }
                countCommit(t);
                c.commit();
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            t.committed.addAll(labels);
        }

        void hold(int i) {
            Tenants t = tenant(i);
            if (t.held != null || t.migrating()) {
                return;
            }
            try {
                Connection c = t.pool.getConnection();
                c.setAutoCommit(false);
                t.heldLabel = insert(t, c);
                t.held = c;
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        void release(int i) {
            Tenants t = tenant(i);
            if (t.held == null) {
                return;
            }
            try (Connection c = t.held) {
                countCommit(t);
                c.commit();
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            t.held = null;
            t.committed.add(t.heldLabel);
        }

        private static String insert(Tenants t, Connection c) throws SQLException {
            String label = "t" + t.index + "-" + ++t.rows;
            JdbcOutbox outbox = new JdbcOutbox(
                    c, Dialects.detect(c), t.prefix, OutboxRows.CONSUMER, label, Clock.systemUTC(), OutboxHeaders.NONE);
            outbox.add("d", null, label.getBytes(StandardCharsets.UTF_8), Map.of(), null);
            outbox.flush();
            return label;
        }

        private static void countCommit(Tenants t) {
            if (t.relay != null) {
                t.commitsSince++; // before the commit: its wake-up may come before this thread goes on
            }
        }

        void start(int i) {
            Tenants t = tenant(i);
            if (t.relay != null) {
                return;
            }
            // Whether its listener finds V10 is known only when the schema was at V10 before the relay started.
            t.baseline = t.version == 10 && !t.migrating() ? t.polls() : null;
            t.commitsSince = 0;
            t.dropsSince = 0;
            t.killsSince = 0;
            t.failedSince.set(0);
            t.relay = OutboxRelay.builder()
                    .dataSource(t.counting.dataSource())
                    .tablePrefix(t.prefix)
                    .name("t" + t.index)
                    .pollInterval(Duration.ofHours(1))
                    .statsInterval(Duration.ofHours(1))
                    .meterRegistry(new SimpleMeterRegistry())
                    .retryPolicy(RETRIES)
                    .sendTimeout(Duration.ofMillis(SEND_TIMEOUT_MILLIS))
                    .publisher(t.concurrent ? new ConcurrentTenantPublisher(t, this) : new TenantPublisher(t, this))
                    .build();
            int before = t.counting.prepared().size();
            t.relay.start();
            if (t.migrating()) {
                // V10 waits for this tenant's open transaction, and the relay's marks of sent rows for V10
                awaitTrue(() -> listenerPid(t) != 0, "the relay of " + t + " LISTENs");
                return;
            }
            // Its listener opened, then its first poll committed, then it read its gauges: a row committed from now on
            // reaches it only by a wake-up.
            awaitTrue(
                    () -> t.counting.prepared().stream().skip(before).anyMatch(sql -> sql.contains("status = 'dead')")),
                    "the relay of " + t + " polls once as it starts");
        }

        void stop(int i) {
            Tenants t = tenant(i);
            if (t.relay == null || t.migrating()) {
                return; // its batch may be waiting for the migration, which waits for an open transaction
            }
            t.relay.close();
            t.relay = null;
            t.baseline = null;
            t.failing.set(0);
            t.freezing.set(0);
        }

        // Set, not added: a row fails at most a few times in a row (the oracle waits for it after every move).
        void fail(int i, int sends) {
            Tenants t = tenant(i);
            if (t.relay == null) {
                return;
            }
            t.failing.set(sends);
        }

        // Freezes the sends of as many rows, committed here: the relay's send timeout fails each, and the row is tried
        // again.
        void freeze(int i, int sends) {
            Tenants t = tenant(i);
            if (t.relay == null || !t.concurrent || t.migrating()) {
                return;
            }
            t.freezing.set(sends);
            commit(i, sends);
        }

        /**
         * Commits a row, holds its send in the relay's thread (its batch locked it), terminates the backend of that
         * batch, and lets the send go on: the batch's marks fail, it rolls back, and the relay must try it again.
         */
        void kill(int i) {
            Tenants t = tenant(i);
            if (t.relay == null || t.migrating()) {
                return; // during a migration the batch's marks would wait for it, and the row's commit too
            }
            Stall stall = new Stall();
            t.stall.set(stall);
            commit(i, 1);
            awaitTrue(
                    () -> stall.entered().getCount() == 0,
                    "the relay of " + t + " sends a row in a batch (its row committed, a wake-up due)");
            long pid = awaitValue(() -> batchPid(t), "the backend of the batch of " + t + " holds row locks");
            t.killsSince++;
            terminate(pid);
            awaitTrue(() -> !alive(pid), "the batch backend " + pid + " of " + t + " ends");
            stall.go().countDown();
            killedBatches.incrementAndGet();
        }

        // The one backend of the tenant's pool whose open transaction locked rows of its outbox: the relay's batch
        // (the test's own transactions insert, they lock no row).
        private long batchPid(Tenants t) {
            try (PreparedStatement p = admin.prepareStatement("SELECT DISTINCT l.pid FROM pg_locks l"
                    + " JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.application_name = ?"
                    + " AND l.relation = to_regclass(?) AND l.mode = 'RowShareLock'")) {
                p.setString(1, t.app);
                p.setString(2, "\"" + t.schema + "\".\"" + t.prefix + "outbox\"");
                try (ResultSet rs = p.executeQuery()) {
                    if (!rs.next()) {
                        return 0;
                    }
                    long pid = rs.getLong(1);
                    if (rs.next()) {
                        throw new IllegalStateException("two backends of " + t + " lock outbox rows");
                    }
                    return pid;
                }
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        private void terminate(long pid) {
            try (PreparedStatement p = admin.prepareStatement("SELECT pg_terminate_backend(?::int)")) {
                p.setLong(1, pid);
                p.executeQuery().close();
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        void migrate(int i) {
            Tenants t = tenant(i);
            if (t.version == 10 || t.migrating()) {
                return;
            }
            t.migration = migrations.submit(() -> {
                try (Connection c = DriverManager.getConnection(t.url.replace(t.app, t.app + "-migrate"))) {
                    if (t.quoted) {
                        try (Statement s = c.createStatement()) {
                            s.execute(t.searchPath());
                        }
                    }
                    return Schema.migrate(c, t.prefix);
                }
            });
        }

        void drop(int i) {
            Tenants t = tenant(i);
            if (t.relay == null) {
                return;
            }
            long pid = awaitValue(
                    () -> listenerPid(t), t + "'s relay LISTENs (a listener backend of its pool) within " + PROMPT);
            if (t.baseline == null && t.version == 10 && !t.migrating()) {
                t.baseline = t.polls(); // the listener it opens next finds V10
                t.commitsSince = 0;
                t.dropsSince = 0;
                t.killsSince = 0;
                t.failedSince.set(0);
            }
            t.dropsSince++;
            terminate(pid);
            awaitTrue(() -> !alive(pid), "the listener backend " + pid + " of " + t + " ends");
            dropped.incrementAndGet();
        }

        private long listenerPid(Tenants t) {
            try (PreparedStatement p = admin.prepareStatement(
                    "SELECT pid FROM pg_stat_activity" + " WHERE application_name = ? AND query LIKE ? ORDER BY pid")) {
                p.setString(1, t.app);
                p.setString(2, LISTENER_QUERY);
                try (ResultSet rs = p.executeQuery()) {
                    return rs.next() ? rs.getLong(1) : 0;
                }
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        private boolean alive(long pid) {
            try (PreparedStatement p =
                    admin.prepareStatement("SELECT count(*) FROM pg_stat_activity WHERE pid = ?::int")) {
                p.setLong(1, pid);
                try (ResultSet rs = p.executeQuery()) {
                    rs.next();
                    return rs.getLong(1) > 0;
                }
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        private boolean migrationWaits(Tenants t) {
            try (PreparedStatement p = admin.prepareStatement(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND wait_event_type = 'Lock'")) {
                p.setString(1, t.app + "-migrate");
                try (ResultSet rs = p.executeQuery()) {
                    rs.next();
                    return rs.getLong(1) > 0;
                }
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        /**
         * After every move: migrations done or waiting for a lock (an open transaction, or the migration lock another
         * tenant's waiting migration of the same prefix holds); then the oracle.
         */
        void settle() {
            for (Tenants t : tenants) {
                if (t.migrating()) {
                    Future<?> f = t.migration;
                    awaitTrue(() -> f.isDone() || migrationWaits(t), "the migration of " + t + " ends or waits");
                    if (f.isDone()) {
                        try {
                            f.get();
                        } catch (Exception e) {
                            throw new IllegalStateException("migrating " + t + " failed", e);
                        }
                        t.migration = null;
                        t.version = 10;
                        migrated.incrementAndGet();
                    }
                }
            }
            for (Tenants t : tenants) {
                if (t.relay != null) {
                    awaitTrue(
                            () -> t.committed.stream().allMatch(sends::containsKey),
                            "every committed row of " + t + " is published within " + PROMPT + " (poll interval 1 h)");
                }
            }
            check();
        }

        void check() {
            assertThat(violations)
                    .as("rows published by another tenant's relay; moves " + log)
                    .isEmpty();
            assertThat(sends.entrySet().stream()
                            .filter(e -> e.getValue().size() > 1)
                            .map(Map.Entry::getKey)
                            .toList())
                    .as("rows published more than once; moves " + log)
                    .isEmpty();
            for (Tenants t : tenants) {
                if (t.relay != null && t.baseline != null) {
                    long polls = t.polls() - t.baseline;
                    assertThat(polls)
                            .as(
                                    "lock queries of the relay of %s, whose listener found V10, since it started or its"
                                            + " listener was dropped: at most 2 + 2 x its %d commits + 2 x its %d"
                                            + " dropped listeners + 2 x its %d failed or frozen sends + 2 x its %d"
                                            + " killed batches, none for other schemas' commits; moves %s",
                                    t, t.commitsSince, t.dropsSince, t.failedSince.get(), t.killsSince, log)
                            .isLessThanOrEqualTo(2
                                    + 2L * t.commitsSince
                                    + 2L * t.dropsSince
                                    + 2L * t.failedSince.get()
                                    + 2L * t.killsSince);
                }
            }
        }

        /** The open transactions commit, the migrations end, every relay runs: every committed row is sent once. */
        void finish() {
            for (Tenants t : tenants) {
                release(t.index);
            }
            for (Tenants t : tenants) {
                if (t.migrating()) {
                    Future<?> f = t.migration;
                    awaitTrue(f::isDone, "the migration of " + t + " ends once no transaction is open");
                }
            }
            settle();
            for (Tenants t : tenants) {
                start(t.index);
            }
            settle();
            for (Tenants t : tenants) {
                if (t.baseline != null) {
                    filteredPolls.addAndGet(t.polls() - t.baseline);
                }
            }
            Set<String> all =
                    tenants.stream().flatMap(t -> t.committed.stream()).collect(Collectors.toSet());
            assertThat(sends.keySet()).as("published rows, moves " + log).isEqualTo(all);
        }

        private void awaitTrue(BooleanSupplier condition, String what) {
            long deadline = System.nanoTime() + PROMPT.toNanos();
            while (!condition.getAsBoolean()) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("not true within " + PROMPT + ": " + what + "; moves " + log
                            + "; published " + sends.keySet());
                }
                pause();
            }
        }

        private long awaitValue(java.util.function.LongSupplier value, String what) {
            long[] v = new long[1];
            awaitTrue(() -> (v[0] = value.getAsLong()) != 0, what);
            return v[0];
        }

        // Waiting on the database or another thread: a short park between looks, not a sleep standing for an event.
        private static void pause() {
            java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }

        @Override
        public String toString() {
            return "moves " + log;
        }

        @Override
        public void close() {
            for (Tenants t : tenants) {
                if (t.held != null) {
                    try (Connection c = t.held) {
                        c.rollback();
                    } catch (SQLException ignored) {
                        // the try failed already; its schema is dropped below
                    }
                }
            }
            for (Tenants t : tenants) {
                if (t.relay != null) {
                    t.relay.close(); // its batch waited for no migration past the rollbacks above
                }
            }
            migrations.shutdownNow();
            for (Tenants t : tenants) {
                t.pool.close();
                try (Statement s = admin.createStatement()) {
                    s.execute("DROP SCHEMA IF EXISTS \"" + t.schema + "\" CASCADE");
                } catch (SQLException e) {
                    throw new IllegalStateException(e);
                }
            }
            try {
                admin.close();
            } catch (SQLException ignored) {
                // a closed administrative connection loses nothing
            }
        }
    }
}
