package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.BatchHandler;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;

/** The batch handler on real PostgreSQL: one call per transaction with the claimed deliveries, set-based effects. */
class BatchHandlerTest {

    static final int ACCOUNTS = 20;

    protected TestDatabase db;
    protected CountingDataSource counting;

    protected TestDatabase newDatabase(int poolSize) {
        return TestPostgres.shared().freshDatabase(poolSize);
    }

    protected boolean postgres() {
        return true;
    }

    @BeforeEach
    void setUp() {
        db = Accounts.on(newDatabase(8), ACCOUNTS);
        counting = new CountingDataSource(db.dataSource());
    }

    @AfterEach
    void tearDown() {
        if (db != null) { // null when setUp skipped the test: no MariaDB
            db.close();
        }
    }

    private IdempotentConsumer consumer(BatchHandler handler) {
        IdempotentConsumer c = IdempotentConsumer.builder()
                .dataSource(counting.dataSource())
                .consumer("set")
                .batchHandler(handler)
                .build();
        counting.reset();
        return c;
    }

    @Test
    void theHandlerIsCalledOnceWithTheClaimedDeliveriesInDeliveryOrder() throws Exception {
        List<List<String>> calls = new CopyOnWriteArrayList<>();
        BatchHandler set = Accounts.setCredit(postgres());
        IdempotentConsumer consumer = consumer((claimed, tx) -> {
            calls.add(claimed.stream().map(Delivery::eventId).toList());
            set.handle(claimed, tx);
        });
        consumer.process(Accounts.credit("b", 1, 10));
        calls.clear();

        List<Outcome> outcomes = consumer.processBatch(List.of(
                Accounts.credit("z", 1, 1),
                Accounts.credit("b", 1, 10),
                Accounts.credit("a", 2, 100),
                Accounts.credit("z", 1, 1).redelivery(),
                Accounts.credit("m", 3, 1000)));

        assertThat(calls)
                .as("one call, with each event this transaction claimed once, in delivery order")
                .containsExactly(List.of("z", "a", "m"));
        assertThat(outcomes)
                .extracting(Outcome::status)
                .containsExactly(Status.APPLIED, Status.DUPLICATE, Status.APPLIED, Status.DUPLICATE, Status.APPLIED);
        assertThat(Accounts.balances(db)).isEqualTo(Map.of(1L, 11L, 2L, 100L, 3L, 1000L));
    }

    @Test
    void outboxRowsTakeOnlyACauseThisTransactionClaimed() throws Exception {
        List<String> refused = new CopyOnWriteArrayList<>();
        IdempotentConsumer consumer = consumer((claimed, tx) -> {
            for (Delivery cause : List.of(Accounts.credit("b", 1, 10), Accounts.credit("never", 1, 1))) {
                try {
                    tx.outbox(cause);
                } catch (IllegalArgumentException e) {
                    refused.add(cause.eventId());
                }
            }
            tx.outbox(claimed.get(0)).add("receipts", null, claimed.get(0).payload(), Map.of(), null);
        });
        consumer.process(Accounts.credit("b", 1, 10));
        refused.clear();

        consumer.processBatch(List.of(Accounts.credit("b", 1, 10), Accounts.credit("a", 2, 100)));

        assertThat(refused)
                .as("a duplicate of this batch and an id not in it are no cause of this transaction's rows")
                .containsExactly("b", "never");
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox")).isEqualTo(2);
    }

    @Test
    void eachEventIsAppliedOnceWithDuplicatesInsideAndAcrossBatches() throws Exception {
        IdempotentConsumer consumer = consumer(Accounts.setCredit(postgres()));
        Random random = new Random(42);
        Map<String, Delivery> distinct = new HashMap<>();
        int withEarlierClaims = 0;
        for (int round = 0; round < 20; round++) {
            List<Delivery> batch = new ArrayList<>();
            boolean claimedBefore = false;
            for (int k = 0; k < 100; k++) {
                int n = random.nextInt(600); // 2,000 draws from 600 ids: copies in and across batches
                Delivery d = Accounts.credit("evt-" + n, n % ACCOUNTS, 1 + n % 13);
                claimedBefore |= distinct.containsKey(d.eventId());
                batch.add(d);
            }
            batch.forEach(d -> distinct.putIfAbsent(d.eventId(), d));
            withEarlierClaims += claimedBefore ? 1 : 0;
            assertThat(consumer.processBatch(batch))
                    .extracting(Outcome::status)
                    .allSatisfy(s -> assertThat(s).isIn(Status.APPLIED, Status.DUPLICATE));
        }
        // The plain insert PostgreSQL tries first (every id new) is rolled back when an earlier batch
        // claimed one of the ids, and the batch is claimed again with ON CONFLICT in a second one.
        assertThat(counting.transactions())
                .as("one transaction per batch, on PostgreSQL one more per batch holding ids claimed before")
                .isEqualTo(20 + (postgres() ? withEarlierClaims : 0));
        assertThat(Accounts.balances(db)).isEqualTo(expected(distinct.values()));
    }

