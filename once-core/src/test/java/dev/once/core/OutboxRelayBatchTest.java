package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.once.OnceException;
import dev.once.RetryPolicy;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The relay's concurrent batch path ({@link Publisher#publishAll} overridden): sends of one batch
 * overlap, yet a key's rows keep their order, each row's outcome is its own, a hung send is bounded
 * by the send timeout, and sends the relay never marked are repeated with the same ids.
 */
class OutboxRelayBatchTest {

    private TestDatabase db;
    private MutableClock clock;
    private ExecutorService pool;

    @BeforeEach
    void setUp() {
        db = TestPostgres.shared().freshDatabase(5);
        clock = MutableClock.startingNow();
        pool = Executors.newFixedThreadPool(4);
    }

    @AfterEach
    void tearDown() {
        pool.shutdownNow();
        db.close();
    }

    /** Sends through a function per message, completing on a pool: the shape of an async client. */
    private static final class AsyncPublisher implements Publisher {
        final List<List<OutboxMessage>> batches = new CopyOnWriteArrayList<>();
        final List<OutboxMessage> sent = new CopyOnWriteArrayList<>();
        final Function<OutboxMessage, CompletableFuture<Receipt>> send;

        AsyncPublisher(Function<OutboxMessage, CompletableFuture<Receipt>> send) {
            this.send = send;
        }

        @Override
        public Receipt publish(OutboxMessage message) throws Exception {
            return publishAll(List.of(message)).get(0).toCompletableFuture().get();
        }

