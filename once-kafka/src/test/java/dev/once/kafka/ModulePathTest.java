package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
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
        String modulePath = modulePath();
        Path app = Path.of(ModulePathTest.class.getResource("/module-path-app").toURI());
        Path out = Files.createDirectories(dir.resolve("app"));
        List<String> sources;
        try (Stream<Path> files = Files.walk(app)) {
            sources = files.filter(p -> p.toString().endsWith(".java"))
                    .map(Path::toString)
                    .collect(Collectors.toList());
        }
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        ByteArrayOutputStream errors = new ByteArrayOutputStream();
        List<String> args = new ArrayList<>(List.of("--module-path", modulePath, "-d", out.toString()));
        args.addAll(sources);
        int compiled = javac.run(null, errors, errors, args.toArray(String[]::new));
        assertThat(compiled)
                .as("the application compiles against the modules: %s", errors)
                .isZero();

        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            String url = TestPostgres.shared().jdbcUrl();
            url += (url.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
            Process java = new ProcessBuilder(
                            Path.of(System.getProperty("java.home"), "bin", "java")
                                    .toString(),
                            "--module-path",
                            out + File.pathSeparator + modulePath,
                            "--module",
                            "app/app.Main",
                            url)
                    .redirectErrorStream(true)
                    .start();
            String output = new String(java.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(java.waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(java.exitValue()).as(output).isZero();
            assertThat(output)
                    .as(output)
                    .contains("first=applied")
                    .contains("second=duplicate")
                    .contains("effects=1")
                    .contains("modules=dev.once.core,dev.once.kafka")
                    .contains("internal exported=false");
        }
    }

    private static String modulePath() throws IOException, URISyntaxException {
        List<String> path = new ArrayList<>();
        path.add(Path.of(KafkaConsumerRunner.class
                        .getProtectionDomain()
                        .getCodeSource()
                        .getLocation()
                        .toURI())
                .toString());
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            String name = entry.contains("once-core")
                    ? "once-core"
                    : Path.of(entry).getFileName().toString();
            if (MODULES.stream().anyMatch(m -> name.equals(m) || name.startsWith(m + "-"))
                    && !entry.contains("test-classes")) {
                path.add(entry);
            }
        }
        assertThat(path).as("modules found on the test class path").hasSizeGreaterThanOrEqualTo(MODULES.size());
        return String.join(File.pathSeparator, path);
    }
}