    @Test
    void poisonMessagesAreIsolatedByBisectionAndTheirBatchesOutboxRowsAreAllGone() throws Exception {
        BatchHandler set = Accounts.setCredit(postgres());
        IdempotentConsumer consumer = consumer((claimed, tx) -> {
            for (Delivery d : claimed) {
                tx.outbox(d).add("receipts", null, d.payload(), Map.of(), null);
            }
            set.handle(claimed, tx);
        });
        List<Delivery> batch = new ArrayList<>();
        Set<Integer> poison = Set.of(3, 64, 65, 200);
        for (int i = 0; i < 256; i++) {
            batch.add(poison.contains(i) ? Accounts.poison("evt-" + i) : Accounts.credit("evt-" + i, i % ACCOUNTS, 1));
        }
        List<Outcome> outcomes = consumer.processBatch(batch);

        assertThat(counting.transactions())
                .as("transactions for 4 poison messages in 256")
                .isLessThanOrEqualTo(1 + 2 * 4 * 8);
        for (int i = 0; i < 256; i++) {
            assertThat(outcomes.get(i).status())
                    .as("evt-%d", i)
                    .isEqualTo(poison.contains(i) ? Status.FAILED_PERMANENT : Status.APPLIED);
        }
        assertThat(Accounts.balances(db).values().stream()
                        .mapToLong(Long::longValue)
                        .sum())
                .isEqualTo(252);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox"))
                .as("one outbox row per applied event; those written by rolled-back halves are gone")
                .isEqualTo(252);
        assertThat(db.queryLong("SELECT count(DISTINCT event_id) FROM once_outbox"))
                .isEqualTo(252);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE event_id IN ('set:evt-3#1', 'set:evt-64#1',"
                        + " 'set:evt-65#1', 'set:evt-200#1')"))
                .as("nothing of a poison message")
                .isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isEqualTo(252);
    }

    @Test
    void aDeadlockRetriesTheWholeBatchRatherThanBisectingIt() throws Exception {
        AtomicInteger calls = new AtomicInteger();
        List<Integer> sizes = new CopyOnWriteArrayList<>();
        BatchHandler set = Accounts.setCredit(postgres());
        IdempotentConsumer consumer = consumer((claimed, tx) -> {
            sizes.add(claimed.size());
            if (calls.incrementAndGet() == 1) {
                throw new SQLException("deadlock detected", postgres() ? "40P01" : "40001", postgres() ? 0 : 1213);
            }
            set.handle(claimed, tx);
        });
        List<Delivery> batch = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            batch.add(Accounts.credit("evt-" + i, i % ACCOUNTS, 1));
        }
        assertThat(consumer.processBatch(batch)).extracting(Outcome::status).containsOnly(Status.APPLIED);
        assertThat(sizes).containsExactly(50, 50);
        assertThat(counting.transactions()).isEqualTo(2);
    }

    @RepeatedTest(3)
    void concurrentOverlappingBatchesApplyEachEventOnceWithoutDeadlockErrors() throws Exception {
        IdempotentConsumer consumer = consumer(Accounts.setCredit(postgres()));
        List<Delivery> all = new ArrayList<>();
        for (int i = 0; i < 400; i++) {
            all.add(Accounts.credit("evt-" + i, i % ACCOUNTS, 1 + i % 5));
        }
        int workers = 4;
        CyclicBarrier barrier = new CyclicBarrier(workers);
        ExecutorService pool = Executors.newFixedThreadPool(workers);
        List<Outcome> outcomes = new CopyOnWriteArrayList<>();
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int w = 0; w < workers; w++) {
                Random random = new Random(w);
                done.add(pool.submit(() -> {
                    // Every worker sees every event, each in an order of its own, 100 per batch.
                    List<Delivery> mine = new ArrayList<>(all);
                    Collections.shuffle(mine, random);
                    barrier.await(30, TimeUnit.SECONDS);
                    for (int from = 0; from < mine.size(); from += 100) {
                        outcomes.addAll(consumer.processBatch(mine.subList(from, from + 100)));
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(120, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertThat(outcomes)
                .as("no deadlock or other error surfaces")
                .allSatisfy(o -> assertThat(o.status()).isIn(Status.APPLIED, Status.DUPLICATE));
        assertThat(outcomes).filteredOn(o -> o.status() == Status.APPLIED).hasSize(400);
        assertThat(Accounts.balances(db)).isEqualTo(expected(all));
    }

    static Map<Long, Long> expected(Iterable<Delivery> distinct) {
        Map<Long, Long> expected = new TreeMap<>();
        for (Delivery d : distinct) {
            expected.merge(Accounts.account(d), Accounts.amount(d), Long::sum);
        }
        return expected;
    }
}
