package dev.once.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.ModulePathApp;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A Spring Boot application on the module path, on the running starter's Boot line: once-core,
 * once-spring, the auto-configuration, the starter, Spring and Boot as modules, nothing else of the
 * test class path. The starter's auto-configurations (found through its imports file) check the Boot
 * line and register the health indicator from its own module; the shared auto-configuration migrates
 * the schema and applies an event once. Every other test runs on the class path.
 */
class ModulePathTest {

    private static final boolean BOOT3 = Boot.ONCE_HEALTH.getName().contains(".boot3.");

    // the application's module graph: once-core's share, once's Spring modules, Spring and this line's Boot
    private static final List<String> MODULES = Stream.of(
                    ModulePathApp.CORE_ON_POSTGRES.stream(),
                    Stream.of(
                            "once-spring",
                            "once-spring-boot-autoconfigure",
                            "spring-core",
                            "spring-beans",
                            "spring-context",
                            "spring-aop",
                            "spring-expression",
                            "spring-jdbc",
                            "spring-tx",
                            "spring-boot",
                            "spring-boot-autoconfigure"),
                    BOOT3
                            ? Stream.of("spring-jcl", "spring-boot-actuator")
                            : Stream.of("commons-logging", "jspecify", "spring-boot-health"))
            .flatMap(s -> s)
            .toList();

    @Test
    void aBootApplicationOnTheModulePathAppliesAnEventOnce(@TempDir Path dir) throws Exception {
        String starter = BOOT3 ? "dev.once.spring.boot3.starter" : "dev.once.spring.boot.starter";
        // what the application needs but cannot require: the starter (Boot finds it by its imports file),
        // and on Boot 4 commons-logging and JSpecify, explicit modules that Spring's automatic modules cannot require
        List<String> roots = BOOT3 ? List.of(starter) : List.of(starter, "org.apache.commons.logging", "org.jspecify");
        String output = ModulePathApp.runOnPostgres(Boot.ONCE_HEALTH, "/module-path-boot-app", MODULES, roots, dir);
        assertThat(output)
                .as(output)
                .contains("first=applied")
                .contains("second=duplicate")
                .contains("effects=1")
                .contains("health=UP")
                .contains("modules=dev.once.spring,true," + starter);
    }
}
