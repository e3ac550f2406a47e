package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/** RELIABILITY.md lists each test once per database, however many figures the test records there. */
class ReliabilityReportTest {

    @Test
    void aTestWithSeveralFiguresOnOneDatabaseIsOneRowPerDatabase() throws Exception {
        String md = ReliabilityReport.render(List.of(
                "CHAOS name=hostile-event-id rounds=10 lost=0 applied_twice=0 db=postgres",
                "CHAOS name=hostile-consumer rounds=10 lost=0 applied_twice=0 db=postgres",
                "CHAOS name=hostile-event-id rounds=10 lost=0 applied_twice=0 db=postgres",
                "CHAOS name=hostile-event-id rounds=10 lost=0 applied_twice=0 db=mariadb",
                "CHAOS name=hostile-event-id rounds=10 lost=0 applied_twice=5 db=postgres break=no-validation"));

        List<String> rows =
                md.lines().filter(l -> l.contains("`HostileInputTest`")).toList();
        assertThat(rows).hasSize(2);
        assertThat(rows.get(0))
                .contains("(postgres)")
                .contains(
                        "name=hostile-event-id rounds=10 lost=0 applied_twice=0 db=postgres`<br>`name=hostile-consumer");
        assertThat(rows.get(0)).containsOnlyOnce("name=hostile-event-id");
        assertThat(rows.get(1)).contains("(mariadb)").doesNotContain("<br>");
        assertThat(md).contains("| hostile-event-id | no-validation |");
    }

    @Test
    void sectionsKeptByHandSurviveARegeneration() throws Exception {
        String old = ReliabilityReport.render(List.of("CHAOS name=failover rounds=1 lost=0 applied_twice=0"))
                + "\n## Broker failure features\n\nBy hand.\n\n| a | b |\n\n## Another\n\nAlso.\n";

        String kept = ReliabilityReport.keptSections(old);

        assertThat(kept)
                .startsWith("\n## Broker failure features")
                .contains("By hand.", "## Another", "Also.")
                .doesNotContain("## Guarantees", "## Holes found", "name=failover");
    }
}
