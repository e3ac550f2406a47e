package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The test that catches a dedupe check written as a SELECT: many threads, one event, one barrier. */
class ConcurrentDuplicateStressTest {

    private static final int ROUNDS = 1_000;
    private static final int THREADS = 8;

    @Test
    void eightThreadsDeliveringTheSameEventApplyItExactlyOnceInEachOfAThousandRounds() throws Exception {
        try (TestDatabase db = Ledger.on(TestPostgres.shared().freshDatabase(THREADS))) {
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("stress")
                    .handler(Ledger.CREDIT)
                    .build();
            ExecutorService pool = Executors.newFixedThreadPool(THREADS);
            CyclicBarrier barrier = new CyclicBarrier(THREADS);
            long expected = 0;
            try {
                for (int round = 0; round < ROUNDS; round++) {
                    Delivery event = Ledger.payment("evt-" + round, round + 1);
                    expected += round + 1;
                    List<Future<Outcome>> futures = new ArrayList<>(THREADS);
                    for (int t = 0; t < THREADS; t++) {
                        futures.add(pool.submit(() -> {
                            barrier.await(30, TimeUnit.SECONDS);
                            return consumer.process(event);
                        }));
                    }
                    int applied = 0;
                    for (Future<Outcome> f : futures) {
                        Outcome o = f.get(60, TimeUnit.SECONDS);
                        assertThat(o.status())
                                .as("round %d: no delivery fails or times out (%s)", round, o.failure())
                                .isIn(Status.APPLIED, Status.DUPLICATE);
                        if (o.status() == Status.APPLIED) {
                            applied++;
                        }
                    }
                    assertThat(applied)
                            .as("round %d: exactly one of %d concurrent deliveries applied", round, THREADS)
                            .isEqualTo(1);
                }
            } finally {
                pool.shutdownNow();
            }
            assertThat(Ledger.balance(db))
                    .as("ledger equals the sum of distinct events")
                    .isEqualTo(expected);
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isEqualTo(ROUNDS);
        }
    }
}
