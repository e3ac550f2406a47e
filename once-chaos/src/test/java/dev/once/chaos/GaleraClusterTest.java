package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Schema;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Receipt;
import dev.once.testsupport.MutableClock;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Multi-primary: a three-node MariaDB Galera cluster of the test's own ({@link LocalGalera}), a
 * consumer writing through each node. Galera checks conflicts only at commit (certification), so the
 * same event claimed on two nodes at once is not a lock wait as on one server: both claims succeed
 * locally and one commit fails with ER_LOCK_DEADLOCK (1213, SQLState 40001). The engine must retry
 * that as a conflict and end with DUPLICATE. A node is SIGKILLed mid-run; each consumer's multi-host
 * URL moves on to the next node. Fencing tokens are raced across nodes with the writer's node behind
 * in applying the cluster's writes, where a read answers from the node's local, older state. A
 * lease is raced across nodes, and two exclusive relays on two nodes share one.
 */
@Tag("chaos")
class GaleraClusterTest {

    private static final String RACE = "race";

    private static LocalGalera galera;
    private static final AtomicInteger DATABASES = new AtomicInteger();

    @BeforeAll
    static void startCluster() throws Exception {
        LocalGalera.assumeAvailable();
        long started = System.nanoTime();
        galera = LocalGalera.start(3);
        System.out.printf("galera: 3 nodes synced in %.1f s%n", (System.nanoTime() - started) / 1e9);
    }

    @AfterAll
    static void stopCluster() throws Exception {
        if (galera != null) {
            galera.close();
        }
    }

    @Test
    void consumersOnThreeNodesApplyEveryEventOnceThroughCertificationConflictsAndANodeKill() throws Exception {
        String db = database();
        int events = Chaos.scaled(2_000);
        int races = Chaos.scaled(40);
        long started = System.nanoTime();
        List<HikariDataSource> pools = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                pools.add(Databases.pool(multiHostUrl(i, db), 4, "galera-n" + (i + 1)));
            }
            Schema.migrate(pools.get(0));
            createEffects(pools.get(0));
            caughtUp(pools);
            Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
            Handler handler = (d, tx) -> {
                runs.computeIfAbsent(d.eventId(), k -> new AtomicInteger()).incrementAndGet();
                if (d.headers().containsKey(RACE)) {
                    Thread.sleep(30); // both nodes hold their claim uncommitted at once
                }
                Effects.apply(tx.connection(), d);
            };
            List<IdempotentConsumer> consumers = new ArrayList<>();
            for (HikariDataSource pool : pools) {
                consumers.add(IdempotentConsumer.builder()
                        .dataSource(pool)
                        .consumer("galera")
                        .handler(handler)
                        .maxConflictRetries(20)
                        .build());
            }

            // Phase 1: the same event claimed on two nodes at once.
            RaceTally tally = race(races, 3, (node, d) -> consumers.get(node).process(d));

