package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.retention.InboxPruner;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * R12: pruning a large inbox (200,000 rows here, a million in the report) while old events are
 * redelivered, half of them claimed just inside the redelivery horizon (seconds after the prune's
 * cutoff: they must stay and absorb their copies) and half just outside it (seconds before: they
 * may be pruned, and a copy then applies again — which is why the horizon is a contract). Each
 * raced event is redelivered once while the prune runs and once after it.
 */
@Tag("chaos")
class PruningRacesRedeliveriesTest {

    private static final String CONSUMER = "prune-race";
    private static final Duration RETENTION = InboxPruner.DEFAULT_REDELIVERY_HORIZON;

    @Test
    void pruningWhileOldEventsAreRedeliveredAppliesNothingTwiceInsideTheHorizon() throws Exception {
        Chaos.Figure f = race(Chaos.scaled(200_000), RETENTION, InboxPruner.DEFAULT_REDELIVERY_HORIZON, null);
        assertThat(f.get("applied_twice"))
                .as("events claimed inside the horizon applied again")
                .isZero();
        assertThat(f.get("pruned")).as("rows outside the horizon pruned").isPositive();
        assertThat(f.get("inside_rows_left")).as("rows inside the horizon kept").isEqualTo(f.get("inside_rows"));
    }

    @Test
    void aRetentionShorterThanTheHorizonIsRefused() {
        assertThatThrownBy(() -> InboxPruner.builder()
                        .dataSource(new org.postgresql.ds.PGSimpleDataSource())
                        .retention(RETENTION.minusHours(1))
                        .build())
                .isInstanceOf(InvalidConfigurationException.class)
                .hasMessageContaining("shorter than the redelivery horizon");
    }

    /** The test can fail: a pruner told the horizon is zero, with a retention an hour short, prunes what it must keep. */
    @Test
    void theSameRaceCatchesARetentionShorterThanTheHorizon() throws Exception {
        Chaos.Figure f = race(20_000, RETENTION.minusHours(1), Duration.ZERO, "retention-below-horizon");
        assertThat(f.get("applied_twice"))
                .as("copies of events pruned inside the real horizon")
                .isPositive();
    }

    private static Chaos.Figure race(int rows, Duration retention, Duration horizon, String broken) throws Exception {
        Instant now = Instant.now();
        Instant cutoff = now.minus(RETENTION);
        int sample = Math.min(2_000, rows / 10);
        try (TestDatabase db = Databases.POSTGRES.fresh(8)) {
            Effects.create(db);
            // Bulk rows: half well outside the horizon (pruned), half well inside (kept).
            db.execute(
                    "INSERT INTO once_inbox (consumer, event_id, processed_at) SELECT '" + CONSUMER + "', 'old-' || g,"
                            + " timestamp with time zone '" + cutoff
                            + "' - g * interval '1 second' - interval '1 minute'"
                            + " FROM generate_series(1, " + (rows / 2 - sample) + ") g",
                    "INSERT INTO once_inbox (consumer, event_id, processed_at) SELECT '" + CONSUMER + "', 'new-' || g,"
                            + " timestamp with time zone '" + cutoff
                            + "' + g * interval '1 second' + interval '1 minute'"
                            + " FROM generate_series(1, " + (rows / 2 - sample) + ") g");
            // The raced events: claimed (and applied once) 1 to 50 seconds either side of the cutoff.
            List<Delivery> copies = new ArrayList<>();
            try (Connection c = db.dataSource().getConnection();
                    PreparedStatement claim = c.prepareStatement(
                            "INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES (?, ?, ?)");
                    PreparedStatement effect = c.prepareStatement(
                            "INSERT INTO " + Effects.TABLE + " (event_id, applied_at) VALUES (?, 0)")) {
                for (int i = 0; i < sample; i++) {
                    for (String side : List.of("inside", "outside")) {
                        String id = side + "-" + i;
                        long seconds = 1 + i % 50;
                        claim.setString(1, CONSUMER);
                        claim.setString(2, id);
                        claim.setTimestamp(
                                3,
                                Timestamp.from(
                                        side.equals("inside")
                                                ? cutoff.plusSeconds(seconds)
                                                : cutoff.minusSeconds(seconds)));
                        claim.addBatch();
                        effect.setString(1, id);
                        effect.addBatch();
                        copies.add(Delivery.of(id, "copy").redelivery());
                    }
                }
                claim.executeBatch();
                effect.executeBatch();
            }
            Collections.shuffle(copies, new Random(12));
            IdempotentConsumer once = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer(CONSUMER)
                    .handler(Effects.HANDLER)
                    .build();
            InboxPruner pruner = InboxPruner.builder()
                    .dataSource(db.dataSource())
                    .retention(retention)
                    .redeliveryHorizon(horizon)
                    .clock(Clock.fixed(now, ZoneOffset.UTC))
                    .chunkSize(5_000)
                    .build();
            long start = System.nanoTime();
            CompletableFuture<Long> pruned = CompletableFuture.supplyAsync(pruner::prune, OwnThreads.each());
            List<CompletableFuture<Long>> workers = new ArrayList<>();
            int threads = 4;
            for (int w = 0; w < threads; w++) {
                List<Delivery> mine = copies.subList(w * copies.size() / threads, (w + 1) * copies.size() / threads);
                workers.add(CompletableFuture.supplyAsync(
                        () -> mine.stream()
                                .map(once::process)
                                .filter(o -> !o.shouldAcknowledge())
                                .count(),
                        OwnThreads.each()));
            }
            long pruneRows = pruned.get(3, TimeUnit.MINUTES);
            double pruneSeconds = (System.nanoTime() - start) / 1e9;
            long notAcked = 0;
            for (CompletableFuture<Long> w : workers) {
                notAcked += w.get(3, TimeUnit.MINUTES);
            }
            // Every copy once more after the prune: inside rows still absorb them, outside ones are gone.
            for (Delivery d : copies) {
                notAcked += once.process(d.redelivery()).shouldAcknowledge() ? 0 : 1;
            }
            Map<String, Long> counts = Effects.counts(db);
            long insideTwice = counts.entrySet().stream()
                    .filter(e -> e.getKey().startsWith("inside-") && e.getValue() > 1)
                    .count();
            long outsideAgain = counts.entrySet().stream()
                    .filter(e -> e.getKey().startsWith("outside-") && e.getValue() > 1)
                    .count();
            long insideRows = rows / 2 - sample + sample;
            long insideLeft = db.queryLong(
                    "SELECT count(*) FROM once_inbox WHERE event_id LIKE 'new-%'" + " OR event_id LIKE 'inside-%'");
            return Chaos.figure("prune-race")
                    .rounds(2L * copies.size())
                    .lost(notAcked)
                    .appliedTwice(insideTwice)
                    .put("db", "postgres")
                    .put("inbox_rows", rows)
                    .put("pruned", pruneRows)
                    .put("inside_rows", insideRows)
                    .put("inside_rows_left", insideLeft)
                    .put("reapplied_outside_horizon", outsideAgain)
                    .put("retention", retention)
                    .put("horizon", horizon)
                    .put("prune_s", pruneSeconds)
                    .broken(broken)
                    .print();
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
    }
}
