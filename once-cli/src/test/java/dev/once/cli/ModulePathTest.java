package dev.once.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.io.File;
import java.lang.module.FindException;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ModuleReference;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The command as a module: {@code java --module dev.once.cli/dev.once.cli.Main} in a new JVM, with
 * {@code dev.once.cli} and every module its descriptor requires (transitively, but
 * {@code requires static}) on the module path, each found by its module name among the test's jars,
 * and the jars no module requires on the class path, as a build tool places them. A {@code requires}
 * that names no module fails here, and so does a package picocli or a resource lookup cannot reach:
 * the command parses its options reflectively ({@code opens dev.once.cli to info.picocli}) and reads
 * once-core's migrations from another module. Every other test runs the command on the class path,
 * where a descriptor is not read at all.
 */
class ModulePathTest {

    @Test
    void theCommandRunsAsANamedModule() throws Exception {
        assertThat(once("schema", "print", "--dialect", "postgres", "--prefix", "acme_"))
                .as("the migrations of once-core, read from its module, with the options picocli set")
                .contains("CREATE TABLE acme_inbox")
                .contains("CREATE TABLE acme_outbox");
        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            String base = TestPostgres.shared().jdbcUrl();
            String url = base + (base.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
            assertThat(once("schema", "migrate", "--dialect", "postgres", "--url", url, "--prefix", "m_"))
                    .as("the driver found by its URL, the pool, the migrations applied")
                    .contains("now at version");
            assertThat(db.queryLong("SELECT count(*) FROM m_inbox")).isZero();
            assertThat(once("doctor", "--url", url, "--prefix", "m_", "--retention", "7d"))
                    .as("a duration option, converted by a class of dev.once.cli.internal")
                    .isNotBlank();
        }
    }

    /** Runs {@code once args} as a module in a new JVM; returns what it printed, once it exited 0. */
    private static String once(String... args) throws Exception {
        Map<String, String> byName = modulesOnTheClassPath();
        Set<String> modulePath = requiredFrom("dev.once.cli", byName);
        List<String> classPath = new ArrayList<>();
        for (String entry : classPathEntries()) {
            if (!modulePath.contains(entry)) {
                classPath.add(entry);
            }
        }
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--module-path",
                String.join(File.pathSeparator, modulePath),
                "-cp",
                String.join(File.pathSeparator, classPath),
                "--module",
                "dev.once.cli/dev.once.cli.Main"));
        command.addAll(List.of(args));
        Process java = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(java.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(java.waitFor(60, TimeUnit.SECONDS))
                .as("ended within a minute: " + output)
                .isTrue();
        assertThat(java.exitValue()).as(String.join(" ", args) + ": " + output).isZero();
        return output;
    }

    /** The test's jars and classes folders that are modules, by module name (the first of a name wins, as in a JVM). */
    private static Map<String, String> modulesOnTheClassPath() {
        Map<String, String> byName = new LinkedHashMap<>();
        for (String entry : classPathEntries()) {
            try {
                for (ModuleReference m : ModuleFinder.of(Path.of(entry)).findAll()) {
                    byName.putIfAbsent(m.descriptor().name(), entry);
                }
            } catch (FindException e) {
                // not a module (a jar whose name makes no module name, such as kafka_2.13): class path only
            }
        }
        return byName;
    }

    /** {@code root}'s entry and those of every module it requires, transitively, but {@code requires static}. */
    private static Set<String> requiredFrom(String root, Map<String, String> byName) {
        ModuleFinder system = ModuleFinder.ofSystem();
        Set<String> entries = new LinkedHashSet<>();
        Set<String> seen = new LinkedHashSet<>();
        Deque<String> todo = new ArrayDeque<>(List.of(root));
        while (!todo.isEmpty()) {
            String name = todo.pop();
            if (!seen.add(name) || system.find(name).isPresent()) {
                continue;
            }
            String entry = byName.get(name);
            assertThat(entry)
                    .as("module " + name + ", required by the command's module graph")
                    .isNotNull();
            entries.add(entry);
            ModuleDescriptor d =
                    ModuleFinder.of(Path.of(entry)).find(name).orElseThrow().descriptor();
            for (ModuleDescriptor.Requires r : d.requires()) {
                if (!r.modifiers().contains(ModuleDescriptor.Requires.Modifier.STATIC)) {
                    todo.push(r.name());
                }
            }
        }
        return entries;
    }

    /** The test's class path without its own test classes. */
    private static List<String> classPathEntries() {
        List<String> entries = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (!entry.isEmpty() && !entry.contains("test-classes")) {
                entries.add(entry);
            }
        }
        return entries;
    }
}
