package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.ModulePathApp;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
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

    // the application's module graph: once-core's share and this module's libraries, picked from the class path
    private static final List<String> MODULES = Stream.concat(
                    ModulePathApp.CORE_ON_POSTGRES.stream(),
                    Stream.of(
                            "spring-core",
                            "spring-beans",
                            "spring-context",
                            "spring-aop",
                            "spring-expression",
                            "spring-jdbc",
                            "spring-tx",
                            "commons-logging",
                            "jspecify"))
            .toList();

    @Test
    void aSpringApplicationOnTheModulePathAppliesAnEventOnce(@TempDir Path dir) throws Exception {
        String output = ModulePathApp.runOnPostgres(OnceSpring.class, MODULES, dir);
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
