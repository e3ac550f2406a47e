package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.ModulePathApp;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A user's application on the module path: {@code module app { requires dev.once.kafka; requires
 * org.postgresql.jdbc; }} compiled and run with once-core, once-kafka and their libraries as modules
 * (the module descriptors resolve, the migrations load from inside {@code dev.once.core}, the engine
 * runs, and {@code dev.once.internal} stays closed). Every other test runs on the class path.
 */
class ModulePathTest {

    // what the application's module graph needs, picked from this test's class path by file name
    private static final List<String> MODULES = List.of(
            "once-core",
            "kafka-clients",
            "slf4j-api",
            "micrometer-core",
            "micrometer-commons",
            "micrometer-observation",
            "HdrHistogram",
            "LatencyUtils",
            "postgresql");

    @Test
    void anApplicationOnTheModulePathAppliesAnEventOnce(@TempDir Path dir) throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            String url = TestPostgres.shared().jdbcUrl();
            url += (url.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
            String output =
                    ModulePathApp.run(KafkaConsumerRunner.class, MODULES, "/module-path-app", dir, "app/app.Main", url);
            assertThat(output)
                    .as(output)
                    .contains("first=applied")
                    .contains("second=duplicate")
                    .contains("effects=1")
                    .contains("modules=dev.once.core,dev.once.kafka")
                    .contains("internal exported=false");
        }
    }
}
