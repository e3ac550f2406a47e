package dev.once.testsupport;

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
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

/**
 * A user's application on the module path: its sources (a {@code module-info.java} and classes, in a
 * test resource folder) compiled with javac against a module and the libraries it needs, then run
 * in a new JVM with {@code --module}. Nothing else of the test's class path is on that module path,
 * so a missing {@code requires} or an unexported package fails here as it would for a user.
 */
public final class ModulePathApp {

    /** once-core, the libraries its module requires, and the PostgreSQL driver: every application's share. */
    public static final List<String> CORE_ON_POSTGRES = List.of(
            "once-core",
            "slf4j-api",
            "micrometer-core",
            "micrometer-commons",
            "micrometer-observation",
            "HdrHistogram",
            "LatencyUtils",
            "postgresql");

    private ModulePathApp() {}

    /**
     * {@link #run} of the application in resource folder {@code /module-path-app} ({@code app/app.Main}),
     * given the JDBC URL of a fresh PostgreSQL database as its one argument.
     */
    public static String runOnPostgres(Class<?> module, List<String> libraries, Path dir)
            throws IOException, InterruptedException, URISyntaxException {
        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            String url = TestPostgres.shared().jdbcUrl();
            url += (url.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
            return run(module, libraries, "/module-path-app", dir, "app/app.Main", url);
        }
    }

    /**
     * Compiles the application in resource folder {@code sources} into {@code dir} and runs
     * {@code mainClass} ({@code module/class}) with {@code args}; returns what it printed.
     *
     * @param module a class of the module under test (its classes folder or jar goes on the module path)
     * @param libraries the jars the application's module graph needs, by file name without the version
     *     ({@code "once-core"} also matches its classes folder)
     * @throws IllegalStateException if it does not compile, does not end in a minute or exits non-zero,
     *     with javac's or the application's output
     */
    private static String run(
            Class<?> module, List<String> libraries, String sources, Path dir, String mainClass, String... args)
            throws IOException, InterruptedException, URISyntaxException {
        String modulePath = modulePath(module, libraries);
        Path app = Path.of(module.getResource(sources).toURI());
        Path out = Files.createDirectories(dir.resolve("app"));
        List<String> javacArgs = new ArrayList<>(List.of("--module-path", modulePath, "-d", out.toString()));
        try (Stream<Path> files = Files.walk(app)) {
            files.filter(p -> p.toString().endsWith(".java"))
                    .map(Path::toString)
                    .forEach(javacArgs::add);
        }
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        ByteArrayOutputStream errors = new ByteArrayOutputStream();
        if (javac.run(null, errors, errors, javacArgs.toArray(String[]::new)) != 0) {
            throw new IllegalStateException("the application does not compile against the modules: " + errors);
        }
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--module-path",
                out + File.pathSeparator + modulePath,
                "--module",
                mainClass));
        command.addAll(List.of(args));
        Process java = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(java.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!java.waitFor(60, TimeUnit.SECONDS) || java.exitValue() != 0) {
            java.destroyForcibly();
            throw new IllegalStateException("the application failed on the module path: " + output);
        }
        return output;
    }

    private static String modulePath(Class<?> module, List<String> libraries) throws URISyntaxException {
        List<String> path = new ArrayList<>();
        path.add(Path.of(module.getProtectionDomain()
                        .getCodeSource()
                        .getLocation()
                        .toURI())
                .toString());
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            String name = entry.contains("once-core")
                    ? "once-core"
                    : Path.of(entry).getFileName().toString();
            if (libraries.stream().anyMatch(m -> name.equals(m) || name.startsWith(m + "-"))
                    && !entry.contains("test-classes")) {
                path.add(entry);
            }
        }
        if (path.size() < libraries.size() + 1) {
            throw new IllegalStateException(
                    "not every library is on the test class path: " + libraries + " in " + path);
        }
        return String.join(File.pathSeparator, path);
    }
}
