package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;

class BatchTest {

    private TestDatabase db;
    private IdempotentConsumer consumer;

    protected TestDatabase newDatabase(int poolSize) {
        return TestPostgres.shared().freshDatabase(poolSize);
    }

    @BeforeEach
    void setUp() throws SQLException {
        db = Ledger.on(newDatabase(8));
        consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("batch")
                .handler(Ledger.CREDIT)
                .build();
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    private long balance() throws SQLException {
        return Ledger.balance(db);
    }

    @Test
    void inBatchDuplicatesCountOnceAndTheFirstOccurrenceWins() throws Exception {
        List<Outcome> outcomes = consumer.processBatch(List.of(
                Ledger.payment("a", 1),
                Ledger.payment("b", 10),
                Ledger.payment("a", 1).redelivery(),
                Ledger.payment("c", 100)));
        assertThat(outcomes)
                .extracting(Outcome::status)
                .containsExactly(Status.APPLIED, Status.APPLIED, Status.DUPLICATE, Status.APPLIED);
        assertThat(balance()).isEqualTo(111);
        List<Outcome> again = consumer.processBatch(List.of(Ledger.payment("c", 100), Ledger.payment("d", 1000)));
        assertThat(again).extracting(Outcome::status).containsExactly(Status.DUPLICATE, Status.APPLIED);
        assertThat(balance()).isEqualTo(1111);
    }

    // On PostgreSQL a batch is first claimed with a plain insert that expects every id new; an id
    // claimed before fails it with a unique violation, the transaction is rolled back and the batch
    // claimed again with ON CONFLICT. Wherever that duplicate sorts, nothing of the first try stays.
    @Test
    void aRedeliveredBatchWithSomeIdsClaimedBeforeAppliesOnlyTheNewOnesOnce() throws Exception {
        List<Delivery> earlier = new ArrayList<>();
        List<Delivery> mixed = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            Delivery d = Ledger.payment(String.format("evt-%03d", i), 1);
            if (i % 3 == 0 || i == 99) {
                earlier.add(d);
            }
            mixed.add(d.redelivery());
        }
        assertThat(consumer.processBatch(earlier)).extracting(Outcome::status).containsOnly(Status.APPLIED);
        List<Outcome> outcomes = consumer.processBatch(mixed);
        for (int i = 0; i < 100; i++) {
            assertThat(outcomes.get(i).status())
                    .as("outcome of evt-%03d", i)
                    .isEqualTo(i % 3 == 0 || i == 99 ? Status.DUPLICATE : Status.APPLIED);
        }
        assertThat(balance()).as("each of the 100 events applied exactly once").isEqualTo(100);
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox"))
                .as("one claim per event")
                .isEqualTo(100);
        assertThat(consumer.processBatch(mixed)).extracting(Outcome::status).containsOnly(Status.DUPLICATE);
        assertThat(balance()).as("a third delivery changes nothing").isEqualTo(100);
    }

    @Test
    void aPoisonMessageInABatchOfAHundredFailsAloneAndIsNotClaimed() throws Exception {
        List<Delivery> batch = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            batch.add(i == 37 ? Delivery.of("evt-37", "poison") : Ledger.payment("evt-" + i, 1));
        }
        List<Outcome> outcomes = consumer.processBatch(batch);
        for (int i = 0; i < 100; i++) {
            assertThat(outcomes.get(i).status())
                    .as("outcome of evt-%d", i)
                    .isEqualTo(i == 37 ? Status.FAILED_PERMANENT : Status.APPLIED);
        }
        assertThat(balance()).as("the other 99 applied exactly once").isEqualTo(99);
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox WHERE event_id = 'evt-37'"))
                .as("the poison message is not claimed, so a fixed handler can still apply it")
                .isZero();
        assertThat(consumer.processBatch(batch))
                .extracting(Outcome::status)
                .filteredOn(s -> s == Status.APPLIED)
                .isEmpty();
        assertThat(balance()).as("redelivering the whole batch changes nothing").isEqualTo(99);
    }

    @RepeatedTest(5)
    void twoWorkersClaimingOverlappingBatchesInOppositeOrdersApplyEachEventOnceWithoutErrors() throws Exception {
        List<Delivery> forward = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            forward.add(Ledger.payment(String.format("evt-%03d", i), 1));
        }
        List<Delivery> backward = new ArrayList<>(forward);
        Collections.reverse(backward);
        // Offset the overlap: worker A has 0..199, worker B has 199..50.
        List<Delivery> b = backward.subList(0, 150);
        CyclicBarrier barrier = new CyclicBarrier(2);
        CompletableFuture<List<Outcome>> first = CompletableFuture.supplyAsync(
                () -> {
                    await(barrier);
                    return consumer.processBatch(forward);
                },
                OwnThreads.each());
        CompletableFuture<List<Outcome>> second = CompletableFuture.supplyAsync(
                () -> {
                    await(barrier);
                    return consumer.processBatch(b);
                },
                OwnThreads.each());
        List<Outcome> all = new ArrayList<>(first.get(60, TimeUnit.SECONDS));
        all.addAll(second.get(60, TimeUnit.SECONDS));
        assertThat(all)
                .as("no error surfaces")
                .allSatisfy(o -> assertThat(o.status()).isIn(Status.APPLIED, Status.DUPLICATE, Status.IN_PROGRESS));
        // Whatever was left in progress is redelivered.
        for (Outcome o : all) {
            if (o.retryable()) {
                consumer.process(Ledger.payment(o.eventId(), 1).redelivery());
            }
        }
        assertThat(all)
                .filteredOn(o -> o.status() == Status.APPLIED)
                .extracting(Outcome::eventId)
                .doesNotHaveDuplicates();
        assertThat(balance()).as("each of the 200 events applied exactly once").isEqualTo(200);
    }

    private static void await(CyclicBarrier barrier) {
        try {
            barrier.await(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
