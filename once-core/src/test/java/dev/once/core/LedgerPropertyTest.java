package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
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
 * Random streams of deliveries with duplicates (sequential and in-batch), crashes between commit
 * and ack, and handler failures: the ledger always equals the sum over the distinct non-poison
 * event ids of the input stream. The oracle comes from the input alone, never from the outcomes the
 * engine reported: an event wrongly reported DUPLICATE and never applied would otherwise pass.
 */
class LedgerPropertyTest {

    /** One step of a stream: a batch of deliveries, and whether the consumer crashes before acking it. */
    record Step(List<Event> batch, boolean crashBeforeAck) {}

    /** An event id drawn from a small space (so duplicates are common) and whether its handler fails. */
    record Event(int id, boolean poison) {
        long amount() {
            return id * 7L + 3;
        }

        Delivery delivery() {
            return poison ? Delivery.of("evt-" + id + "-poison", "poison") : Ledger.payment("evt-" + id, amount());
        }
    }

    private static TestDatabase db;

    @BeforeContainer
    static void start() throws Exception {
        db = Ledger.on(TestPostgres.shared().freshDatabase(4));
    }

    @AfterContainer
    static void stop() {
        db.close();
    }

    @Provide
    Arbitrary<List<Step>> streams() {
        Arbitrary<Event> event = Combinators.combine(
                        Arbitraries.integers().between(0, 30),
                        Arbitraries.integers().between(0, 9).map(n -> n == 0))
                .as(Event::new);
        Arbitrary<Step> step = Combinators.combine(
                        event.list().ofMinSize(1).ofMaxSize(12),
                        Arbitraries.integers().between(0, 3).map(n -> n == 0))
                .as(Step::new);
        return step.list().ofMinSize(1).ofMaxSize(15);
    }

    @Property(tries = 200)
    void ledgerEqualsTheSumOverDistinctSuccessfullyHandledEvents(@ForAll("streams") List<Step> stream)
            throws Exception {
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement()) {
            s.execute("UPDATE account SET balance = 0");
            s.execute("DELETE FROM once_inbox");
        }
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("property")
                .handler(Ledger.CREDIT)
                .build();
        Map<String, Long> applied = new HashMap<>();
        Set<String> succeeded = new HashSet<>();
        List<List<Delivery>> pending = new ArrayList<>();
        for (Step step : stream) {
            List<Delivery> batch = step.batch().stream().map(Event::delivery).toList();
            List<Outcome> outcomes =
                    batch.size() == 1 ? List.of(consumer.process(batch.get(0))) : consumer.processBatch(batch);
            for (int i = 0; i < batch.size(); i++) {
                Outcome o = outcomes.get(i);
                Event e = step.batch().get(i);
                if (o.status() == Outcome.Status.APPLIED) {
                    assertThat(applied.put(o.eventId(), e.amount()))
                            .as("event %s applied twice", o.eventId())
                            .isNull();
                    succeeded.add(o.eventId());
                }
                if (e.poison()) {
                    assertThat(o.status()).isEqualTo(Outcome.Status.FAILED_PERMANENT);
                }
            }
            if (step.crashBeforeAck()) {
                // The commit happened, the ack was lost: the broker redelivers the whole batch later.
                pending.add(batch.stream().map(Delivery::redelivery).toList());
            }
        }
        for (List<Delivery> redelivery : pending) {
            for (Outcome o : consumer.processBatch(redelivery)) {
                assertThat(o.status())
                        .as("a redelivery after a lost ack never applies")
                        .isNotEqualTo(Outcome.Status.APPLIED);
            }
        }
        Map<String, Long> distinctNonPoison = new HashMap<>();
        for (Step step : stream) {
            for (Event e : step.batch()) {
                if (!e.poison()) {
                    distinctNonPoison.put(e.delivery().eventId(), e.amount());
                }
            }
        }
        long oracle =
                distinctNonPoison.values().stream().mapToLong(Long::longValue).sum();
        assertThat(Ledger.balance(db))
                .as("ledger = sum over the distinct non-poison ids of the input %s", distinctNonPoison.keySet())
                .isEqualTo(oracle);
        assertThat(succeeded)
                .as("every distinct non-poison id was reported APPLIED exactly once")
                .isEqualTo(distinctNonPoison.keySet());
        long reported = applied.values().stream().mapToLong(Long::longValue).sum();
        assertThat(Ledger.balance(db))
                .as("ledger = sum over distinct successfully handled ids %s", succeeded)
                .isEqualTo(reported);
    }
}
