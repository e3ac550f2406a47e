package dev.once.bench;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.TestPostgres;
import org.junit.jupiter.api.Test;

/**
 * The retention measurement at CI size (200,000 old claims; the harness runs 1,000,000): every old
 * row is pruned, every claim made meanwhile survives (the suite checks both and throws otherwise),
 * and the figures it reports are real measurements.
 */
class RetentionSuiteTest {

    @Test
    void pruningDeletesEveryOldClaimWhileTheBatchedPathKeepsIngesting() throws Exception {
        try (BenchPostgres postgres = BenchPostgres.start(TestPostgres.shared().jdbcUrl());
                BenchPostgres.Db db = postgres.freshDatabase(RetentionSuite.WORKERS + 1)) {
            RetentionSuite.Result r = new RetentionSuite(200_000).measure(db);

            assertThat(r.pruned()).isEqualTo(200_000);
            assertThat(r.bytesPerEvent()).as("inbox bytes per event").isBetween(60.0, 400.0);
            assertThat(r.ingestAlone()).isPositive();
            assertThat(r.ingestDuringPrune())
                    .as("claims keep running while pruning")
                    .isPositive();
            assertThat(r.pruneRowsPerSecond()).isPositive();
            assertThat(r.p99DuringPruneMillis()).isPositive();
        }
    }

    @Test
    void droppingAPartitionKeepsEveryClaimMadeMeanwhile() throws Exception {
        try (BenchPostgres postgres = BenchPostgres.start(TestPostgres.shared().jdbcUrl());
                BenchPostgres.Db db = postgres.freshDatabase(RetentionSuite.WORKERS + 1)) {
            RetentionSuite.Dropped d = new RetentionSuite(50_000).measurePartitioned(db, 50_000);

            assertThat(d.dropSeconds()).isPositive();
            assertThat(d.ingestAlone()).isPositive();
            assertThat(d.p99DuringMillis()).isPositive();
        }
    }
}
