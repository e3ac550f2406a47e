package dev.once.bench;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class ReportTest {

    private static final String OLD = "# Benchmarks\n\nold head\n\n## Machine and settings\n\n- old machine\n\n"
            + "## Core: naive vs hand-written floor vs once\n\ncore figures\n\n"
            + "## Relay to Kafka\n\n" + Report.marker("relay") + "\nold relay figures\n\n"
            + "## What bounds each figure (written by hand after this run)\n\nhand notes\n";

    @Test
    void aSubsetRunReplacesOnlyItsSuitesSectionsWhereTheyStood() {
        Map<String, String> ran = new LinkedHashMap<>();
        ran.put("relay", "## Relay to Kafka\n\n" + Report.marker("relay") + "\nnew relay figures\n\n");
        String md = Report.merge(OLD, "## Machine and settings\n\n- new machine\n\n", ran, Set.of("core", "relay"));
        assertThat(md)
                .contains("core figures", "new relay figures", "hand notes", "new machine")
                .doesNotContain("old relay figures", "old machine", "old head");
        assertThat(md.indexOf("core figures")).isLessThan(md.indexOf("new relay figures"));
        assertThat(md.indexOf("new relay figures")).isLessThan(md.indexOf("hand notes"));
    }

    @Test
    void aSuiteNewToTheReportGoesAfterTheLastSuiteSection() {
        Map<String, String> ran = Map.of("kafka", "## Kafka\n\n" + Report.marker("kafka") + "\nkafka figures\n\n");
        String md = Report.merge(OLD, "", ran, Set.of("core", "relay", "kafka"));
        assertThat(md).contains("old relay figures", "kafka figures");
        assertThat(md.indexOf("old relay figures")).isLessThan(md.indexOf("kafka figures"));
        assertThat(md.indexOf("kafka figures")).isLessThan(md.indexOf("hand notes"));
    }

    @Test
    void aRunOfEverySuiteWritesAFreshReport() {
        Map<String, String> ran = new LinkedHashMap<>();
        ran.put("core", "## Core\n\n" + Report.marker("core") + "\nnew core\n\n");
        ran.put("relay", "## Relay\n\n" + Report.marker("relay") + "\nnew relay\n\n");
        String md = Report.merge(OLD, "", ran, Set.of("core", "relay"));
        assertThat(md).contains("new core", "new relay").doesNotContain("hand notes", "core figures");
    }
}
