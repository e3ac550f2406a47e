package dev.once.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Receipt;
import dev.once.retention.InboxPruner;
import dev.once.retention.OutboxPruner;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.springframework.boot.configurationprocessor.json.JSONArray;
import org.springframework.boot.configurationprocessor.json.JSONObject;

/**
 * The Grafana dashboard in docs/grafana queries the meters once registers, by the names Prometheus gives
 * them, and shows every one of them: the meters come from a real consumer, relay and pruners on
 * PostgreSQL, so a renamed meter fails here, not on an operator's empty panel.
 */
class GrafanaDashboardTest {

    static final Path DASHBOARD = Path.of("..", "docs", "grafana", "once-dashboard.json");

    @Test
    void everyQueryNamesAMeterOnceRegistersAndEveryMeterIsShown() throws Exception {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (TestDatabase db = TestPostgres.shared().freshDatabase(2)) {
            IdempotentConsumer consumer = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("billing")
                    .handler((d, tx) -> {})
                    .meterRegistry(registry)
                    .build();
            consumer.process(Delivery.builder("e-1").build());
            OutboxRelay.builder()
                    .dataSource(db.dataSource())
                    .publisher(m -> Receipt.NONE)
                    .meterRegistry(registry)
                    .build()
                    .close();
            InboxPruner.builder()
                    .dataSource(db.dataSource())
                    .retention(Duration.ofDays(7))
                    .meterRegistry(registry)
                    .build();
            OutboxPruner.builder()
                    .dataSource(db.dataSource())
                    .meterRegistry(registry)
                    .build();
        }
        Set<String> prometheus = new TreeSet<>();
        Set<String> meters = new TreeSet<>();
        for (Meter m : registry.getMeters()) {
            String base = m.getId().getName().replace('.', '_');
            meters.add(m.getId().getName());
            if (m instanceof Counter) {
                prometheus.add(base + "_total");
            } else if (m instanceof Timer) {
                for (String suffix : new String[] {"_count", "_sum", "_max"}) {
                    prometheus.add(base + "_seconds" + suffix);
                }
            } else if (m instanceof Gauge) {
                String unit = m.getId().getBaseUnit();
                prometheus.add(unit == null ? base : base + "_" + unit);
            }
        }

        JSONArray panels = new JSONObject(Files.readString(DASHBOARD)).getJSONArray("panels");
        Set<String> queried = new TreeSet<>();
        Pattern name = Pattern.compile("\\bonce_[a-z_]+");
        for (int i = 0; i < panels.length(); i++) {
            JSONArray targets = panels.getJSONObject(i).getJSONArray("targets");
            for (int t = 0; t < targets.length(); t++) {
                Matcher m = name.matcher(targets.getJSONObject(t).getString("expr"));
                while (m.find()) {
                    queried.add(m.group());
                }
            }
        }
        assertThat(prometheus)
                .as("%s queries only meters once registers (Prometheus names)", DASHBOARD)
                .containsAll(queried);
        for (String meter : meters) {
            String base = meter.replace('.', '_');
            assertThat(queried)
                    .as("%s shows meter %s", DASHBOARD, meter)
                    .anyMatch(q -> q.equals(base) || q.startsWith(base + "_"));
        }
    }
}
