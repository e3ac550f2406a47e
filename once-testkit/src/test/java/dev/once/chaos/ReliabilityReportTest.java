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
                "CHAOS name=hostile-event-id rounds=10 lost=0 applied_twice=0 db=mariadb",
                "CHAOS name=hostile-event-id rounds=10 lost=0 applied_twice=5 db=postgres break=no-validation"));

        List<String> rows =
                md.lines().filter(l -> l.contains("`HostileInputTest`")).toList();
        assertThat(rows).hasSize(2);
        assertThat(rows.get(0))
                .contains("(postgres)")
                .contains(
                        "name=hostile-event-id rounds=10 lost=0 applied_twice=0 db=postgres`<br>`name=hostile-consumer");
        assertThat(rows.get(1)).contains("(mariadb)").doesNotContain("<br>");
        assertThat(md).contains("| hostile-event-id | no-validation |");
    }
}
