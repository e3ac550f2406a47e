package dev.once.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestPostgres;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The spring suite at a tiny size: every row runs its real Boot listener against Kafka and PostgreSQL
 * to the end, and its end state is what the row promises (the suite throws otherwise).
 */
class SpringSuiteTest {

    @Test
    void everyRowAppliesEachDistinctEventOnceAndNoDedupeAppliesEveryCopy() throws Exception {
        try (BenchPostgres postgres = BenchPostgres.start(TestPostgres.shared().jdbcUrl());
                BenchPostgres.Db db = postgres.freshDatabase(2);
                TestKafka kafka = TestKafka.start()) {
            List<SpringSuite.Row> rows = new SpringSuite(400, 1_000).measure(kafka, db.dataSource(), SpringSuite.ROWS);

            assertThat(rows).extracting(SpringSuite.Row::name).containsExactlyElementsOf(SpringSuite.ROWS);
            for (SpringSuite.Row r : rows) {
                boolean noDedupe = r.name().equals(SpringApp.NO_DEDUPE);
                assertThat(r.deliveries()).as(r.name()).isEqualTo(r.events() + r.events() / SpringSuite.COPY_EVERY);
                assertThat(r.credited()).as(r.name() + ": credits").isEqualTo(noDedupe ? r.deliveries() : r.events());
                assertThat(r.marks()).as(r.name() + ": claims or marks").isEqualTo(noDedupe ? 0 : r.events());
                assertThat(r.eventsPerSecond()).as(r.name()).isPositive();
            }
        }
    }

    @Test
    void theRowsPropertySelectsRowsInTheSuitesOrderAndNamesAnUnknownOne() {
        try {
            System.clearProperty("once.bench.spring.rows");
            assertThat(SpringSuite.selectedRows()).isEqualTo(SpringSuite.ROWS);
            System.setProperty("once.bench.spring.rows", "processed-events, once-record");
            assertThat(SpringSuite.selectedRows()).containsExactly(SpringApp.ONCE_RECORD, SpringApp.PROCESSED_EVENTS);
            System.setProperty("once.bench.spring.rows", "once-record,once-recrod");
            assertThatThrownBy(SpringSuite::selectedRows)
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("'once-recrod'")
                    .hasMessageContaining("once-record-at-commit");
        } finally {
            System.clearProperty("once.bench.spring.rows");
        }
    }
}