        @Override
        public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
            batches.add(messages);
            List<CompletionStage<Receipt>> stages = new ArrayList<>();
            for (OutboxMessage m : messages) {
                stages.add(send.apply(m).thenApply(r -> {
                    sent.add(m);
                    return r;
                }));
            }
            return stages;
        }
    }

    private static String body(OutboxMessage m) {
        return new String(m.payload(), StandardCharsets.UTF_8);
    }

    private OutboxRelay relay(Publisher publisher, Duration sendTimeout) {
        return OutboxRelay.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .meterRegistry(new SimpleMeterRegistry())
                .sendTimeout(sendTimeout)
                .retryPolicy(RetryPolicy.builder()
                        .initialDelay(Duration.ofSeconds(10))
                        .maxDelay(Duration.ofSeconds(10))
                        .jitter(RetryPolicy.Jitter.NONE)
                        .maxRetries(5)
                        .build())
                .publisher(publisher)
                .build();
    }

    /**
     * A batch holding three keys' runs where one key's head fails: the key's later rows must not go
     * out after it, neither in the same batch (the next wave) nor in the next batches while the
     * head waits for its retry, and stay untouched (no attempt counted); the other keys go on.
     */
    @Test
    void aFailedSendHoldsBackTheLaterRowsOfItsKeyAndNoOther() throws Exception {
        for (String key : List.of("a", "b", "c")) {
            for (int n = 1; n <= 3; n++) {
                OutboxRows.add(db.dataSource(), clock, "e-" + key + n, key, key + n);
            }
        }
        Set<String> failing = java.util.concurrent.ConcurrentHashMap.newKeySet();
        failing.add("a1");
        AsyncPublisher publisher = new AsyncPublisher(m -> CompletableFuture.supplyAsync(
                () -> {
                    if (failing.contains(body(m))) {
                        throw PublishFailure.retryable("provider down for " + body(m), Receipt.NONE, null);
                    }
                    return Receipt.NONE;
                },
                pool));
        OutboxRelay relay = relay(publisher, Duration.ofSeconds(30));

        assertThat(relay.relayOnce())
                .as("the three keys' runs: a1 failed, so a2 and a3 were not sent; b and c whole")
                .isEqualTo(7);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'pending' AND attempts = 0"))
                .as("a2 and a3, untouched")
                .isEqualTo(2);
        assertThat(relay.relayOnce()).as("a1 backs off and holds a2, a3").isZero();
        failing.clear();
        clock.advance(Duration.ofSeconds(10));
        assertThat(relay.relayOnce())
                .as("a1 alone: available later than the rows behind it")
                .isEqualTo(1);
        assertThat(relay.relayOnce()).as("a2 and a3").isEqualTo(2);
        assertThat(publisher.batches)
                .as("waves of the first batch, then a1, then a2 and a3")
                .hasSize(3 + 1 + 2);
        for (List<OutboxMessage> wave : publisher.batches) {
            assertThat(wave.stream().map(OutboxMessage::key))
                    .as("a wave (one publishAll) holds at most one row per key")
                    .doesNotHaveDuplicates();
        }
        List<String> a = publisher.sent.stream()
                .map(OutboxRelayBatchTest::body)
                .filter(b -> b.startsWith("a"))
                .toList();
        assertThat(a).as("key a in its order, a1 first").containsExactly("a1", "a2", "a3");
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent'"))
                .isEqualTo(9);
    }

    /**
     * Relay a sends key k's head; relay b's batch, run meanwhile, meets k's next row behind it (its
     * head held by a) and a row of another key, which b sends and whose answer is slow. Once a has
     * marked the head, k's next row is sendable: a third relay must send it now, not after b's
     * unrelated send is answered (b's batch held it locked, unsent, to its end: under load a key's
     * next row waited for two batches). And still in k's order, each row once, none marked before
     * its send was acknowledged.
     */
    @Test
    @Timeout(60)
    void aKeysNextRowIsNotHeldByABatchThatDoesNotSendIt() throws Exception {
        OutboxRows.add(db.dataSource(), clock, "e-k1", "k", "k1");
        OutboxRows.add(db.dataSource(), clock, "e-k2", "k", "k2");
        OutboxRows.add(db.dataSource(), clock, "e-z1", "z", "z1");
        java.util.Map<String, CompletableFuture<Receipt>> answers = new java.util.concurrent.ConcurrentHashMap<>();
        List<String> handed = new CopyOnWriteArrayList<>();
        AsyncPublisher publisher = new AsyncPublisher(m -> {
            handed.add(body(m));
            // k1 and z1 wait for the test to answer; every other send is answered at once.
            return body(m).equals("k1") || body(m).equals("z1")
                    ? answers.computeIfAbsent(body(m), b -> new CompletableFuture<>())
                    : CompletableFuture.completedFuture(Receipt.NONE);
        });
        OutboxRelay a = relay(publisher, 1);
        OutboxRelay b = relay(publisher, 10);
        OutboxRelay c = relay(publisher, 10);

        var aDone = pool.submit(a::relayOnce);
        await().atMost(Duration.ofSeconds(30)).until(() -> handed.contains("k1"));
        var bDone = pool.submit(b::relayOnce);
        await().atMost(Duration.ofSeconds(30)).until(() -> handed.contains("z1"));
        assertThat(handed).as("b sends z1 and holds k2 back behind k1").containsExactly("k1", "z1");
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'pending'"))
                .as("nothing marked before its send is answered")
                .isEqualTo(3);

        answers.get("k1").complete(Receipt.NONE);
        assertThat(aDone.get()).as("a marked k1").isEqualTo(1);
        assertThat(c.relayOnce())
                .as("k2, free once k1 is marked, while b's send of z1 is still unanswered")
                .isEqualTo(1);
        assertThat(handed).containsExactly("k1", "z1", "k2");

        answers.get("z1").complete(Receipt.NONE);
        assertThat(bDone.get()).as("b marked z1").isEqualTo(1);
        assertThat(publisher.sent.stream().map(OutboxRelayBatchTest::body))
                .as("each row once, k in its order")
                .containsExactly("k1", "k2", "z1");
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent' AND attempts = 1"))
                .isEqualTo(3);
    }

    /** What another relay (or an operator) does to a key's head between a batch's release of its locks and its relock. */
    enum Meanwhile {
        /** another relay gave up on it: {@code dead} */
        DEAD,
        /** another relay sent it */
        SENT,
        /** another relay failed it, to be tried again later */
        RETRY_LATER,
        /** another relay holds it */
        LOCKED
    }

    /**
     * PostgreSQL's relock ({@code Dialect#outboxRelock}): the batch releases every row the lock query locked (a
     * rollback to a savepoint) and locks again the rows it keeps, re-checked to be pending, available and free. The
     * head of key {@code k} changed in between: the relock drops it, and with it the key's run, so the batch sends no
     * row of {@code k} (its second row must never go out before its head is resolved); the second row stays pending,
     * untouched, and goes out after the head (sent meanwhile: at once; locked meanwhile: once released; dead: once
     * replayed). A run never carries a dead row (the lock query takes pending rows only; a dead row ends its key's
     * runs), so a dead row does not drop out at the relock: only a row that became dead meanwhile does, as here.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.EnumSource(Meanwhile.class)
    @Timeout(60)
    void aHeadChangedBetweenTheReleaseAndTheRelockEndsItsKeysRunThere(Meanwhile meanwhile) throws Exception {
        long k1 = OutboxRows.add(db.dataSource(), clock, "e-k1", "k", "k1");
        OutboxRows.add(db.dataSource(), clock, "e-k2", "k", "k2");
        long g1 = OutboxRows.add(db.dataSource(), clock, "e-g1", "g", "g1");
        OutboxRows.add(db.dataSource(), clock, "e-g2", "g", "g2");
        List<String> handed = new CopyOnWriteArrayList<>();
        AsyncPublisher publisher = new AsyncPublisher(m -> {
            handed.add(body(m));
            return CompletableFuture.completedFuture(Receipt.NONE);
        });
        try (java.sql.Connection holder = db.dataSource().getConnection()) {
            holder.setAutoCommit(false);
            // another relay holds g's head: the batch locks g2 and keeps none of g, so it relocks what it keeps
            lock(holder, g1);
            java.sql.Connection[] meanwhileTx = new java.sql.Connection[1];
            java.util.concurrent.atomic.AtomicInteger releases = new java.util.concurrent.atomic.AtomicInteger();
            Runnable between = () -> {
                if (releases.getAndIncrement() > 0) {
                    return;
                }
                try {
                    switch (meanwhile) {
                        case DEAD -> db.execute("UPDATE once_outbox SET status = 'dead' WHERE id = " + k1);
                        case SENT ->
                            db.execute("UPDATE once_outbox SET status = 'sent', sent_at = now() WHERE id = " + k1);
                        case RETRY_LATER ->
                            db.execute(
                                    "UPDATE once_outbox SET available_at = available_at + interval '1 hour' WHERE id = "
                                            + k1);
                        case LOCKED -> {
                            meanwhileTx[0] = db.dataSource().getConnection();
                            meanwhileTx[0].setAutoCommit(false);
                            lock(meanwhileTx[0], k1);
                        }
                    }
                } catch (java.sql.SQLException e) {
                    throw new IllegalStateException(e);
                }
            };
            OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(afterRollbackToSavepoint(db.dataSource(), between))
                    .clock(clock)
                    .meterRegistry(new SimpleMeterRegistry())
                    .batchSize(10)
                    .publisher(publisher)
                    .build();
            relay.relayOnce();
            assertThat(releases).as("the batch released its locks and relocked").hasValue(1);
            assertThat(handed)
                    .as("%s: no row of k after its head changed between the release and the relock", meanwhile)
                    .doesNotContain("k1", "k2");
            assertThat(db.queryLong("SELECT attempts FROM once_outbox WHERE msg_key = 'k' AND payload = 'k2'::bytea"))
                    .as("k2 untouched")
                    .isZero();
            holder.rollback();
            if (meanwhileTx[0] != null) {
                meanwhileTx[0].rollback();
                meanwhileTx[0].close();
            }
        }
        if (meanwhile == Meanwhile.DEAD) {
            relay(publisher, 10).relayOnce();
            assertThat(handed).as("k2 waits behind its dead head").doesNotContain("k2");
            db.execute("UPDATE once_outbox SET status = 'pending' WHERE id = " + k1); // replayed
        }
        if (meanwhile == Meanwhile.RETRY_LATER) {
            clock.advance(Duration.ofHours(2));
        }
        OutboxRelay next = relay(publisher, 10);
        await().atMost(Duration.ofSeconds(30)).until(() -> {
            next.relayOnce();
            return handed.contains("k2");
        });
        List<String> k = handed.stream().filter(b -> b.startsWith("k")).toList();
        assertThat(k)
                .as("%s: k in its order, each row once", meanwhile)
                .containsExactlyElementsOf(meanwhile == Meanwhile.SENT ? List.of("k2") : List.of("k1", "k2"));
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'pending'"))
                .isZero();
    }

    /**
     * A batch's first statements go with its lock query, and the rollback to its savepoint with the relock, in one
     * prepared string only through pgjdbc ({@code Dialect#statementsTogether}): another driver of PostgreSQL's
     * protocol may refuse a prepared string of several statements (the extended protocol parses one at a time), and
     * there each goes alone. The connection here names {@code driver} and refuses such strings unless it is pgjdbc;
     * the batch takes the relock path (g's head is held elsewhere, so g2 is dropped) and sends k's run either way.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"PostgreSQL JDBC Driver", "pgjdbc-ng"})
    @Timeout(60)
    void onlyPgjdbcIsSentSeveralStatementsInOnePreparedString(String driver) throws Exception {
        OutboxRows.add(db.dataSource(), clock, "e-k1", "k", "k1");
        OutboxRows.add(db.dataSource(), clock, "e-k2", "k", "k2");
        long g1 = OutboxRows.add(db.dataSource(), clock, "e-g1", "g", "g1");
        OutboxRows.add(db.dataSource(), clock, "e-g2", "g", "g2");
        boolean pgjdbc = driver.equals(NamingDriver.PGJDBC);
        List<String> prepared = new CopyOnWriteArrayList<>();
        AsyncPublisher publisher = new AsyncPublisher(m -> CompletableFuture.completedFuture(Receipt.NONE));
        try (java.sql.Connection holder = db.dataSource().getConnection()) {
            holder.setAutoCommit(false);
            lock(holder, g1);
            OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(NamingDriver.of(db.dataSource(), driver, prepared))
                    .clock(clock)
                    .meterRegistry(new SimpleMeterRegistry())
                    .batchSize(10)
                    .publisher(publisher)
                    .build();
            assertThat(relay.relayOnce())
                    .as("%s: k's run; g2, behind its held head, dropped", driver)
                    .isEqualTo(2);
            holder.rollback();
        }
        assertThat(publisher.sent.stream().map(OutboxRelayBatchTest::body)).containsExactly("k1", "k2");
        assertThat(prepared).as("%s: the relock ran", driver).anyMatch(sql -> sql.contains("ANY(?::bigint[])"));
        assertThat(prepared.stream().filter(sql -> sql.contains("; ")))
                .as("%s: prepared strings of several statements (the lock query, the relock, the mark)", driver)
                .hasSize(pgjdbc ? 3 : 0);
    }

    private static void lock(java.sql.Connection c, long id) throws java.sql.SQLException {
        try (var s = c.createStatement()) {
            s.executeQuery("SELECT id FROM once_outbox WHERE id = " + id + " FOR UPDATE")
                    .close();
        }
    }

    /**
     * {@code ds} whose connections run {@code between} right after each {@code ROLLBACK TO SAVEPOINT} they execute.
     * Where the relay sends the rollback and the relock in one string ({@code Dialect#statementsTogether}), the
     * server still runs them one after the other, and another transaction may change a row in between: the string
     * is split here so that {@code between} runs there. Their lock waits are bounded ({@link #boundedLockWaits}).
     */
    private static javax.sql.DataSource afterRollbackToSavepoint(javax.sql.DataSource ds, Runnable between) {
        return (javax.sql.DataSource) java.lang.reflect.Proxy.newProxyInstance(
                OutboxRelayBatchTest.class.getClassLoader(), new Class<?>[] {javax.sql.DataSource.class}, (p, m, a) -> {
                    Object r = invoke(ds, m, a);
                    if (!(r instanceof java.sql.Connection c)) {
                        return r;
                    }
                    boundedLockWaits(c);
                    return java.lang.reflect.Proxy.newProxyInstance(
                            OutboxRelayBatchTest.class.getClassLoader(),
                            new Class<?>[] {java.sql.Connection.class},
                            (cp, cm, ca) -> {
                                if (cm.getName().equals("prepareStatement")
                                        && ca[0] instanceof String sql
                                        && sql.startsWith("ROLLBACK TO SAVEPOINT ")
                                        && sql.contains("; ")) {
                                    int end = sql.indexOf("; ");
                                    try (java.sql.Statement s = c.createStatement()) {
                                        s.execute(sql.substring(0, end));
                                    }
                                    between.run();
                                    return c.prepareStatement(sql.substring(end + 2));
                                }
                                Object cr = invoke(c, cm, ca);
                                if (!(cr instanceof java.sql.Statement st)
                                        || cr instanceof java.sql.PreparedStatement) {
                                    return cr;
                                }
                                return java.lang.reflect.Proxy.newProxyInstance(
                                        OutboxRelayBatchTest.class.getClassLoader(),
                                        new Class<?>[] {java.sql.Statement.class},
                                        (sp, sm, sa) -> {
                                            Object sr = invoke(st, sm, sa);
                                            if (sm.getName().equals("execute")
                                                    && sa != null
                                                    && sa[0] instanceof String sql
                                                    && sql.contains("ROLLBACK TO SAVEPOINT")) {
                                                between.run();
                                            }
                                            return sr;
                                        });
                            });
                });
    }

    /**
     * A relay whose relock is broken goes on with a row another transaction of this test holds, and its mark waits
     * for that lock, which the test (blocked in {@code relayOnce}) never releases: JUnit's timeout cannot interrupt a
     * thread in a socket read. Bounded, the wait fails the batch, and the test, in seconds.
     */
    private static void boundedLockWaits(java.sql.Connection c) throws java.sql.SQLException {
        try (java.sql.Statement s = c.createStatement()) {
            s.execute("SET lock_timeout = '5s'");
        }
    }

    private static Object invoke(Object target, java.lang.reflect.Method m, Object[] a) throws Throwable {
        try {
            return m.invoke(target, a);
        } catch (java.lang.reflect.InvocationTargetException e) {
            throw e.getCause();
        }
    }

    private OutboxRelay relay(Publisher publisher, int batchSize) {
        return OutboxRelay.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .meterRegistry(new SimpleMeterRegistry())
                .batchSize(batchSize)
                .publisher(publisher)
                .build();
    }

    /**
     * In one concurrent batch, one send never answers and one fails with an unexpected exception:
     * the relay waits no longer than its send timeout, marks the three others sent with their own
     * receipts, schedules both failures for a retry with their own errors, and sends them later.
     */
    @Test
    @Timeout(30)
    void aHungAndAThrowingSendLeaveTheOthersMarkedAndAreRetried() throws Exception {
        for (int n = 1; n <= 5; n++) {
            OutboxRows.add(db.dataSource(), clock, "e-" + n, "k" + n, "m" + n);
        }
        Set<String> broken = java.util.concurrent.ConcurrentHashMap.newKeySet();
        broken.add("m2");
        broken.add("m3");
        AsyncPublisher publisher = new AsyncPublisher(m -> {
            String body = body(m);
            if (broken.contains(body) && body.equals("m2")) {
                return new CompletableFuture<>(); // hangs: never completed
            }
            if (broken.contains(body) && body.equals("m3")) {
                return CompletableFuture.failedFuture(new IllegalStateException("client bug on " + body));
            }
            // Answered before publishAll returns, when the send timeout starts: on a loaded machine the
            // pool's thread could otherwise start after 500 ms and the row count as unanswered too.
            CompletableFuture<Receipt> answered =
                    CompletableFuture.supplyAsync(() -> new Receipt(200, "ok " + body), pool);
            answered.join();
            return answered;
        });
        OutboxRelay relay = relay(publisher, Duration.ofMillis(500));

        long start = System.nanoTime();
        assertThat(relay.relayOnce()).isEqualTo(5);
        assertThat(Duration.ofNanos(System.nanoTime() - start))
                .as("the hung send is bounded by the send timeout")
                .isLessThan(Duration.ofSeconds(10));
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent' AND attempts = 1"
                        + " AND response = 'ok ' || convert_from(payload, 'UTF8')"))
                .as("m1, m4, m5 sent, each with its own receipt")
                .isEqualTo(3);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'pending' AND attempts = 1"
                        + " AND convert_from(payload, 'UTF8') = 'm2' AND last_error LIKE '%within the send timeout%'"))
                .as("m2 scheduled for a retry as unanswered")
                .isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'pending' AND attempts = 1"
                        + " AND convert_from(payload, 'UTF8') = 'm3' AND last_error LIKE '%client bug on m3%'"))
                .as("m3 scheduled for a retry with its own error")
                .isEqualTo(1);

        broken.clear();
        assertThat(relay.relayOnce()).as("not before the retry delay").isZero();
        clock.advance(Duration.ofSeconds(10));
        assertThat(relay.relayOnce()).as("m2 and m3 retried").isEqualTo(2);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent'"))
                .isEqualTo(5);
    }

    /**
     * The relay's database session dies after the concurrent sends completed and before the batch
     * was marked (what a crash of the relay process looks like to the database): the batch rolls
     * back, the rows stay pending, and the next relay sends each again with the same event id and
     * idempotency key, so the receiver's dedupe absorbs the copies.
     */
    @Test
    void aCrashAfterTheSendsAndBeforeTheMarkResendsWithTheSameIds() throws Exception {
        for (int n = 1; n <= 4; n++) {
            OutboxRows.add(db.dataSource(), clock, "e-" + n, "k" + n, "m" + n);
        }
        AsyncPublisher crashing = new AsyncPublisher(m -> CompletableFuture.completedFuture(Receipt.NONE));
        OutboxRelay first = relay(
                new Publisher() {
                    @Override
                    public Receipt publish(OutboxMessage message) {
                        throw new UnsupportedOperationException();
                    }

                    @Override
                    public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
                        List<CompletionStage<Receipt>> stages = crashing.publishAll(messages);
                        CompletableFuture.allOf(stages.stream()
                                        .map(CompletionStage::toCompletableFuture)
                                        .toArray(CompletableFuture[]::new))
                                .join();
                        // Every send accepted; now the relay's session dies, holding the row locks.
                        // Only the session holding this schema's outbox rows: other tests share the database.
                        db.queryLong(
                                "SELECT count(pg_terminate_backend(pid)) FROM (SELECT DISTINCT pid FROM pg_locks"
                                        + " WHERE relation = 'once_outbox'::regclass AND granted AND pid <> pg_backend_pid()) l");
                        return stages;
                    }
                },
                Duration.ofSeconds(30));
        assertThatThrownBy(first::relayOnce).as("the batch could not be marked").isInstanceOf(OnceException.class);
        assertThat(crashing.sent).hasSize(4);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'pending' AND attempts = 0"))
                .as("nothing marked: all four rows pending")
                .isEqualTo(4);

        AsyncPublisher second = new AsyncPublisher(m -> CompletableFuture.completedFuture(Receipt.NONE));
        assertThat(relay(second, Duration.ofSeconds(30)).relayOnce()).isEqualTo(4);
        assertThat(second.sent.stream().map(m -> m.eventId() + " " + m.idempotencyKey()))
                .as("the re-sends carry the first sends' event ids and idempotency keys")
                .containsExactlyInAnyOrderElementsOf(crashing.sent.stream()
                        .map(m -> m.eventId() + " " + m.idempotencyKey())
                        .toList());
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent' AND attempts = 1"))
                .isEqualTo(4);
    }
}
