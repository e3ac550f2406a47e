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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Poison isolation by bisection with the per-event handler: a failing batch is halved until the poison stands alone. */
class BisectionTest {

    private TestDatabase db;
    private CountingDataSource counting;
    private IdempotentConsumer consumer;

    protected TestDatabase newDatabase() {
        return TestPostgres.shared().freshDatabase(2);
    }

    @BeforeEach
    void setUp() {
        db = Ledger.on(newDatabase());
        counting = new CountingDataSource(db.dataSource());
        consumer = IdempotentConsumer.builder()
                .dataSource(counting.dataSource())
                .consumer("bisect")
                .handler(Ledger.CREDIT)
                .build();
        counting.reset();
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    @ParameterizedTest(name = "poison at {1} of {0}")
    @CsvSource({"100, 37", "500, 0", "500, 499", "500, 250"})
    void aPoisonMessageIsIsolatedInAboutTwoLog2NTransactions(int n, int poison) throws Exception {
        List<Delivery> batch = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            batch.add(i == poison ? Delivery.of("evt-" + i, "poison") : Ledger.payment("evt-" + i, 1));
        }
        List<Outcome> outcomes = consumer.processBatch(batch);

        int log2 = 32 - Integer.numberOfLeadingZeros(n - 1); // ceil(log2 n)
        assertThat(counting.transactions())
                .as("transactions for one poison message in %d", n)
                .isLessThanOrEqualTo(1 + 2 * log2);
        for (int i = 0; i < n; i++) {
            assertThat(outcomes.get(i).status())
                    .as("outcome of evt-%d", i)
                    .isEqualTo(i == poison ? Status.FAILED_PERMANENT : Status.APPLIED);
        }
        assertThat(Ledger.balance(db)).as("every other message applied once").isEqualTo(n - 1);
    }
}
