package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome.Status;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.PreparedStatement;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A copy the consumer expects (its id claimed moments before) is claimed with {@code ON CONFLICT DO NOTHING}, which
 * finds the id taken, writes nothing and leaves the transaction usable: it commits, on the path of every fresh
 * event, instead of rolling back (the rollback path cost a copy about twice the listener CPU of a hand-written
 * {@code processed_events} copy, docs/benchmarks.md). A copy the consumer did not expect still takes the plain
 * insert, whose unique violation aborts the transaction, which then rolls back. Either way: a duplicate, the
 * effect once.
 */
class LikelyCopyCommitTest {

    private static TestDatabase db;

    @BeforeAll
    static void start() {
        db = TestPostgres.shared()
                .freshDatabase(2)
                .execute("CREATE TABLE effects (event_id text PRIMARY KEY, n int NOT NULL)");
    }

    @AfterAll
    static void stop() {
        db.close();
    }

    private static IdempotentConsumer consumer(CountingDataSource counting) {
        return IdempotentConsumer.builder()
                .dataSource(counting.dataSource())
                .consumer("likely-copies")
                .handler((d, tx) -> {
                    try (PreparedStatement ps = tx.connection()
                            .prepareStatement("INSERT INTO effects (event_id, n) VALUES (?, 1)"
                                    + " ON CONFLICT (event_id) DO UPDATE SET n = effects.n + 1")) {
                        ps.setString(1, d.eventId());
                        ps.executeUpdate();
                    }
                })
                .build();
    }

    @Test
    void aLikelyCopyFoundTakenCommitsEmptyInsteadOfRollingBack() {
        CountingDataSource counting = new CountingDataSource(db.dataSource());
        IdempotentConsumer consumer = consumer(counting);
        assertThat(consumer.process(Delivery.of("e-1", "x")).status()).isEqualTo(Status.APPLIED);
        counting.reset();

        assertThat(consumer.process(Delivery.of("e-1", "x")).status()).isEqualTo(Status.DUPLICATE);

        assertThat(counting.prepared())
                .as("the copy's claim, with the id claimed just before")
                .singleElement()
                .satisfies(sql ->
                        assertThat(sql.toLowerCase(java.util.Locale.ROOT)).contains("on conflict"));
        assertThat(counting.rollbacks())
                .as("rollbacks of the copy's transaction")
                .isZero();
        assertThat(counting.commits()).as("commits of the copy's transaction").isEqualTo(1);
        assertThat(db.queryLong("SELECT n FROM effects WHERE event_id = 'e-1'"))
                .as("effect applied exactly once")
                .isEqualTo(1);
    }

    @Test
    void anUnexpectedCopyTakesThePlainInsertAndRollsBack() {
        CountingDataSource counting = new CountingDataSource(db.dataSource());
        assertThat(consumer(counting).process(Delivery.of("e-2", "x")).status()).isEqualTo(Status.APPLIED);
        // another process of the same consumer: it never saw e-2, so it expects the id new
        CountingDataSource other = new CountingDataSource(db.dataSource());
        IdempotentConsumer second = consumer(other);

        assertThat(second.process(Delivery.of("e-2", "x")).status()).isEqualTo(Status.DUPLICATE);

        assertThat(other.prepared())
                .singleElement()
                .satisfies(sql ->
                        assertThat(sql.toLowerCase(java.util.Locale.ROOT)).doesNotContain("on conflict"));
        assertThat(other.rollbacks()).as("the aborted transaction rolls back").isEqualTo(1);
        assertThat(other.commits()).isZero();
        assertThat(db.queryLong("SELECT n FROM effects WHERE event_id = 'e-2'"))
                .as("effect applied exactly once")
                .isEqualTo(1);
    }
}