            // Phase 2: load through all three nodes, 10% duplicates, node 3 SIGKILLed a third of the way.
            Broker broker = NetworkFaultsUnderLoadTest.publish(events, new Random(23));
            List<Load> loads = new ArrayList<>();
            double killedAtSeconds;
            long loadStarted = System.nanoTime();
            double loadSeconds;
            try {
                for (IdempotentConsumer once : consumers) {
                    Predicate<Delivery> consume = d -> {
                        try {
                            return once.process(d).shouldAcknowledge();
                        } catch (RuntimeException e) {
                            return false; // no connection while the pool moves to the next node: redelivered
                        }
                    };
                    loads.add(new Load(broker, 2, consume));
                }
                await("a third of the events").atMost(Duration.ofMinutes(2)).until(() -> broker.acks() >= events / 3);
                galera.kill(galera.node(2));
                killedAtSeconds = (System.nanoTime() - started) / 1e9;
                await("every event acknowledged with node 3 dead")
                        .atMost(Duration.ofMinutes(3))
                        .until(broker::drained);
                loadSeconds = (System.nanoTime() - loadStarted) / 1e9;
            } finally {
                for (Load l : loads) {
                    l.close();
                }
            }
            loads.forEach(Load::check);
            Map<String, Long> counts = Effects.counts(pools.get(0));
            long raceEffects = tally.ids.stream()
                    .filter(id -> counts.getOrDefault(id, 0L) > 0)
                    .count();
            List<String> acknowledged = new ArrayList<>(broker.acknowledged());
            acknowledged.addAll(tally.ids);
            long handlerRuns =
                    runs.values().stream().mapToLong(AtomicInteger::get).sum();
            long effects = counts.values().stream().mapToLong(Long::longValue).sum();
            Chaos.Figure f = Chaos.figure("galera-consumers")
                    .rounds(events + races)
                    .lost(Effects.lost(acknowledged, counts))
                    .appliedTwice(Effects.appliedTwice(counts))
                    .put("nodes", 3)
                    .put("races", races)
                    .put("race_applied", tally.applied.get())
                    .put("race_duplicates", tally.duplicates.get())
                    .put("conflicts_retried", handlerRuns - effects)
                    .put("race_effects", raceEffects)
                    .put("deliveries", broker.deliveries())
                    .put("redeliveries", broker.redeliveries())
                    .put("node_killed_at_s", killedAtSeconds)
                    .put("load_events_per_s", broker.acks() / loadSeconds)
                    .put("total_s", (System.nanoTime() - started) / 1e9)
                    .print();
            assertThat(f.get("lost")).as("acknowledged events missing").isZero();
            assertThat(f.get("applied_twice"))
                    .as("events applied more than once")
                    .isZero();
            assertThat(tally.applied.get())
                    .as("each raced event applied once and reported DUPLICATE on the other node")
                    .isEqualTo(races);
            assertThat(tally.duplicates.get()).isEqualTo(races);
            assertThat(f.get("conflicts_retried"))
                    .as("certification conflicts met and retried (else the race did not overlap)")
                    .isPositive();
        } finally {
            for (HikariDataSource pool : pools) {
                pool.close();
            }
        }
    }

    /**
     * The deliberate break of the test above: the claim checked outside the effect's transaction
     * (a SELECT, the effect committed on its own, the claim recorded after). Certification cannot
     * see a conflict between two effects that touch different rows, so both nodes apply.
     */
    @Test
    void aClaimCheckedOutsideTheTransactionAppliesTwiceAcrossNodes() throws Exception {
        String db = database();
        int races = Chaos.scaled(30);
        List<HikariDataSource> pools = new ArrayList<>();
        try {
            for (int i = 0; i < 2; i++) {
                pools.add(Databases.pool(galera.node(i).jdbcUrl(db), 4, "galera-naive-n" + (i + 1)));
            }
            Schema.migrate(pools.get(0));
            createEffects(pools.get(0));
            caughtUp(pools);
            RaceTally tally = race(races, 2, (node, d) -> naive(pools.get(node), d));
            Map<String, Long> counts = Effects.counts(pools.get(0));
            Chaos.Figure f = Chaos.figure("galera-claim-outside-tx")
                    .rounds(races)
                    .lost(Effects.lost(tally.ids, counts))
                    .appliedTwice(Effects.appliedTwice(counts))
                    .put("nodes", 2)
                    .broken("claim_checked_outside_the_transaction")
                    .print();
            assertThat(f.get("applied_twice"))
                    .as("the break must show the double apply the claim in the transaction prevents")
                    .isPositive();
        } finally {
            for (HikariDataSource pool : pools) {
                pool.close();
            }
        }
    }

    /**
     * Fencing across nodes: the old holder (token t) writes through node 2 while node 2 is still
     * applying a large write from node 1 that the new holder's fence (t + 1) committed behind. Node
     * 2's local fence row still says t, so a check that only reads it accepts the stale writer, and
     * the write commits after the newer token's did: certification sees no conflict unless the check
     * itself wrote the fence row. Oracle: an old-token write whose COMMIT started after the new
     * holder's commit returned, in this JVM's monotonic clock, is a stale write accepted.
     */
    @Test
    void aStaleFencingTokenIsRefusedOnANodeThatIsBehind() throws Exception {
        String db = database();
        int rounds = Chaos.scaled(3);
        try (HikariDataSource n1 = Databases.pool(galera.node(0).jdbcUrl(db), 2, "galera-fence-n1");
                HikariDataSource n2 = Databases.pool(galera.node(1).jdbcUrl(db), 2, "galera-fence-n2");
                // The ballast's writes outlived the pools' 10 s socket timeout on a loaded machine: 2 minutes here.
                Connection ballast = DriverManager.getConnection(galera.node(0).jdbcUrl(db) + "&socketTimeout=120000");
                Statement ballastWrites = ballast.createStatement()) {
            Schema.migrate(n1);
            createEffects(n1);
            // The rows each round's UPDATE rewrites in one write set, for node 2 to fall behind applying.
            // Inserted 10,000 per commit: the 100,000-row insert in one commit was the slow, flaky step.
            ballastWrites.execute("CREATE TABLE ballast (id int PRIMARY KEY, v int NOT NULL)");
            int ballastRows = Chaos.scaled(100_000);
            for (int from = 1; from <= ballastRows; from += 10_000) {
                ballastWrites.execute("INSERT INTO ballast SELECT seq, 0 FROM seq_" + from + "_to_"
                        + Math.min(ballastRows, from + 9_999));
            }
            caughtUp(List.of(n1, n2));
            AtomicLong token = new AtomicLong(1);
            Handler fenced = (d, tx) -> {
                tx.fence("ledger", Long.parseLong(d.headers().get("token")));
                Effects.apply(tx.connection(), d);
            };
            IdempotentConsumer newHolder = IdempotentConsumer.builder()
                    .dataSource(n1)
                    .consumer("fence")
                    .handler(fenced)
                    .build();
            IdempotentConsumer oldHolder = IdempotentConsumer.builder()
                    .dataSource(n2)
                    .consumer("fence")
                    .handler(fenced)
                    .maxConflictRetries(20)
                    .build();
            long stale = 0;
            long refused = 0;
            long laggedReads = 0;
            for (int r = 0; r < rounds; r++) {
                long old = token.getAndIncrement();
                long newer = old + 1;
                // The old holder writes once while it holds the lease: every node's fence says `old`.
                assertThat(oldHolder
                                .process(fencedDelivery("r" + r + "-old-first", old))
                                .status())
                        .isEqualTo(Outcome.Status.APPLIED);
                awaitEverywhere(db, old);
                // Node 2 falls behind: a large write from node 1 to apply, then the new holder's fence.
                ballastWrites.executeUpdate("UPDATE ballast SET v = v + 1");
                assertThat(newHolder
                                .process(fencedDelivery("r" + r + "-new", newer))
                                .status())
                        .isEqualTo(Outcome.Status.APPLIED);
                long newerCommitted = System.nanoTime();
                if (localFence(n2) < newer) {
                    laggedReads++;
                }
                // The old holder, unaware its lease was taken over, writes again through node 2.
                long attemptStarted = System.nanoTime();
                Outcome o = oldHolder.process(fencedDelivery("r" + r + "-old-late", old));
                if (o.status() == Outcome.Status.APPLIED && attemptStarted > newerCommitted) {
                    stale++;
                } else {
                    refused++;
                }
                token.incrementAndGet();
            }
            Chaos.Figure f = Chaos.figure("galera-fence")
                    .rounds(rounds)
                    .put("stale_writes_accepted", stale)
                    .put("stale_writes_refused", refused)
                    .put("node_behind_at_check", laggedReads)
                    .print();
            assertThat(f.get("node_behind_at_check"))
                    .as("node 2 must have been behind for the check to mean anything")
                    .isPositive();
            assertThat(f.get("stale_writes_accepted"))
                    .as("writes with a superseded fencing token committed after the newer token")
                    .isZero();
        }
    }

    /**
     * Leases across nodes. Two {@link Leases}, one writing through each of two nodes, race for one
     * lease at the same instant, round after round, the lease lapsed before each (one shared clock
     * moved to the last winner's expiry): both acquisitions may run locally at once, and
     * certification then commits one and refuses the other (1213), which {@code acquire} tries again
     * and is refused. Exactly one holder per round, the token one more each time. Then two exclusive
     * relays, one on each node, under one lease: one publishes every row once, the other none.
     */
    @Test
    void aLeaseRacedOnTwoNodesHasOneHolderPerRoundAndOneOfTwoRelaysPublishes() throws Exception {
        String db = database();
        int rounds = Chaos.scaled(30);
        int rows = Chaos.scaled(200);
        Duration ttl = Duration.ofSeconds(30);
        MutableClock clock = MutableClock.startingNow();
        try (HikariDataSource n1 = Databases.pool(galera.node(0).jdbcUrl(db), 4, "galera-lease-n1");
                HikariDataSource n2 = Databases.pool(galera.node(1).jdbcUrl(db), 4, "galera-lease-n2")) {
            List<HikariDataSource> nodes = List.of(n1, n2);
            Schema.migrate(n1);
            createEffects(n1);
            caughtUp(nodes);
            List<Leases> leases = new ArrayList<>();
            for (HikariDataSource n : nodes) {
                leases.add(Leases.builder().dataSource(n).clock(clock).build());
            }
            long conflictsBefore = conflicts(nodes);
            int[] wins = new int[2];
            int split = 0;
            ExecutorService pool = Executors.newFixedThreadPool(2);
            try {
                for (int r = 1; r <= rounds; r++) {
                    CyclicBarrier barrier = new CyclicBarrier(2);
                    List<Future<Optional<Lease>>> both = new ArrayList<>();
                    for (int i = 0; i < 2; i++) {
                        Leases mine = leases.get(i);
                        String owner = "n" + (i + 1);
                        both.add(pool.submit(() -> {
                            barrier.await(30, TimeUnit.SECONDS);
                            return mine.acquire("galera-lease", owner, ttl);
                        }));
                    }
                    List<Lease> won = new ArrayList<>();
                    for (int i = 0; i < 2; i++) {
                        Optional<Lease> l = both.get(i).get(2, TimeUnit.MINUTES);
                        if (l.isPresent()) {
                            won.add(l.get());
                            wins[i]++;
                        }
                    }
                    if (won.size() != 1) {
                        split++;
                        continue;
                    }
                    assertThat(won.get(0).token())
                            .as("round %d's token: one more than the last round's", r)
                            .isEqualTo(r);
                    clock.advance(Duration.between(clock.instant(), won.get(0).expiresAt()));
                }
            } finally {
                pool.shutdownNow();
            }
            long conflicts = conflicts(nodes) - conflictsBefore;

            // Two exclusive relays, one on each node, drain the outbox together under one lease.
            IdempotentConsumer writer = IdempotentConsumer.builder()
                    .dataSource(n1)
                    .consumer("galera-relay")
                    .handler((d, tx) -> tx.outbox()
                            .add("orders", null, d.eventId().getBytes(StandardCharsets.UTF_8), Map.of(), null))
                    .build();
            for (int i = 0; i < rows; i++) {
                writer.process(Delivery.builder("row-" + i).build());
            }
            caughtUp(nodes);
            Map<String, List<String>> published = new ConcurrentHashMap<>();
            List<OutboxRelay> relays = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                String name = "relay-n" + (i + 1);
                relays.add(OutboxRelay.builder()
                        .dataSource(nodes.get(i))
                        .name(name)
                        .clock(clock)
                        .lease("galera-relay", ttl)
                        .publisher(m -> {
                            published
                                    .computeIfAbsent(m.eventId(), k -> new CopyOnWriteArrayList<>())
                                    .add(name);
                            return Receipt.NONE;
                        })
                        .build());
            }
            OutboxAdmin admin =
                    OutboxAdmin.builder().dataSource(n1).clock(clock).build();
            ExecutorService relaying = Executors.newFixedThreadPool(2);
            try {
                List<Future<?>> loops = new ArrayList<>();
                for (OutboxRelay relay : relays) {
                    loops.add(relaying.submit(() -> {
                        while (published.size() < rows
                                && !Thread.currentThread().isInterrupted()) {
                            relay.relayOnce();
                        }
                        return null;
                    }));
                }
                for (Future<?> loop : loops) {
                    loop.get(3, TimeUnit.MINUTES);
                }
            } finally {
                relaying.shutdownNow();
                relays.forEach(OutboxRelay::close);
            }
            await("every row marked sent on node 1")
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> admin.stats().pending() == 0);
            long twice = published.values().stream().filter(l -> l.size() > 1).count();
            long publishers =
                    published.values().stream().flatMap(List::stream).distinct().count();
            Chaos.Figure f = Chaos.figure("galera-lease")
                    .rounds(rounds)
                    .lost(rows - published.size())
                    .appliedTwice(twice)
                    .put("nodes", 2)
                    .put("rounds_without_one_holder", split)
                    .put("wins_n1", wins[0])
                    .put("wins_n2", wins[1])
                    .put("certification_conflicts", conflicts)
                    .put("relay_rows", rows)
                    .put("relays_that_published", publishers)
                    .print();
            assertThat(f.get("rounds_without_one_holder"))
                    .as("rounds with no holder or two")
                    .isZero();
            assertThat(f.get("lost")).as("rows never published").isZero();
            assertThat(f.get("applied_twice")).as("rows published twice").isZero();
            assertThat(f.get("relays_that_published"))
                    .as("relays that published under one lease")
                    .isEqualTo(1L);
        }
    }

    /** Certification failures and brute-force aborts on the nodes so far: the conflicts between nodes. */
    private static long conflicts(List<HikariDataSource> nodes) throws SQLException {
        long n = 0;
        for (HikariDataSource ds : nodes) {
            try (Connection c = ds.getConnection();
                    Statement s = c.createStatement();
                    ResultSet rs = s.executeQuery("SHOW GLOBAL STATUS WHERE Variable_name IN"
                            + " ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')")) {
                while (rs.next()) {
                    n += rs.getLong(2);
                }
            }
        }
        return n;
    }

    private static Delivery fencedDelivery(String id, long token) {
        return Delivery.builder(id)
                .headers(Map.of("token", Long.toString(token)))
                .build();
    }

    /** Node 2's own newest token, without waiting for the cluster: what a plain read there sees. */
    private static long localFence(HikariDataSource ds) throws SQLException {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT token FROM once_fence WHERE resource = 'ledger'")) {
            return rs.next() ? rs.getLong(1) : 0;
        }
    }

    private static void awaitEverywhere(String db, long token) {
        await("the fence at " + token + " on every node")
                .atMost(Duration.ofSeconds(30))
                .ignoreExceptions()
                .until(() -> {
                    for (LocalGalera.Node n : List.of(galera.node(0), galera.node(1))) {
                        try (Connection c = DriverManager.getConnection(n.jdbcUrl(db));
                                Statement s = c.createStatement();
                                ResultSet rs =
                                        s.executeQuery("SELECT token FROM once_fence WHERE resource = 'ledger'")) {
                            if (!rs.next() || rs.getLong(1) < token) {
                                return false;
                            }
                        }
                    }
                    return true;
                });
    }

    /** Outcomes of raced pairs: each event delivered to two nodes' consumers at the same instant. */
    private static final class RaceTally {
        final List<String> ids = new ArrayList<>();
        final AtomicInteger applied = new AtomicInteger();
        final AtomicInteger duplicates = new AtomicInteger();
    }

    private interface NodeConsumer {
        Outcome process(int node, Delivery d) throws Exception;
    }

    /**
     * Delivers each of {@code races} events to two nodes at once behind a barrier (pairs rotate over
     * the nodes), redelivering whatever is not acknowledged, as a broker would.
     */
    private static RaceTally race(int races, int nodes, NodeConsumer consumer) throws Exception {
        RaceTally tally = new RaceTally();
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            for (int i = 0; i < races; i++) {
                String id = "race-" + i;
                tally.ids.add(id);
                Delivery d = Delivery.builder(id).headers(Map.of(RACE, "1")).build();
                int a = i % nodes;
                int b = (i + 1) % nodes;
                CyclicBarrier barrier = new CyclicBarrier(2);
                List<Future<Outcome>> both = new ArrayList<>();
                for (int node : new int[] {a, b}) {
                    Callable<Outcome> task = () -> {
                        barrier.await(30, TimeUnit.SECONDS);
                        Delivery next = d;
                        while (true) {
                            Outcome o = consumer.process(node, next);
                            if (o.shouldAcknowledge()) {
                                return o;
                            }
                            next = next.redelivery();
                        }
                    };
                    both.add(pool.submit(task));
                }
                for (Future<Outcome> f : both) {
                    Outcome o = f.get(2, TimeUnit.MINUTES);
                    (o.status() == Outcome.Status.APPLIED ? tally.applied : tally.duplicates).incrementAndGet();
                }
            }
        } finally {
            pool.shutdownNow();
        }
        return tally;
    }

    /** The broken consumer: checks the inbox with a SELECT, commits the effect alone, records the claim after. */
    private static Outcome naive(HikariDataSource ds, Delivery d) throws SQLException, InterruptedException {
        try (Connection c = ds.getConnection()) {
            try (PreparedStatement ps =
                    c.prepareStatement("SELECT count(*) FROM once_inbox WHERE consumer = 'galera' AND event_id = ?")) {
                ps.setString(1, d.eventId());
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    if (rs.getLong(1) > 0) {
                        return Outcome.duplicate(d.eventId());
                    }
                }
            }
            Thread.sleep(30);
            Effects.apply(c, d); // auto-commit: the effect's transaction holds no claim
            try (PreparedStatement ps = c.prepareStatement(
                    "INSERT IGNORE INTO once_inbox (consumer, event_id, processed_at) VALUES ('galera', ?, now(6))")) {
                ps.setString(1, d.eventId());
                ps.executeUpdate();
            } catch (SQLException e) {
                // the other node's claim won certification: the effect is already committed
            }
            return Outcome.applied(d.eventId());
        }
    }

    /**
     * Waits until every pool's node has applied the setup (a DDL statement returns once it ran on
     * the node that took it; the others run it at the same point of the cluster's order, later).
     */
    private static void caughtUp(List<HikariDataSource> pools) throws SQLException {
        for (HikariDataSource pool : pools) {
            try (Connection c = pool.getConnection();
                    Statement s = c.createStatement()) {
                s.execute("SET STATEMENT wsrep_sync_wait = 1 FOR SELECT count(*) FROM " + Effects.TABLE);
            }
        }
    }

    /** The effect table with a primary key: Galera replicates row changes by key. */
    private static void createEffects(HikariDataSource ds) throws SQLException {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement()) {
            s.execute("CREATE TABLE " + Effects.TABLE + " (id bigint AUTO_INCREMENT PRIMARY KEY,"
                    + " event_id varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,"
                    + " applied_at bigint NOT NULL)");
        }
    }

    /** A new database on the cluster, there on every live node on return. */
    private static String database() throws SQLException {
        String name = "once_galera_" + DATABASES.incrementAndGet();
        try (Connection c = DriverManager.getConnection(galera.node(0).jdbcUrl("mysql"));
                Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE " + name);
        }
        for (LocalGalera.Node n : galera.nodes()) {
            if (n.alive()) {
                try (Connection c = DriverManager.getConnection(n.jdbcUrl("mysql"));
                        Statement s = c.createStatement()) {
                    s.execute("SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1 FROM information_schema.schemata");
                }
            }
        }
        return name;
    }

    /** Node {@code first}'s URL, then the others' in order: the driver moves on when a node dies. */
    private static String multiHostUrl(int first, String db) {
        StringBuilder hosts = new StringBuilder();
        for (int i = 0; i < 3; i++) {
            LocalGalera.Node n = galera.node((first + i) % 3);
            hosts.append(i == 0 ? "" : ",").append("127.0.0.1:").append(n.port());
        }
        return "jdbc:mariadb:sequential://" + hosts + "/" + db + "?user=root";
    }
}
