package dev.once.retention;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/**
 * The opt-in time-partitioned inbox of docs/retention.md, on PostgreSQL: partitioned
 * by range of the event id itself (time-ordered UUIDv7 ids), so the primary key stays
 * {@code (consumer, event_id)}, a copy lands in the same partition as its first delivery and the
 * claim is still one unique check; an old day is dropped whole; ids that fit no day go to the
 * default partition; and the chunked pruner, run on such an inbox, deletes nothing inside its
 * retention.
 */
class PartitionedInboxTest {

    private static final Instant DAY1 = Instant.parse("2026-11-20T00:00:00Z");
    private static final Instant DAY2 = DAY1.plus(Duration.ofDays(1));
    private static final Instant DAY3 = DAY2.plus(Duration.ofDays(1));

    /** The recipe of docs/retention.md, for a new deployment whose inbox is still empty. */
    static void partition(TestDatabase db) {
        db.execute(
                // the columns of the migrated inbox, with event_id in byte order (a partition key's
                // collation cannot be changed afterwards)
                "CREATE TABLE once_inbox_c (LIKE once_inbox INCLUDING DEFAULTS)",
                "ALTER TABLE once_inbox_c ALTER COLUMN event_id TYPE varchar(255) COLLATE \"C\"",
                "CREATE TABLE once_inbox_p (LIKE once_inbox_c INCLUDING DEFAULTS) PARTITION BY RANGE (event_id)",
                "DROP TABLE once_inbox_c",
                "ALTER TABLE once_inbox_p ADD PRIMARY KEY (consumer, event_id)",
                "DROP TABLE once_inbox",
                "ALTER TABLE once_inbox_p RENAME TO once_inbox",
                "CREATE TABLE once_inbox_default PARTITION OF once_inbox DEFAULT",
                day(DAY1),
                day(DAY2));
    }

    /** A day's partition: every UUIDv7 whose 48-bit millisecond prefix falls in that UTC day. */
    static String day(Instant start) {
        return "CREATE TABLE once_inbox_" + start.toString().substring(0, 10).replace("-", "")
                + " PARTITION OF once_inbox FOR VALUES FROM ('" + prefix(start) + "') TO ('"
                + prefix(start.plus(Duration.ofDays(1))) + "')";
    }

    private static String prefix(Instant t) {
        String hex = String.format(Locale.ROOT, "%012x", t.toEpochMilli());
        return hex.substring(0, 8) + "-" + hex.substring(8);
    }

    /** A UUIDv7 stamped {@code t}, as a producer makes it once per event. */
    private static String uuidv7(Instant t, int n) {
        return prefix(t) + String.format(Locale.ROOT, "-7%03x-8000-%012x", n & 0xfff, n);
    }

    @Test
    void aCopyMeetsItsFirstDeliveryInOnePartitionAndAnOldDayIsDroppedWhole() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            partition(db);
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("billing")
                    .handler((d, tx) -> {})
                    .build();
            String first = uuidv7(DAY1.plusSeconds(5), 1);
            String second = uuidv7(DAY2.plusSeconds(5), 2);
            List<Delivery> batch =
                    List.of(Delivery.of(first, "a"), Delivery.of(second, "b"), Delivery.of("order-17", "c"));
            assertThat(consumer.processBatch(batch)).extracting(Outcome::status).containsOnly(Outcome.Status.APPLIED);
            for (Delivery d : batch) {
                assertThat(consumer.process(d.redelivery()).status())
                        .as("copy of %s", d.eventId())
                        .isEqualTo(Outcome.Status.DUPLICATE);
            }
            assertThat(consumer.processBatch(batch)).extracting(Outcome::status).containsOnly(Outcome.Status.DUPLICATE);
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox_20261120")).isEqualTo(1);
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox_20261121")).isEqualTo(1);
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox_default"))
                    .as("an id that is no UUIDv7 of a partitioned day")
                    .isEqualTo(1);

            db.execute("DROP TABLE once_inbox_20261120", day(DAY3));
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isEqualTo(2);
            assertThat(consumer.process(Delivery.of(second, "b").redelivery()).status())
                    .isEqualTo(Outcome.Status.DUPLICATE);
        }
    }

    @Test
    void theChunkedPrunerOnAPartitionedInboxDeletesNothingInsideItsRetention() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            partition(db);
            Instant now = DAY3.plus(Duration.ofDays(7));
            // The same positions (ctids) in both partitions: old claims in one, retained in the other.
            db.execute(
                    "INSERT INTO once_inbox SELECT 'billing', '" + prefix(DAY1) + "-' || g, timestamptz '"
                            + now.minus(Duration.ofDays(8)) + "' FROM generate_series(1, 500) g",
                    "INSERT INTO once_inbox SELECT 'billing', '" + prefix(DAY2) + "-' || g, timestamptz '"
                            + now.minus(Duration.ofDays(6)) + "' FROM generate_series(1, 500) g");
            InboxPruner pruner = InboxPruner.builder()
                    .dataSource(db.dataSource())
                    .retention(Duration.ofDays(7))
                    .chunkSize(100)
                    .meterRegistry(new SimpleMeterRegistry())
                    .clock(Clock.fixed(now, ZoneOffset.UTC))
                    .build();
            pruner.prune();
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox_20261121"))
                    .as("claims inside the retention")
                    .isEqualTo(500);
        }
    }
}
