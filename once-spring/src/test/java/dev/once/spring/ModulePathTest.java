package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.ModulePathApp;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A Spring application on the module path: {@code module app { requires dev.once.spring; … }}
 * compiled and run with once-core, once-spring, Spring Framework and their libraries as modules, no
 * broker library present (they are {@code requires static}). The claim and a {@code JdbcTemplate}
 * write join one Spring transaction, and a context with {@code @EnableIdempotentListeners} starts.
 * Every other test runs on the class path.
 */
class ModulePathTest {

    // what the application's module graph needs, picked from this test's class path by file name
    private static final List<String> MODULES = List.of(
            "once-core",
            "spring-core",
            "spring-beans",
            "spring-context",
            "spring-aop",
            "spring-expression",
            "spring-jdbc",
            "spring-tx",
            "commons-logging",
            "jspecify",
            "slf4j-api",
            "micrometer-core",
            "micrometer-commons",
            "micrometer-observation",
            "HdrHistogram",
            "LatencyUtils",
            "postgresql");

    @Test
    void aSpringApplicationOnTheModulePathAppliesAnEventOnce(@TempDir Path dir) throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            String url = TestPostgres.shared().jdbcUrl();
            url += (url.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
            String output = ModulePathApp.run(OnceSpring.class, MODULES, "/module-path-app", dir, "app/app.Main", url);
            assertThat(output)
                    .as(output)
                    .contains("first=applied")
                    .contains("second=duplicate")
                    .contains("after rollback=applied")
                    .contains("effects=2")
                    .contains("post-processor=1")
                    .contains("modules=dev.once.core,dev.once.spring");
        }
    }
}
