package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.RetryPolicy;
import dev.once.outbox.DeadMessage;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Receipt;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link OutboxRelay} in exclusive mode ({@link OutboxRelay.Builder#lease}): two relays under one
 * lease, one sending at a time, a relay that lost its lease fenced at commit. One subclass per database.
 */
abstract class OutboxRelayExclusiveScenarios {

    TestDatabase db;
    MutableClock clock;
    OutboxAdmin admin;

    abstract TestDatabase freshDatabase();

    @BeforeEach
    void setUp() {
        db = freshDatabase();
        clock = MutableClock.startingNow();
        admin = OutboxAdmin.builder().dataSource(db.dataSource()).clock(clock).build();
    }

    @AfterEach
    void tearDown() {
        if (db != null) { // null when setUp skipped the test: no MariaDB
            db.close();
        }
    }

    /**
     * Exclusive mode: relay A holds the lease and is paused inside a send past the lease's expiry;
     * relay B takes the lease over. When A resumes, its batch is rejected by the fence and rolls
     * back, and B sends the rows: A marks nothing after the takeover.
     */
    @Test
    void aRelayPausedPastItsLeaseCannotMarkRowsAfterATakeover() throws Exception {
        OutboxRows.add(db.dataSource(), clock, "e-x", "x", "x");
        OutboxRows.add(db.dataSource(), clock, "e-y", "y", "y");
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch resume = new CountDownLatch(1);
        List<String> sentByA = new CopyOnWriteArrayList<>();
        List<String> sentByB = new CopyOnWriteArrayList<>();
        SimpleMeterRegistry registryA = new SimpleMeterRegistry();
        OutboxRelay a = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .name("a")
                .clock(clock)
                .meterRegistry(registryA)
                .lease("orders-relay", Duration.ofSeconds(10))
                .publisher(m -> {
                    entered.countDown();
                    resume.await(); // the pause: GC, SIGSTOP, a slow provider
                    sentByA.add(m.eventId());
                    return Receipt.NONE;
                })
                .build();
        OutboxRelay b = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .name("b")
                .clock(clock)
                .meterRegistry(new SimpleMeterRegistry())
                .lease("orders-relay", Duration.ofSeconds(10))
                .publisher(m -> {
                    sentByB.add(m.eventId());
                    return Receipt.NONE;
                })
                .build();
        AtomicInteger handledByA = new AtomicInteger(-1);
        Thread ta = new Thread(() -> handledByA.set(a.relayOnce()));
        ta.start();
        assertThat(entered.await(30, TimeUnit.SECONDS)).isTrue();
        long tokenA = a.lease().orElseThrow().token();

        clock.advance(Duration.ofSeconds(11));
        assertThat(b.relayOnce()).as("A still locks both rows").isZero();
        assertThat(b.lease().orElseThrow().token()).isGreaterThan(tokenA);

        resume.countDown();
        ta.join(30_000);
        assertThat(sentByA)
                .as("A did send (the fence cannot undo that), and stopped at its next send, when it"
                        + " failed to renew the lease")
                .containsExactly("test:e-x#1");
        assertThat(handledByA).as("A's batch rolled back").hasValue(0);
        assertThat(registryA.get("once.fence.rejections").counter().count()).isEqualTo(1);
        assertThat(registryA.get("once.outbox.sent").counter().count()).isZero();
        assertThat(a.lease()).as("A knows it lost the lease").isEmpty();
        assertThat(a.relayOnce()).as("A stands by while B holds the lease").isZero();

        assertThat(b.relayOnce()).isEqualTo(2);
        assertThat(sentByB).containsExactly("test:e-x#1", "test:e-y#1");
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent'"))
                .isEqualTo(2);
        a.close();
        b.close();
    }

    /**
     * Issue 10 item 8: a batch that takes longer than the lease (10 rows of 500 ms against a 2 s
     * lease), with a second relay polling between the sends. Renewed at the start of the batch only,
     * the lease lapsed mid-batch, the other relay took it, the batch was fenced at commit, and the
     * two relays alternated forever with attempts at 0. Now the holder renews during the batch.
     */
    @Test
    void anExclusiveRelayWhoseBatchOutlivesItsLeaseRenewsItAndDoesNotAlternateForever() throws Exception {
        for (int i = 0; i < 10; i++) {
            OutboxRows.add(db.dataSource(), clock, "e-" + i, null, Integer.toString(i));
        }
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        Map<String, OutboxRelay> relays = new ConcurrentHashMap<>();
        List<String> sends = new CopyOnWriteArrayList<>();
        for (String name : List.of("a", "b")) {
            String other = name.equals("a") ? "b" : "a";
            relays.put(
                    name,
                    OutboxRelay.builder()
                            .dataSource(db.dataSource())
                            .name(name)
                            .clock(clock)
                            .meterRegistry(registry)
                            .lease("slow-relay", Duration.ofSeconds(2))
                            .publisher(m -> {
                                clock.advance(Duration.ofMillis(500)); // a slow provider
                                relays.get(other).relayOnce(); // the standby polls meanwhile
                                sends.add(name + ":" + new String(m.payload(), StandardCharsets.UTF_8));
                                return Receipt.NONE;
                            })
                            .build());
        }
        for (int round = 0; round < 5 && admin.stats().pending() > 0; round++) {
            relays.get("a").relayOnce();
            relays.get("b").relayOnce();
        }
        assertThat(admin.stats().pending())
                .as("every row sent within five rounds")
                .isZero();
        assertThat(sends)
                .as("sent once each, by the relay that held the lease throughout")
                .hasSize(10)
                .allSatisfy(s -> assertThat(s).startsWith("a:"));
        assertThat(registry.get("once.fence.rejections").counters().stream()
                        .mapToDouble(c -> c.count())
                        .sum())
                .as("no batch fenced")
                .isZero();
        assertThat(db.queryLong("SELECT max(attempts) FROM once_outbox")).isEqualTo(1);
        relays.values().forEach(OutboxRelay::close);
    }

    /**
     * Issue 10 item 8: a single send longer than the whole lease cannot be saved by renewing, and
     * the other relay takes over while it runs. Each fenced batch now counts an attempt of the rows it
     * sent (the row stays available to the new holder at once), so after maxAttempts the row is dead
     * instead of being sent forever.
     */
    @Test
    void aFencedBatchCountsAnAttemptSoTwoRelaysCannotResendARowForever() throws Exception {
        long id = OutboxRows.add(db.dataSource(), clock, "e-slow", "k", "slow");
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        Map<String, OutboxRelay> relays = new ConcurrentHashMap<>();
        AtomicInteger sends = new AtomicInteger();
        for (String name : List.of("a", "b")) {
            String other = name.equals("a") ? "b" : "a";
            relays.put(
                    name,
                    OutboxRelay.builder()
                            .dataSource(db.dataSource())
                            .name(name)
                            .clock(clock)
                            .meterRegistry(registry)
                            .retryPolicy(retries(Duration.ofSeconds(1), Duration.ofSeconds(1), 2))
                            .lease("slow-relay", Duration.ofSeconds(2))
                            .publisher(m -> {
                                clock.advance(Duration.ofSeconds(3)); // one send outlives the lease
                                relays.get(other).relayOnce(); // the standby takes the lease over
                                sends.incrementAndGet();
                                return Receipt.NONE;
                            })
                            .build());
        }
        for (int round = 0; round < 10 && admin.stats().pending() > 0; round++) {
            relays.get("a").relayOnce();
            relays.get("b").relayOnce();
        }
        assertThat(admin.stats().pending()).as("the alternation ended").isZero();
        assertThat(sends).as("one send per attempt").hasValue(3);
        List<DeadMessage> dead = admin.dead(0, 10);
        assertThat(dead).singleElement().satisfies(d -> {
            assertThat(d.message().id()).isEqualTo(id);
            assertThat(d.message().attempts()).isEqualTo(3);
            assertThat(d.lastError()).contains("lease 'slow-relay'");
        });
        assertThat(registry.get("once.fence.rejections").counters().stream()
                        .mapToDouble(c -> c.count())
                        .sum())
                .isEqualTo(3);
        assertThat(registry.get("once.outbox.dead").counters().stream()
                        .mapToDouble(c -> c.count())
                        .sum())
                .isEqualTo(1);
        relays.values().forEach(OutboxRelay::close);
    }

    /**
     * {@link OutboxRelay#relayOnce} is thread-safe, also in exclusive mode: two threads of one relay
     * (its background thread and a caller's, or a caller's own pool) that both find no lease held
     * acquire it once between them. The second's acquire finds the lease held by this relay's own
     * owner and is refused; that refusal cleared the lease the first had just taken, so the relay
     * sent nothing until its own lease lapsed, then took a new token that fenced the first thread's
     * batch. The second thread is held in its acquire until the first holds the lease (the
     * interleaving that cleared it).
     */
    @Test
    void twoThreadsOfOneExclusiveRelayAcquireItsLeaseOnceAndKeepIt() throws Exception {
        OutboxRows.add(db.dataSource(), clock, "e-1", null, "1");
        AtomicReference<Thread> gated = new AtomicReference<>();
        CountDownLatch gatedWaits = new CountDownLatch(1);
        AtomicReference<OutboxRelay> relay = new AtomicReference<>();
        DataSource gate = (DataSource) Proxy.newProxyInstance(
                getClass().getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                    if (method.getName().equals("getConnection") && gated.compareAndSet(Thread.currentThread(), null)) {
                        gatedWaits.countDown();
                        Awaitility.await("the other thread holds the lease")
                                .atMost(Duration.ofSeconds(30))
                                .until(() -> relay.get().lease().isPresent());
                    }
                    try {
                        return method.invoke(db.dataSource(), args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        relay.set(OutboxRelay.builder()
                .dataSource(gate)
                .name("a")
                .clock(clock)
                .meterRegistry(new SimpleMeterRegistry())
                .lease("shared-relay", Duration.ofSeconds(10))
                .publisher(m -> Receipt.NONE)
                .build());
        OutboxRelay a = relay.get();
        Thread second = new Thread(a::relayOnce);
        gated.set(second);
        second.start();
        assertThat(gatedWaits.await(30, TimeUnit.SECONDS)).isTrue();
        Thread first = new Thread(a::relayOnce);
        first.start();
        first.join(30_000);
        second.join(30_000);
        long token = a.lease().map(l -> l.token()).orElse(-1L);
        assertThat(token).as("the relay still holds its lease").isPositive();

        OutboxRows.add(db.dataSource(), clock, "e-2", null, "2");
        assertThat(a.relayOnce()).as("and sends under it").isEqualTo(1);
        assertThat(a.lease().orElseThrow().token()).isEqualTo(token);
        assertThat(admin.stats().pending()).isZero();
        a.close();
    }

    private static RetryPolicy retries(Duration initial, Duration max, int retries) {
        return RetryPolicy.builder()
                .initialDelay(initial)
                .maxDelay(max)
                .jitter(RetryPolicy.Jitter.NONE)
                .maxRetries(retries)
                .build();
    }
}
