package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.ModulePathApp;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A user's application on the module path: {@code module app { requires dev.once.kafka; requires
 * org.postgresql.jdbc; }} compiled and run with once-core, once-kafka and their libraries as modules
 * (the module descriptors resolve, the migrations load from inside {@code dev.once.core}, the engine
 * runs, and {@code dev.once.internal} stays closed). Every other test runs on the class path.
 */
class ModulePathTest {

    // the application's module graph: once-core's share and this module's libraries, picked from the class path
    private static final List<String> MODULES = Stream.concat(
                    ModulePathApp.CORE_ON_POSTGRES.stream(), Stream.of("kafka-clients"))
            .toList();

    @Test
    void anApplicationOnTheModulePathAppliesAnEventOnce(@TempDir Path dir) throws Exception {
        String output = ModulePathApp.runOnPostgres(KafkaConsumerRunner.class, MODULES, dir);
        assertThat(output)
                .as(output)
                .contains("first=applied")
                .contains("second=duplicate")
                .contains("effects=1")
                .contains("modules=dev.once.core,dev.once.kafka")
                .contains("internal exported=false");
    }
}
