package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** {@code processInOrder}: the longest prefix that goes through is applied, nothing after the first failure. */
class ProcessInOrderTest {

    private TestDatabase db;
    private CountingDataSource counting;
    private IdempotentConsumer consumer;

    @BeforeEach
    void setUp() {
        db = Ledger.on(TestPostgres.shared().freshDatabase(2));
        counting = new CountingDataSource(db.dataSource());
        consumer = IdempotentConsumer.builder()
                .dataSource(counting.dataSource())
                .consumer("ordered")
                .handler(Ledger.CREDIT)
                .build();
        counting.reset();
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    private static List<Delivery> payments(int n, int poison) {
        List<Delivery> batch = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            batch.add(i == poison ? Delivery.of("evt-" + i, "poison") : Ledger.payment("evt-" + i, 1));
        }
        return batch;
    }

    @Test
    void aBatchThatGoesThroughIsOneTransaction() throws Exception {
        List<Outcome> outcomes = consumer.processInOrder(payments(10, -1));

        assertThat(outcomes).allMatch(Outcome::shouldAcknowledge);
        assertThat(counting.transactions()).isEqualTo(1);
        assertThat(Ledger.balance(db)).isEqualTo(10);
    }

    @Test
    void nothingAfterTheFirstFailureIsAppliedAndWhatCameBeforeIs() throws Exception {
        List<Outcome> outcomes = consumer.processInOrder(payments(10, 6));

        for (int i = 0; i < 10; i++) {
            assertThat(outcomes.get(i).status())
                    .as("evt-%d: %s", i, outcomes.get(i))
                    .isEqualTo(i < 6 ? Status.APPLIED : i == 6 ? Status.FAILED_PERMANENT : Status.FAILED_RETRYABLE);
        }
        assertThat(outcomes.get(7).failure()).hasMessageContaining("held back: 'evt-6'");
        assertThat(Ledger.balance(db)).as("evt-0 to evt-5 only").isEqualTo(6);
        assertThat(db.queryLong("SELECT count(*) FROM once_inbox WHERE event_id IN ('evt-7', 'evt-8', 'evt-9')"))
                .as("no claim after the failure")
                .isZero();
        assertThat(counting.transactions())
                .as("the whole, the part before the failure, the failure alone")
                .isLessThanOrEqualTo(3);

        // Redelivered behind the failed one, the rest goes through in one transaction.
        counting.reset();
        List<Outcome> again = consumer.processInOrder(payments(10, -1).subList(7, 10));
        assertThat(again).allMatch(o -> o.status() == Status.APPLIED);
        assertThat(counting.transactions()).isEqualTo(1);
    }

    @Test
    void laterCopiesAfterTheFailedDeliveryAreHeldBackNotCountedFailedPermanentOrDuplicate() throws Exception {
        // The adapter dead-letters the first failed delivery alone and runs the rest again: a later copy
        // reported FAILED_PERMANENT was counted (and told to the listener) as a dead-lettering that never
        // happened to it; a later copy of an applied event was counted a duplicate twice.
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        List<Outcome> heard = new CopyOnWriteArrayList<>();
        IdempotentConsumer ordered = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("ordered-copies")
                .handler(Ledger.CREDIT)
                .meterRegistry(meters)
                .outcomeListener((d, o) -> heard.add(o))
                .build();
        List<Delivery> run = List.of(
                Ledger.payment("evt-0", 1),
                Delivery.of("evt-1", "poison"),
                Ledger.payment("evt-2", 1),
                Delivery.of("evt-1", "poison"),
                Ledger.payment("evt-0", 1));

        List<Outcome> outcomes = ordered.processInOrder(run);

        assertThat(outcomes)
                .extracting(Outcome::status)
                .as("%s", outcomes)
                .containsExactly(
                        Status.APPLIED,
                        Status.FAILED_PERMANENT,
                        Status.FAILED_RETRYABLE,
                        Status.FAILED_RETRYABLE,
                        Status.FAILED_RETRYABLE);
        assertThat(outcomes.subList(2, 5))
                .allSatisfy(o -> assertThat(o.failure()).hasMessageContaining("held back: 'evt-1'"));
        assertThat(heard)
                .extracting(Outcome::status)
                .containsExactlyElementsOf(
                        outcomes.stream().map(Outcome::status).toList());
        assertThat(meters.get("once.deliveries")
                        .tag("outcome", "failed_permanent")
                        .counter()
                        .count())
                .as("one delivery failed permanently")
                .isEqualTo(1.0);
        assertThat(meters.get("once.duplicates").counter().count())
                .as("the copy of evt-0 runs again: counted then")
                .isZero();
    }
}
