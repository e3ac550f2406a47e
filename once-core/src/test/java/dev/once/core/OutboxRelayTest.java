package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.sun.net.httpserver.HttpServer;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.outbox.DeadMessage;
import dev.once.outbox.HttpPublisher;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.OutboxStats;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import dev.once.retention.OutboxPruner;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class OutboxRelayTest {

    private TestDatabase db;
    private MutableClock clock;
    private OutboxAdmin admin;

    @BeforeEach
    void setUp() {
        db = TestPostgres.shared().freshDatabase(20);
        clock = MutableClock.startingNow();
        admin = OutboxAdmin.builder().dataSource(db.dataSource()).clock(clock).build();
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    /**
     * Two relays drain what eight concurrent writers commit: 4,000 transactions over 20 keys, each
     * adding its row and then taking its key's lock (an update of the key's row), so the writers of a
     * key commit one after another, in the order they got the lock. Every row is sent exactly once
     * (none twice while another relay holds it), no key is ever sent by both relays at once, and each
     * key's rows arrive in the order their transactions committed.
     *
     * <p>The guarantee, exactly: rows are written when the handler returns, after everything it
     * locked, so ids follow commit order for writers serialized by a lock held to commit; the relay
     * sends a key in id order, one row after the other. Writers of a key that no lock serializes have
     * no commit order to keep: their rows go in id order among those committed when the relay looks.
     */
    @Test
    void twoRelaysSendEveryRowOnceAndKeepPerKeyCommitOrderWithConcurrentWriters() throws Exception {
        int keys = 20;
        int writers = 8;
        int perWriter = 500;
        db.execute("CREATE TABLE key_lock (k text PRIMARY KEY, n int NOT NULL)");
        for (int k = 0; k < keys; k++) {
            db.execute("INSERT INTO key_lock VALUES ('key-" + k + "', 0)");
        }
        Map<String, List<String>> committedOrder = new ConcurrentHashMap<>();
        IdempotentConsumer writer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("writers")
                .meterRegistry(new SimpleMeterRegistry())
                .handler((d, tx) -> {
                    String key = d.headers().get("key");
                    tx.outbox().add("orders", key, d.eventId().getBytes(StandardCharsets.UTF_8), Map.of(), null);
                    try (java.sql.PreparedStatement ps =
                            tx.connection().prepareStatement("UPDATE key_lock SET n = n + 1 WHERE k = ?")) {
                        ps.setString(1, key);
                        ps.executeUpdate(); // waits for the key's previous writer to commit
                    }
                    committedOrder
                            .computeIfAbsent(key, k -> Collections.synchronizedList(new ArrayList<>()))
                            .add(d.eventId());
                })
                .build();
        Map<Long, AtomicInteger> sends = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> inFlight = new ConcurrentHashMap<>();
        Map<String, List<String>> sentOrder = new ConcurrentHashMap<>();
        List<String> violations = new CopyOnWriteArrayList<>();
        Map<String, AtomicInteger> byRelay = new ConcurrentHashMap<>();
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        List<OutboxRelay> relays = new ArrayList<>();
        for (String name : List.of("relay-a", "relay-b")) {
            relays.add(OutboxRelay.builder()
                    .dataSource(db.dataSource())
                    .name(name)
                    .batchSize(20)
                    .pollInterval(Duration.ofMillis(50))
                    .meterRegistry(registry)
                    .publisher(m -> {
                        String key = m.key();
                        if (inFlight.computeIfAbsent(key, k -> new AtomicInteger())
                                        .incrementAndGet()
                                != 1) {
                            violations.add("key " + key + " sent by two relays at once");
                        }
                        sentOrder
                                .computeIfAbsent(key, k -> Collections.synchronizedList(new ArrayList<>()))
                                .add(new String(m.payload(), StandardCharsets.UTF_8));
                        if (!m.eventId().equals(m.headers().get(OutboxMessage.EVENT_ID_HEADER))) {
                            violations.add("row " + m.id() + " without its event id header");
                        }
                        sends.computeIfAbsent(m.id(), id -> new AtomicInteger()).incrementAndGet();
                        byRelay.computeIfAbsent(name, n -> new AtomicInteger()).incrementAndGet();
                        Thread.yield(); // widen the window in which the other relay could interfere
                        inFlight.get(key).decrementAndGet();
                        return Receipt.NONE;
                    })
                    .build());
        }
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(writers);
        try {
            relays.forEach(OutboxRelay::start);
            List<java.util.concurrent.Future<?>> done = new ArrayList<>();
            for (int w = 0; w < writers; w++) {
                int id = w;
                done.add(pool.submit(() -> {
                    java.util.Random random = new java.util.Random(id);
                    for (int i = 0; i < perWriter; i++) {
                        Delivery d = Delivery.builder("w" + id + "-" + i)
                                .payload("x")
                                .headers(Map.of("key", "key-" + random.nextInt(keys)))
                                .build();
                        Outcome.Status status = writer.process(d).status();
                        if (status != Outcome.Status.APPLIED) {
                            violations.add(d.eventId() + " was " + status);
                        }
                    }
                    return null;
                }));
            }
            for (java.util.concurrent.Future<?> f : done) {
                f.get(5, TimeUnit.MINUTES);
            }
            await().atMost(Duration.ofMinutes(2))
                    .pollInterval(Duration.ofMillis(100))
                    .until(() -> admin.stats().pending() == 0);
        } finally {
            pool.shutdownNow();
            relays.forEach(OutboxRelay::close);
        }
        int rows = writers * perWriter;
        assertThat(violations).as("one relay per key, every write applied").isEmpty();
        assertThat(sends).as("every row sent").hasSize(rows);
        assertThat(sends.values().stream().filter(n -> n.get() != 1).count())
                .as("rows sent more than once")
                .isZero();
        assertThat(sentOrder.keySet()).isEqualTo(committedOrder.keySet());
        for (String key : committedOrder.keySet()) {
            assertThat(sentOrder.get(key)).as("rows of %s in commit order", key).isEqualTo(committedOrder.get(key));
        }
        assertThat(byRelay.keySet()).as("both relays took part").containsExactlyInAnyOrder("relay-a", "relay-b");
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent'"))
                .isEqualTo(rows);
        assertThat(registry.get("once.outbox.sent").counters().stream()
                        .mapToDouble(c -> c.count())
                        .sum())
                .isEqualTo(rows);
    }

    @Test
    void aFailingHeadBlocksOnlyItsKeyRetriesWithBackoffThenGoesDeadAndCanBeReplayed() throws Exception {
        long a1 = OutboxRows.add(db.dataSource(), clock, "e-a1", "a", "a1");
        OutboxRows.add(db.dataSource(), clock, "e-a2", "a", "a2");
        OutboxRows.add(db.dataSource(), clock, "e-b1", "b", "b1");
        OutboxRows.add(db.dataSource(), clock, "e-b2", "b", "b2");
        OutboxRows.add(db.dataSource(), clock, "e-n1", null, "n1");
        AtomicBoolean failA1 = new AtomicBoolean(true);
        List<String> sent = Collections.synchronizedList(new ArrayList<>());
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .meterRegistry(registry)
                .retryPolicy(retries(Duration.ofSeconds(10), Duration.ofSeconds(15), 2))
                .publisher(m -> {
                    String body = new String(m.payload(), StandardCharsets.UTF_8);
                    if (body.equals("a1") && failA1.get()) {
                        throw new RetryableException("provider down for " + body);
                    }
                    sent.add(body);
                    return Receipt.NONE;
                })
                .build();

        assertThat(relay.relayOnce())
                .as("a1 failed, b1, b2 and the keyless row sent; a2 not sent after a1 failed")
                .isEqualTo(4);
        assertThat(sent).as("b goes on while a's head fails").containsExactly("b1", "n1", "b2");
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'pending' AND attempts = 0"))
                .as("a2, untouched")
                .isEqualTo(1);
        assertThat(relay.relayOnce()).as("a1 backs off, a2 waits behind it").isZero();

        clock.advance(Duration.ofSeconds(9));
        assertThat(relay.relayOnce()).as("first retry after 10 s, not before").isZero();
        clock.advance(Duration.ofSeconds(1));
        assertThat(relay.relayOnce()).as("second attempt").isEqualTo(1);
        clock.advance(Duration.ofSeconds(14));
        assertThat(relay.relayOnce())
                .as("second retry after min(20 s, max 15 s)")
                .isZero();
        clock.advance(Duration.ofSeconds(1));
        assertThat(relay.relayOnce()).as("third and last attempt").isEqualTo(1);

        List<DeadMessage> dead = admin.dead(0, 10);
        assertThat(dead).hasSize(1);
        assertThat(dead.get(0).message().id()).isEqualTo(a1);
        assertThat(dead.get(0).message().attempts()).isEqualTo(3);
        assertThat(dead.get(0).lastError()).contains("provider down for a1");
        // Per-key order survives the dead letter: a2 waits until a1 is replayed (and sent first) or discarded.
        assertThat(relay.relayOnce()).as("a dead head holds its key back").isZero();
        assertThat(sent).containsExactly("b1", "n1", "b2");
        assertThat(relay.stats()).isEqualTo(new OutboxStats(1, Duration.ofSeconds(25), 1));
        assertThat(registry.get("once.outbox.retried").counter().count()).isEqualTo(2);
        assertThat(registry.get("once.outbox.dead").counter().count()).isEqualTo(1);
        assertThat(registry.get("once.outbox.sent").counter().count()).isEqualTo(3);

        failA1.set(false);
        assertThat(admin.replay(List.of(a1, 999_999L)))
                .as("only dead rows replay")
                .isEqualTo(1);
        assertThat(admin.stats().pending()).isEqualTo(2);
        assertThat(relay.relayOnce()).as("the replayed head first").isEqualTo(1);
        assertThat(relay.relayOnce()).as("then the row behind it").isEqualTo(1);
        assertThat(sent).as("a1 before a2, as written").containsExactly("b1", "n1", "b2", "a1", "a2");
        assertThat(admin.dead(0, 10)).isEmpty();
        assertThat(admin.replay(List.of(a1))).as("a sent row does not replay").isZero();
    }

    /**
     * A key's backlog five rows long ahead of three other keys, batches of three: the backlog goes
     * in runs (its head and the rows right after it, in the order written), and the keys behind it
     * in the batch that takes its last rows. A relay that took only the head of each key sent that
     * key one row a batch.
     */
    @Test
    void aKeysBacklogGoesInRunsAndTheKeysBehindItFollow() throws Exception {
        backlogGoesInRuns(db);
    }

    /** The same on MariaDB, whose lock query locks as it scans and filters each row before the limit. */
    @Test
    void aKeysBacklogGoesInRunsAndTheKeysBehindItFollowOnMariaDb() throws Exception {
        try (TestDatabase maria = TestMariaDb.shared().freshDatabase(4)) {
            backlogGoesInRuns(maria);
        }
    }

    private void backlogGoesInRuns(TestDatabase d) throws Exception {
        for (int i = 1; i <= 5; i++) {
            OutboxRows.add(d.dataSource(), clock, "e-hot" + i, "hot", "hot" + i);
        }
        for (String k : List.of("b", "c", "d")) {
            OutboxRows.add(d.dataSource(), clock, "e-" + k, k, k);
        }
        List<String> sent = Collections.synchronizedList(new ArrayList<>());
        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(d.dataSource())
                .clock(clock)
                .meterRegistry(new SimpleMeterRegistry())
                .batchSize(3)
                .publisher(m -> {
                    sent.add(new String(m.payload(), StandardCharsets.UTF_8));
                    return Receipt.NONE;
                })
                .build();
        assertThat(relay.relayOnce()).as("hot's first three").isEqualTo(3);
        assertThat(relay.relayOnce()).as("hot's last two and b").isEqualTo(3);
        assertThat(relay.relayOnce()).as("c and d").isEqualTo(2);
        assertThat(relay.relayOnce()).isZero();
        assertThat(sent).containsExactly("hot1", "hot2", "hot3", "hot4", "b", "hot5", "c", "d");
    }

    /**
     * One key's backlog of 3,000 rows (an outbox keyed by tenant after a broker outage), interleaved
     * with 30 rows of other keys and 30 without a key, batches of 500: it drains in about
     * 3,060 / 500 batches, the hot key's rows in the order written. A relay that took only the head
     * of each key sent the hot key one row a batch: 3,000 batches.
     */
    @Test
    void aHotKeysBacklogDrainsInFewBatches() throws Exception {
        hotKeyDrainsInFewBatches(db);
    }

    @Test
    void aHotKeysBacklogDrainsInFewBatchesOnMariaDb() throws Exception {
        try (TestDatabase maria = TestMariaDb.shared().freshDatabase(4)) {
            hotKeyDrainsInFewBatches(maria);
        }
    }

    private void hotKeyDrainsInFewBatches(TestDatabase d) throws Exception {
        int hot = 3_000;
        int batch = 500;
        // Every 51st row is of another key (each its own) or, every 102nd, without a key.
        OutboxRows.addAll(
                d.dataSource(),
                clock,
                "t",
                hot + 60,
                "r",
                i -> i % 51 != 0 ? "hot" : i % 102 == 0 ? null : "cold-" + i);
        Map<String, List<Integer>> sentByKey = new ConcurrentHashMap<>();
        Map<Integer, AtomicInteger> sends = new ConcurrentHashMap<>();
        List<List<String>> waves = new CopyOnWriteArrayList<>();
        Publisher recording = new Publisher() {
            @Override
            public Receipt publish(OutboxMessage m) {
                throw new AssertionError("sent through publishAll");
            }

            @Override
            public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
                waves.add(messages.stream()
                        .map(OutboxMessage::key)
                        .filter(k -> k != null)
                        .toList());
                for (OutboxMessage m : messages) {
                    int n = Integer.parseInt(new String(m.payload(), StandardCharsets.UTF_8).substring(1));
                    sends.computeIfAbsent(n, x -> new AtomicInteger()).incrementAndGet();
                    sentByKey
                            .computeIfAbsent(String.valueOf(m.key()), k -> new CopyOnWriteArrayList<>())
                            .add(n);
                }
                return messages.stream()
                        .map(m -> CompletableFuture.completedFuture(Receipt.NONE))
                        .collect(java.util.stream.Collectors.toList());
            }
        };
        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(d.dataSource())
                .clock(clock)
                .meterRegistry(new SimpleMeterRegistry())
                .batchSize(batch)
                .publisher(recording)
                .build();
        int batches = 0;
        int limit = (hot + 60 + batch - 1) / batch + 3;
        while (relay.relayOnce() > 0 && batches <= limit) {
            batches++;
        }
        assertThat(batches)
                .as("batches to drain %d rows of one key among 60 others, %d rows a batch", hot, batch)
                .isLessThanOrEqualTo(limit);
        assertThat(sends).as("rows sent").hasSize(hot + 60);
        assertThat(sends.values()).as("each row once").allMatch(n -> n.get() == 1);
        assertThat(sentByKey.get("hot"))
                .as("the hot key in the order written")
                .isSorted()
                .hasSize(hot);
        assertThat(waves)
                .as("no publishAll holds two rows of one key")
                .allMatch(keys -> keys.stream().distinct().count() == keys.size());
        assertThat(relay.stats().pending()).isZero();
    }

    @Test
    void aDiscardedDeadHeadFreesItsKeyWithoutBeingSent() throws Exception {
        long c1 = OutboxRows.add(db.dataSource(), clock, "e-c1", "c", "c1");
        OutboxRows.add(db.dataSource(), clock, "e-c2", "c", "c2");
        List<String> sent = Collections.synchronizedList(new ArrayList<>());
        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .meterRegistry(new SimpleMeterRegistry())
                .publisher(m -> {
                    String body = new String(m.payload(), StandardCharsets.UTF_8);
                    if (body.equals("c1")) {
                        throw PublishFailure.permanent("rejected " + body, Receipt.NONE, null);
                    }
                    sent.add(body);
                    return Receipt.NONE;
                })
                .build();
        assertThat(relay.relayOnce()).as("c1 dies at once").isEqualTo(1);
        assertThat(relay.relayOnce()).as("c2 waits behind its dead head").isZero();
        assertThat(admin.discard(List.of(c1, 999_999L)))
                .as("only dead rows are discarded")
                .isEqualTo(1);
        assertThat(relay.relayOnce()).isEqualTo(1);
        assertThat(sent).containsExactly("c2");
        assertThat(admin.stats()).isEqualTo(new OutboxStats(0, Duration.ZERO, 0));
    }

    @Test
    void sentRowsArePrunedAfterTheRetentionAndPendingOrDeadRowsNever() throws Exception {
        OutboxRows.add(db.dataSource(), clock, "e-sent", "k1", "sent");
        OutboxRows.add(db.dataSource(), clock, "e-dead", "k2", "dead");
        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .retryPolicy(retries(Duration.ofSeconds(1), Duration.ofSeconds(1), 0))
                .meterRegistry(new SimpleMeterRegistry())
                .publisher(m -> {
                    if (m.eventId().equals("test:e-dead#1")) {
                        throw PublishFailure.permanent("rejected", Receipt.NONE, null);
                    }
                    return Receipt.NONE;
                })
                .build();
        assertThat(relay.relayOnce()).isEqualTo(2);
        OutboxRows.add(db.dataSource(), clock, "e-pending", "k3", "pending");
        OutboxPruner pruner = OutboxPruner.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .retention(Duration.ofDays(1))
                .build();
        assertThat(pruner.prune()).as("nothing is old enough yet").isZero();
        clock.advance(Duration.ofDays(2));
        assertThat(pruner.prune()).isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status IN ('pending', 'dead')"))
                .isEqualTo(2);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox")).isEqualTo(2);
    }

    /** End to end through a relay: every row of a handler is an event of its own for the receiver's inbox. */
    @Test
    void twoRowsWrittenByOneHandlerAreTwoEventsForTheReceivingInbox() throws Exception {
        try (Connection c = db.dataSource().getConnection()) {
            Ledger.create(c);
        }
        IdempotentConsumer orders = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("orders")
                .meterRegistry(new SimpleMeterRegistry())
                .handler((d, tx) -> {
                    tx.outbox().add("payments", "order-7", "500".getBytes(StandardCharsets.UTF_8), Map.of(), null);
                    tx.outbox().add("payments", "order-7", "700".getBytes(StandardCharsets.UTF_8), Map.of(), null);
                })
                .build();
        String longId = "o".repeat(Delivery.MAX_EVENT_ID_LENGTH);
        assertThat(orders.process(Delivery.of("order-7-paid", "x")).status()).isEqualTo(Outcome.Status.APPLIED);
        assertThat(orders.process(Delivery.of(longId, "x")).status()).isEqualTo(Outcome.Status.APPLIED);
        IdempotentConsumer payments = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("payments")
                .meterRegistry(new SimpleMeterRegistry())
                .handler(Ledger.CREDIT)
                .build();
        List<String> eventIds = new CopyOnWriteArrayList<>();
        List<Outcome.Status> outcomes = new CopyOnWriteArrayList<>();
        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .meterRegistry(new SimpleMeterRegistry())
                .publisher(m -> {
                    eventIds.add(m.headers().get(OutboxMessage.EVENT_ID_HEADER));
                    outcomes.add(payments.process(Delivery.of(m.eventId(), m.payload()))
                            .status());
                    return Receipt.NONE;
                })
                .build();
        while (relay.relayOnce() > 0) {
            // each key's rows go one batch after another
        }
        assertThat(eventIds).hasSize(4).doesNotHaveDuplicates();
        assertThat(eventIds.subList(0, 2)).containsExactly("orders:order-7-paid#1", "orders:order-7-paid#2");
        assertThat(eventIds.subList(2, 4))
                .allSatisfy(id -> assertThat(id).hasSizeLessThanOrEqualTo(Delivery.MAX_EVENT_ID_LENGTH));
        assertThat(outcomes).as("no row is a duplicate of another").containsOnly(Outcome.Status.APPLIED);
        try (Connection c = db.dataSource().getConnection()) {
            assertThat(Ledger.balance(c))
                    .as("both rows of each handler applied")
                    .isEqualTo(2 * (500 + 700));
        }
    }

    /**
     * Issue 10 item 1: two consumers of one event each enqueue a message with the default key. The
     * downstream inbox must see two events, and an HTTP provider two idempotency keys: the derived id
     * is unique per (consumer, cause, n), and a relay's re-send carries the same one.
     */
    @Test
    void outboxEventIdsAreUniquePerConsumer() throws Exception {
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        List<String> keysSeen = new CopyOnWriteArrayList<>();
        server.createContext("/", exchange -> {
            exchange.getRequestBody().readAllBytes();
            keysSeen.add(exchange.getRequestHeaders().getFirst("Idempotency-Key"));
            exchange.sendResponseHeaders(200, -1);
            exchange.close();
        });
        server.start();
        try {
            try (Connection c = db.dataSource().getConnection()) {
                Ledger.create(c);
            }
            String url = "http://127.0.0.1:" + server.getAddress().getPort() + "/notify";
            for (String consumer : List.of("billing", "shipping")) {
                IdempotentConsumer c = IdempotentConsumer.builder()
                        .dataSource(db.dataSource())
                        .consumer(consumer)
                        .meterRegistry(new SimpleMeterRegistry())
                        .handler((d, tx) -> {
                            tx.outbox().add("downstream", null, "5".getBytes(StandardCharsets.UTF_8), Map.of(), null);
                            tx.outbox().add(url, null, new byte[0], Map.of(), null);
                        })
                        .build();
                assertThat(c.process(Delivery.of("evt-1", "x")).status()).isEqualTo(Outcome.Status.APPLIED);
            }
            IdempotentConsumer downstream = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("downstream")
                    .meterRegistry(new SimpleMeterRegistry())
                    .handler(Ledger.CREDIT)
                    .build();
            List<String> ids = new CopyOnWriteArrayList<>();
            List<Outcome.Status> outcomes = new CopyOnWriteArrayList<>();
            HttpPublisher http = HttpPublisher.builder().build();
            AtomicBoolean crashOnce = new AtomicBoolean(true);
            OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(db.dataSource())
                    .meterRegistry(new SimpleMeterRegistry())
                    .publisher(m -> {
                        if (m.destination().startsWith("http")) {
                            return http.publish(m);
                        }
                        ids.add(m.eventId());
                        outcomes.add(downstream
                                .process(Delivery.of(m.eventId(), m.payload()))
                                .status());
                        if (crashOnce.getAndSet(false)) {
                            throw new IllegalStateException("the relay dies after the send, before its commit");
                        }
                        return Receipt.NONE;
                    })
                    .retryPolicy(retries(Duration.ofMillis(1), Duration.ofMillis(1), 9))
                    .build();
            await().atMost(Duration.ofSeconds(30)).until(() -> {
                relay.relayOnce();
                return admin.stats().pending() == 0;
            });
            assertThat(ids)
                    .as("three sends: one re-sent after the failed commit")
                    .hasSize(3);
            assertThat(new java.util.HashSet<>(ids))
                    .as("one event id per consumer")
                    .hasSize(2);
            assertThat(ids).allSatisfy(id -> assertThat(id).contains("evt-1"));
            assertThat(outcomes)
                    .as("the re-send is a duplicate, the other consumer's message is not")
                    .containsExactlyInAnyOrder(
                            Outcome.Status.APPLIED, Outcome.Status.DUPLICATE, Outcome.Status.APPLIED);
            try (Connection c = db.dataSource().getConnection()) {
                assertThat(Ledger.balance(c))
                        .as("the downstream inbox applied both consumers' messages")
                        .isEqualTo(10);
            }
            assertThat(keysSeen)
                    .as("the provider sees two calls with two keys")
                    .hasSize(2)
                    .doesNotHaveDuplicates();
        } finally {
            server.stop(0);
        }
    }

    @Test
    void lagIsTheAgeOfTheOldestPendingRow() throws Exception {
        OutboxRows.add(db.dataSource(), clock, "e-1", "k", "1");
        clock.advance(Duration.ofSeconds(30));
        OutboxRows.add(db.dataSource(), clock, "e-2", "k", "2");
        clock.advance(Duration.ofSeconds(12));
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .meterRegistry(registry)
                .publisher(m -> Receipt.NONE)
                .build();
        assertThat(relay.stats()).isEqualTo(new OutboxStats(2, Duration.ofSeconds(42), 0));
        assertThat(registry.get("once.outbox.pending").gauge().value()).isEqualTo(2);
        assertThat(registry.get("once.outbox.lag").gauge().value()).isEqualTo(42);
    }

    @Test
    void aStartedRelayIsWokenByNotifyLongBeforeItsPollInterval() throws Exception {
        List<String> sent = new CopyOnWriteArrayList<>();
        try (OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .pollInterval(Duration.ofHours(1))
                .publisher(m -> {
                    sent.add(m.eventId());
                    return Receipt.NONE;
                })
                .build()) {
            OutboxRows.add(db.dataSource(), Clock.systemUTC(), "first", "k", "1");
            relay.start();
            await().atMost(Duration.ofSeconds(20)).until(() -> sent.contains("test:first#1"));
            // The relay now waits for up to an hour; only the trigger's pg_notify can wake it.
            OutboxRows.add(db.dataSource(), Clock.systemUTC(), "second", "k", "2");
            await().atMost(Duration.ofSeconds(20)).until(() -> sent.contains("test:second#1"));
        }
        assertThat(sent).containsExactly("test:first#1", "test:second#1");
    }

    /**
     * Every commit's NOTIFY wakes every started relay; one takes the rows, the others find nothing. A
     * relay busy with a batch while commits arrive polls again after it anyway, and that poll sees
     * those commits' rows: the notifications that arrived meanwhile must not wake it for yet another,
     * empty poll (a lock query and a commit each, the herd's cost at an offered load). The batch ends
     * only once the notifications have reached the relay's own LISTEN connection ({@link
     * ArrivingNotifications}): one its backend sends later, after the poll that saw its row (a starved
     * backend), wakes the relay once more, which no relay can tell from a new commit's.
     */
    @Test
    void notificationsThatArrivedDuringABatchDoNotWakeTheRelayAfterThePollThatSawTheirRows() throws Exception {
        // Tables of their own: the channel is named after them, and the other tests' schemas in this
        // database notify the default one.
        String prefix = "herd" + ProcessHandle.current().pid() % 1_000_000 + "_";
        dev.once.Schema.migrate(db.dataSource(), prefix);
        CountingDataSource counting = new CountingDataSource(db.dataSource());
        ArrivingNotifications notifications = new ArrivingNotifications(counting.dataSource());
        java.util.concurrent.CountDownLatch sending = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        List<Long> locksAtSend = new CopyOnWriteArrayList<>();
        try (OutboxRelay relay = OutboxRelay.builder()
                .dataSource(notifications.dataSource())
                .tablePrefix(prefix)
                .pollInterval(Duration.ofHours(1))
                .meterRegistry(new SimpleMeterRegistry())
                .publisher(m -> {
                    locksAtSend.add(lockQueries(counting));
                    sending.countDown();
                    release.await();
                    return Receipt.NONE;
                })
                .build()) {
            relay.start();
            // every commit from here on notifies the relay's connection
            notifications.awaitListening();
            insert(prefix, "first", "a");
            assertThat(sending.await(20, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
            // Three commits while the relay's batch waits for its send.
            for (String key : List.of("b", "c", "d")) {
                insert(prefix, "during-" + key, key);
            }
            // the four commits' notifications have reached the relay's connection (the first one's may
            // have woken it for the batch)
            notifications.awaitArrived(4);
            release.countDown();
            await().atMost(Duration.ofSeconds(20)).until(() -> sent(prefix) == 4);
            await().atMost(Duration.ofSeconds(20)).until(() -> lockQueries(counting) >= locksAtSend.get(0) + 2);
            insert(prefix, "after", "e");
            await().atMost(Duration.ofSeconds(20)).until(() -> sent(prefix) == 5);
        }
        assertThat(locksAtSend).hasSize(5);
        assertThat(locksAtSend.get(4) - locksAtSend.get(0))
                .as("lock queries from the first row's batch to the last one's: the poll after the batch (the three"
                        + " rows committed during it), the one after that (nothing), the last row's; not one more for"
                        + " the three notifications that arrived during the batch")
                .isEqualTo(3);
    }

    private void insert(String prefix, String event, String key) {
        db.execute("INSERT INTO " + prefix + "outbox (event_id, destination, msg_key, payload, headers,"
                + " idempotency_key, available_at, created_at) VALUES ('" + event + "', 'd', '" + key + "', '\\x31',"
                + " '', '" + event + "', now(), now())");
    }

    private long sent(String prefix) {
        return db.queryLong("SELECT count(*) FROM " + prefix + "outbox WHERE status = 'sent'");
    }

    private static long lockQueries(CountingDataSource counting) {
        return counting.prepared().stream()
                .filter(sql -> sql.contains(" AS pred "))
                .count();
    }

    @Test
    void theHttpPublisherSendsTheIdempotencyKeyAndEventIdAndRecordsTheAnswer() throws Exception {
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        List<Map<String, String>> seen = new CopyOnWriteArrayList<>();
        server.createContext("/", exchange -> {
            String path = exchange.getRequestURI().getPath();
            byte[] body = exchange.getRequestBody().readAllBytes();
            seen.add(Map.of(
                    "path",
                    path,
                    "key",
                    exchange.getRequestHeaders().getFirst("Idempotency-Key"),
                    "event",
                    exchange.getRequestHeaders().getFirst(OutboxMessage.EVENT_ID_HEADER),
                    "type",
                    exchange.getRequestHeaders().getFirst("Content-Type"),
                    "trace",
                    String.valueOf(exchange.getRequestHeaders().getFirst("x-trace")),
                    "body",
                    new String(body, StandardCharsets.UTF_8)));
            int status = path.equals("/ok") ? 201 : path.equals("/reject") ? 422 : path.equals("/denied") ? 403 : 503;
            byte[] answer =
                    (path.equals("/ok") ? "{\"id\":\"ch_1\"}" : "nope " + status).getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(status, answer.length);
            exchange.getResponseBody().write(answer);
            exchange.close();
        });
        server.start();
        try {
            String base = "http://127.0.0.1:" + server.getAddress().getPort();
            long ok = OutboxRows.add(
                    db.dataSource(),
                    clock,
                    "evt-ok",
                    base + "/ok",
                    "c1",
                    "{\"amount\":20}",
                    Map.of("content-type", "application/json; charset=utf-8", "x-trace", "t-1"),
                    "charge:order-1");
            long reject = OutboxRows.add(
                    db.dataSource(), clock, "evt-reject", base + "/reject", "c2", "{}", Map.of(), "charge:order-2");
            long busy = OutboxRows.add(db.dataSource(), clock, "evt-busy", base + "/busy", "c3", "{}", Map.of(), null);
            long denied =
                    OutboxRows.add(db.dataSource(), clock, "evt-denied", base + "/denied", "c4", "{}", Map.of(), null);
            OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(db.dataSource())
                    .clock(clock)
                    .meterRegistry(new SimpleMeterRegistry())
                    .destinationPrefix(base)
                    .publisher(HttpPublisher.builder()
                            .timeout(Duration.ofSeconds(10))
                            .build())
                    .build();
            assertThat(relay.relayOnce()).isEqualTo(4);

            assertThat(seen).hasSize(4);
            Map<String, String> first = seen.stream()
                    .filter(s -> s.get("path").equals("/ok"))
                    .findFirst()
                    .orElseThrow();
            assertThat(first)
                    .containsEntry("key", "charge:order-1")
                    .containsEntry("event", "test:evt-ok#1")
                    .containsEntry("type", "application/json; charset=utf-8")
                    .containsEntry("trace", "t-1")
                    .containsEntry("body", "{\"amount\":20}");
            Map<String, String> third = seen.stream()
                    .filter(s -> s.get("path").equals("/busy"))
                    .findFirst()
                    .orElseThrow();
            assertThat(third)
                    .as("no idempotency key given: the event id is the key")
                    .containsEntry("key", "test:evt-busy#1")
                    .containsEntry("event", "test:evt-busy#1");

            assertThat(row(ok)).isEqualTo("sent|1|201|{\"id\":\"ch_1\"}");
            assertThat(row(reject)).as("a 422 is permanent: dead at once").isEqualTo("dead|1|422|nope 422");
            assertThat(row(busy)).as("a 503 is retried").isEqualTo("pending|1|503|nope 503");
            assertThat(row(denied))
                    .as("a 403 is retried: permissions can be granted without changing the message")
                    .isEqualTo("pending|1|403|nope 403");
            assertThat(admin.dead(0, 10))
                    .singleElement()
                    .satisfies(d -> assertThat(d.responseStatus()).isEqualTo(422));
        } finally {
            server.stop(0);
        }
    }

    /**
     * Issue 10, smaller: a provider that answers 200 with an endless body. The publisher reads only
     * what the row can store ({@link Receipt#MAX_BODY}), so the send completes and is recorded; it
     * used to read the whole body first, and never finished.
     */
    @Test
    void theHttpPublisherReadsAtMostTheStoredLimitOfAnAnswer() throws Exception {
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/", exchange -> {
            exchange.getRequestBody().readAllBytes();
            exchange.sendResponseHeaders(200, 0); // chunked, never ends
            byte[] chunk = "y".repeat(8192).getBytes(StandardCharsets.UTF_8);
            try {
                while (true) {
                    exchange.getResponseBody().write(chunk);
                }
            } catch (java.io.IOException closedByTheClient) {
                exchange.close();
            }
        });
        server.start();
        try {
            long id = OutboxRows.add(
                    db.dataSource(),
                    clock,
                    "evt-endless",
                    "http://127.0.0.1:" + server.getAddress().getPort() + "/endless",
                    null,
                    "{}",
                    Map.of(),
                    null);
            OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(db.dataSource())
                    .clock(clock)
                    .meterRegistry(new SimpleMeterRegistry())
                    .publisher(HttpPublisher.builder()
                            .timeout(Duration.ofSeconds(5))
                            .build())
                    .build();
            assertThat(org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(
                            Duration.ofSeconds(30), relay::relayOnce))
                    .isEqualTo(1);
            assertThat(row(id))
                    .as("sent, with the first " + Receipt.MAX_BODY + " characters of the answer")
                    .isEqualTo("sent|1|200|" + "y".repeat(Receipt.MAX_BODY));
        } finally {
            server.stop(0);
        }
    }

    /** Retries without jitter, so the tests can step the clock to the exact moment a row is due. */
    private static RetryPolicy retries(Duration initial, Duration max, int retries) {
        return RetryPolicy.builder()
                .initialDelay(initial)
                .maxDelay(max)
                .jitter(RetryPolicy.Jitter.NONE)
                .maxRetries(retries)
                .build();
    }

    private String row(long id) throws SQLException {
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(
                        "SELECT status, attempts, response_status, response FROM once_outbox" + " WHERE id = " + id)) {
            rs.next();
            return rs.getString(1) + "|" + rs.getInt(2) + "|" + rs.getInt(3) + "|" + rs.getString(4);
        }
    }
}
