package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.OutboxHeaders;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.internal.JdbcOutbox;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Receipt;
import dev.once.retention.IdempotencyKeyPruner;
import dev.once.retention.OutboxPruner;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The idempotency keys, the relay and retention on MariaDB (the second dialect). Leases are
 * PostgreSQL-only.
 */
class MariaDbSmokeTest {

    private TestDatabase db;
    private DataSource ds;
    private MutableClock clock;

    @BeforeEach
    void setUp() {
        db = TestMariaDb.shared().freshDatabase(20);
        ds = db.dataSource();
        clock = MutableClock.startingNow();
    }

    @AfterEach
    void tearDown() {
        if (db != null) { // null when setUp skipped the test: no MariaDB
            db.close();
        }
    }

    @Test
    void idempotencyKeysWorkOnMariaDb() throws Exception {
        IdempotencyKeys keys =
                IdempotencyKeys.builder().dataSource(ds).clock(clock).build();
        assertThat(keys.begin("t", "k", "fp")).isInstanceOf(BeginResult.Started.class);
        ExecutorService pool = Executors.newFixedThreadPool(16);
        try {
            CyclicBarrier barrier = new CyclicBarrier(16);
            List<Future<BeginResult>> results = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                results.add(pool.submit(() -> {
                    barrier.await();
                    return keys.begin("t", "race", "fp");
                }));
            }
            int started = 0;
            for (Future<BeginResult> f : results) {
                started += f.get() instanceof BeginResult.Started ? 1 : 0;
            }
            assertThat(started).isEqualTo(1);
        } finally {
            pool.shutdownNow();
        }
        BeginResult.Started s = (BeginResult.Started) keys.begin("t", "pay", "fp");
        byte[] body = {0, 1, 2, (byte) 255};
        keys.complete(s, 201, body);
        assertThat(keys.begin("t", "pay", "fp")).isEqualTo(new BeginResult.Replay(201, body, false));
        assertThat(keys.begin("t", "pay", "other")).isInstanceOf(BeginResult.Mismatch.class);
        assertThat(keys.begin("u", "pay", "other")).as("another scope").isInstanceOf(BeginResult.Started.class);
        clock.advance(Duration.ofDays(2));
        assertThat(IdempotencyKeyPruner.builder()
                        .dataSource(ds)
                        .clock(clock)
                        .build()
                        .prune())
                .isEqualTo(4);
    }

    @Test
    void theRelaySendsRetriesKillsAndReplaysOnMariaDb() throws Exception {
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            for (String id : List.of("a1", "a2", "b1")) {
                JdbcOutbox outbox = new JdbcOutbox(
                        c, Dialects.MARIADB, TablePrefix.DEFAULT, "test", "evt-" + id, clock, OutboxHeaders.NONE);
                outbox.add("topic", id.substring(0, 1), id.getBytes(StandardCharsets.UTF_8), Map.of(), null);
                outbox.flush();
            }
            c.commit();
        }
        List<String> sent = new ArrayList<>();
        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(ds)
                .clock(clock)
                .meterRegistry(new SimpleMeterRegistry())
                .retryPolicy(RetryPolicy.builder().maxRetries(0).build())
                .publisher(m -> {
                    String body = new String(m.payload(), StandardCharsets.UTF_8);
                    if (body.equals("a1") && sent.isEmpty()) {
                        throw new RetryableException("down");
                    }
                    sent.add(body);
                    return new Receipt(200, "ok");
                })
                .build();
        assertThat(relay.relayOnce()).isEqualTo(2); // a1 (dies: one attempt allowed) and b1
        assertThat(relay.relayOnce()).isZero(); // a2 waits behind its dead head
        assertThat(sent).containsExactly("b1");
        OutboxAdmin admin = OutboxAdmin.builder().dataSource(ds).clock(clock).build();
        assertThat(admin.stats().dead()).isEqualTo(1);
        assertThat(admin.replay(List.of(admin.dead(0, 10).get(0).message().id())))
                .isEqualTo(1);
        // a1, the replayed head, then a2 behind it: one batch (a key run), a1's wave before a2's. The
        // clock stands still, so the replayed head is available no later than a2 and takes it along.
        assertThat(relay.relayOnce()).isEqualTo(2);
        assertThat(sent).containsExactly("b1", "a1", "a2");
        clock.advance(Duration.ofDays(8));
        assertThat(OutboxPruner.builder().dataSource(ds).clock(clock).build().prune())
                .isEqualTo(3);
    }
}
