package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome.Status;
import dev.once.Schema;
import dev.once.retention.InboxPruner;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class RetentionAndSchemaTest {

    private static final Instant T0 = Instant.parse("2026-11-01T00:00:00Z");

    @Test
    void thePrunerDeletesOnlyClaimsOlderThanTheRetentionInBoundedChunks() throws Exception {
        try (TestDatabase db = Ledger.on(TestPostgres.shared().freshDatabase(2))) {
            for (int day = 0; day < 10; day++) {
                Clock clock = Clock.fixed(T0.plus(Duration.ofDays(day)), ZoneOffset.UTC);
                IdempotentConsumer consumer = IdempotentConsumer.builder()
                        .dataSource(db.dataSource())
                        .consumer("billing")
                        .handler(Ledger.CREDIT)
                        .clock(clock)
                        .build();
                List<Delivery> batch = new ArrayList<>();
                for (int i = 0; i < 7; i++) {
                    batch.add(Ledger.payment("day" + day + "-evt" + i, 1));
                }
                consumer.processBatch(batch);
            }
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            InboxPruner pruner = InboxPruner.builder()
                    .dataSource(db.dataSource())
                    .retention(Duration.ofDays(7))
                    .chunkSize(5)
                    .meterRegistry(registry)
                    .clock(Clock.fixed(T0.plus(Duration.ofDays(9)).minusSeconds(1), ZoneOffset.UTC))
                    .build();
            long deleted = pruner.prune();
            assertThat(deleted).as("days 0 and 1 are past the 7-day retention").isEqualTo(14);
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isEqualTo(56);
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox WHERE processed_at < '2026-11-03'"))
                    .isZero();
            assertThat(registry.get("once.retention.deleted").counter().count()).isEqualTo(14.0);
            assertThat(registry.get("once.inbox.rows").gauge().value()).isEqualTo(56.0);
            assertThat(pruner.prune()).as("a second run finds nothing").isZero();
            // A copy of a retained event is still absorbed.
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("billing")
                    .handler(Ledger.CREDIT)
                    .build();
            assertThat(consumer.process(Ledger.payment("day5-evt3", 1).redelivery())
                            .status())
                    .isEqualTo(Status.DUPLICATE);
        }
    }

    @Test
    void migrationIsIdempotentAndSafeFromManyInstancesAtOnce() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(6)) {
            assertThat(Schema.migrate(db.dataSource()))
                    .as("already migrated by the test kit")
                    .isZero();
            CyclicBarrier barrier = new CyclicBarrier(4);
            List<CompletableFuture<Integer>> runs = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                runs.add(CompletableFuture.supplyAsync(
                        () -> {
                            try {
                                barrier.await(30, TimeUnit.SECONDS);
                            } catch (Exception e) {
                                throw new IllegalStateException(e);
                            }
                            return Schema.migrate(db.dataSource(), "billing_");
                        },
                        OwnThreads.each()));
            }
            int applied = 0;
            for (CompletableFuture<Integer> run : runs) {
                applied += run.get(60, TimeUnit.SECONDS);
            }
            assertThat(applied)
                    .as("each migration applied by exactly one of four racing instances")
                    .isEqualTo(Schema.migrations(dev.once.jdbc.Dialects.POSTGRESQL, "billing_")
                            .size());
            assertThat(db.queryLong("SELECT count(*) FROM billing_inbox")).isZero();
            assertThat(db.queryLong("SELECT count(*) FROM billing_schema_version"))
                    .isEqualTo(applied);
        }
    }

    @Test
    void aConsumerOnAnotherPrefixUsesItsOwnTables() throws Exception {
        try (TestDatabase db = Ledger.on(TestPostgres.shared().freshDatabase(2))) {
            Schema.migrate(db.dataSource(), "billing_");
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("billing")
                    .tablePrefix("billing_")
                    .handler(Ledger.CREDIT)
                    .build();
            consumer.process(Ledger.payment("evt-1", 1));
            assertThat(db.queryLong("SELECT count(*) FROM billing_inbox")).isEqualTo(1);
            assertThat(db.queryLong("SELECT count(*) FROM once_inbox")).isZero();
        }
    }
}
