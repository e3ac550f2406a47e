package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

/**
 * Random batches with copies and several poison messages, through the batch handler on real
 * PostgreSQL: the poison messages are isolated by bisection within {@code 1 + 2·p·⌈log2 n⌉}
 * transactions (p distinct poison ids among n distinct ids), each of the others is applied once,
 * and the ledger equals what the input alone says: the sum over distinct non-poison ids.
 */
class BisectionPropertyTest {

    private static TestDatabase db;
    private static CountingDataSource counting;
    private static int run;

    /** A batch: event numbers drawn from a small space (so copies are common), and which numbers are poison. */
    record Batch(List<Integer> events, Set<Integer> poison) {
        Delivery delivery(int n) {
            return poison.contains(n) ? Accounts.poison("evt-" + n) : Accounts.credit("evt-" + n, n % 20, 1 + n % 11);
        }
    }

    @BeforeContainer
    static void start() {
        db = Accounts.on(TestPostgres.shared().freshDatabase(2), 20);
        counting = new CountingDataSource(db.dataSource());
    }

    @AfterContainer
    static void stop() {
        db.close();
    }

    @Provide
    Arbitrary<Batch> batches() {
        return Arbitraries.integers()
                .between(1, 300)
                .flatMap(space -> Combinators.combine(
                                Arbitraries.integers()
                                        .between(0, space - 1)
                                        .list()
                                        .ofMinSize(1)
                                        .ofMaxSize(400),
                                Arbitraries.integers()
                                        .between(0, space - 1)
                                        .set()
                                        .ofMinSize(0)
                                        .ofMaxSize(5))
                        .as(Batch::new));
    }

    @Property(tries = 60)
    void poisonMessagesAreIsolatedWithinTheBisectionBoundAndEveryOtherEventAppliesOnce(@ForAll("batches") Batch batch)
            throws Exception {
        db.execute("UPDATE acct SET balance = 0");
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(counting.dataSource())
                .consumer("property-" + (++run))
                .batchHandler(Accounts.setCredit(true))
                .build();
        List<Delivery> deliveries = new ArrayList<>();
        Map<String, Delivery> distinct = new LinkedHashMap<>();
        for (int n : batch.events()) {
            Delivery d = batch.delivery(n);
            deliveries.add(d);
            distinct.putIfAbsent(d.eventId(), d);
        }
        long poisonIds = distinct.values().stream().filter(Accounts::isPoison).count();
        counting.reset();

        List<Outcome> outcomes = consumer.processBatch(deliveries);

        int n = distinct.size();
        int log2 = n == 1 ? 0 : 32 - Integer.numberOfLeadingZeros(n - 1);
        assertThat(counting.transactions())
                .as("transactions for %d poison ids among %d", poisonIds, n)
                .isLessThanOrEqualTo(1 + 2 * (int) poisonIds * log2);
        Map<String, Boolean> seen = new LinkedHashMap<>();
        for (int i = 0; i < deliveries.size(); i++) {
            Delivery d = deliveries.get(i);
            boolean copy = seen.put(d.eventId(), true) != null;
            Status expected = Accounts.isPoison(d) ? Status.FAILED_PERMANENT : copy ? Status.DUPLICATE : Status.APPLIED;
            assertThat(outcomes.get(i).status())
                    .as("delivery %d, %s", i, d.eventId())
                    .isEqualTo(expected);
        }
        List<Delivery> healthy =
                distinct.values().stream().filter(d -> !Accounts.isPoison(d)).toList();
        assertThat(Accounts.balances(db)).isEqualTo(BatchHandlerTest.expected(healthy));
    }
}
