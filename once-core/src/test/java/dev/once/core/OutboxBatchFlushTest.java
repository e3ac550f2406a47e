package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.BatchHandler;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.Outbox;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * One outbox write per batch transaction: the rows every delivery of a batch adds, through the
 * per-event handler or the batch handler, are buffered together and written in one statement
 * before the commit, outside the handler's timing.
 */
class OutboxBatchFlushTest {

    private TestDatabase db;
    private CountingDataSource counting;

    protected TestDatabase newDatabase() {
        return TestPostgres.shared().freshDatabase(2);
    }

    protected boolean postgres() {
        return true;
    }

    @BeforeEach
    void setUp() {
        db = Ledger.on(newDatabase());
        counting = new CountingDataSource(db.dataSource());
    }

    @AfterEach
    void tearDown() {
        if (db != null) { // null when setUp skipped the test: no MariaDB
            db.close();
        }
    }

    /** Credits the ledger and adds {@code rows} outbox rows per delivery. */
    private static Handler creditAndEnqueue(int rows) {
        return (d, tx) -> {
            Ledger.CREDIT.handle(d, tx);
            for (int i = 0; i < rows; i++) {
                tx.outbox().add("receipts", "k" + i, d.payload(), Map.of(), null);
            }
        };
    }

    private IdempotentConsumer consumer(Handler handler) {
        IdempotentConsumer c = IdempotentConsumer.builder()
                .dataSource(counting.dataSource())
                .consumer("flush")
                .handler(handler)
                .build();
        counting.reset();
        return c;
    }

    private static List<Delivery> payments(int n, int poison) {
        List<Delivery> batch = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            batch.add(i == poison ? Delivery.of("evt-" + i, "poison") : Ledger.payment("evt-" + i, 1));
        }
        return batch;
    }

    @Test
    void aBatchOf100DeliveriesEachAddingARowIssuesOneOutboxInsert() throws Exception {
        IdempotentConsumer consumer = consumer(creditAndEnqueue(1));

        List<Outcome> outcomes = consumer.processBatch(payments(100, -1));

        assertThat(outcomes).allMatch(o -> o.status() == Status.APPLIED);
        assertThat(counting.transactions()).isEqualTo(1);
        assertThat(counting.outboxInserts())
                .as("outbox insert statements for a batch of 100 per-event deliveries")
                .isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox")).isEqualTo(100);
        assertThat(db.queryLong("SELECT count(DISTINCT event_id) FROM once_outbox"))
                .isEqualTo(100);
    }

    @Test
    void theBatchHandlersRowsForManyCausesGoInOneInsert() throws Exception {
        BatchHandler handler = (claimed, tx) -> {
            for (Delivery d : claimed) {
                tx.outbox(d).add("receipts", null, d.payload(), Map.of(), null);
                tx.outbox(d).add("audit", null, d.payload(), Map.of(), null);
            }
        };
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(counting.dataSource())
                .consumer("flush")
                .batchHandler(handler)
                .build();
        counting.reset();

        consumer.processBatch(payments(100, -1));

        assertThat(counting.outboxInserts())
                .as("outbox insert statements for 100 causes")
                .isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox")).isEqualTo(200);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE event_id = 'flush:evt-42#2'"))
                .as("each cause numbers its own rows")
                .isEqualTo(1);
    }

    @Test
    void rowsAlreadyWrittenByARolledBackBatchAreAllAbsent() throws Exception {
        // 20 rows a delivery: the buffer writes early at Outbox.FLUSH_ROWS, so the first batch has
        // written 1,000 rows when its last delivery fails and rolls them back.
        int perDelivery = 20;
        IdempotentConsumer consumer = consumer(creditAndEnqueue(perDelivery));

        List<Outcome> outcomes = consumer.processBatch(payments(100, 99));

        assertThat(outcomes.get(99).status()).isEqualTo(Status.FAILED_PERMANENT);
        assertThat(counting.outboxInserts())
                .as("the failed batch wrote early, then the survivors once more")
                .isGreaterThanOrEqualTo(1 + 99 * perDelivery / Outbox.FLUSH_ROWS);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox")).isEqualTo(99L * perDelivery);
        assertThat(db.queryLong("SELECT count(DISTINCT event_id) FROM once_outbox"))
                .as("no row twice")
                .isEqualTo(99L * perDelivery);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE event_id LIKE 'flush:evt-99#%'"))
                .isZero();
        assertThat(Ledger.balance(db)).isEqualTo(99);
    }

    @Test
    void bisectionIsolatesAPoisonMessageAndTheSurvivorsRowsAreThereOnce() throws Exception {
        IdempotentConsumer consumer = consumer(creditAndEnqueue(1));

        List<Outcome> outcomes = consumer.processBatch(payments(100, 37));

        for (int i = 0; i < 100; i++) {
            assertThat(outcomes.get(i).status())
                    .as("evt-%d", i)
                    .isEqualTo(i == 37 ? Status.FAILED_PERMANENT : Status.APPLIED);
        }
        assertThat(counting.outboxInserts())
                .as("one insert per committed part (before the poison, after it); none for rolled-back ones")
                .isEqualTo(2);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox")).isEqualTo(99);
        assertThat(db.queryLong("SELECT count(DISTINCT event_id) FROM once_outbox"))
                .isEqualTo(99);
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE event_id = 'flush:evt-37#1'"))
                .isZero();
        assertThat(Ledger.balance(db)).isEqualTo(99);
    }

    @Test
    void theHandlerDurationDoesNotIncludeTheOutboxWrite() throws Exception {
        // A slow outbox insert (a trigger sleeping 1 s); the handler itself is one UPDATE.
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement()) {
            if (postgres()) {
                s.execute("CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS"
                        + " $$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$");
                s.execute("CREATE TRIGGER slow_insert AFTER INSERT ON once_outbox"
                        + " FOR EACH STATEMENT EXECUTE FUNCTION slow_insert()");
            } else {
                s.execute("CREATE TRIGGER slow_insert AFTER INSERT ON once_outbox"
                        + " FOR EACH ROW SET @slept = SLEEP(1)");
            }
        }
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        IdempotentConsumer consumer = IdempotentConsumer.builder()
                .dataSource(counting.dataSource())
                .consumer("flush")
                .handler(creditAndEnqueue(1))
                .meterRegistry(registry)
                .build();

        long start = System.nanoTime();
        consumer.processBatch(payments(2, -1));
        long elapsed = System.nanoTime() - start;

        Timer timer = registry.get("once.handler.duration").timer();
        assertThat(elapsed).as("the slow insert ran").isGreaterThanOrEqualTo(TimeUnit.SECONDS.toNanos(1));
        assertThat(timer.count()).isEqualTo(2);
        assertThat(timer.totalTime(TimeUnit.MILLISECONDS))
                .as("handler time, of two UPDATEs, without the 1 s outbox write")
                .isLessThan(1000);
    }
}
