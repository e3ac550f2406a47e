package dev.once.testsupport;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
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
        return runOnPostgres(module, "/module-path-app", libraries, List.of(), dir);
    }

    /**
     * {@link #runOnPostgres(Class, List, Path)} of the application in resource folder {@code sources}, with
     * {@code roots} added to the module graph ({@code --add-modules}): the modules the application needs but
     * cannot require, as a Spring Boot starter that Boot finds through its imports file.
     */
    public static String runOnPostgres(
            Class<?> module, String sources, List<String> libraries, List<String> roots, Path dir)
            throws IOException, InterruptedException, URISyntaxException {
        try (TestDatabase db = TestPostgres.shared().freshDatabase()) {
            String url = TestPostgres.shared().jdbcUrl();
            url += (url.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
            return run(module, libraries, roots, sources, false, dir, "app/app.Main", url);
        }
    }

    /**
     * Compiles the application in resource folder {@code sources} and runs {@code app/app.Main} with
     * {@code module} and {@code libraries} on the module path and the rest of the test's class path on
     * the class path, as a build tool runs an application whose module requires only some of its jars:
     * there go the jars no module requires, such as the test kit's Kafka broker, which cannot be a
     * module and runs in a JVM of its own from there.
     */
    public static String runBesideClassPath(Class<?> module, String sources, List<String> libraries, Path dir)
            throws IOException, InterruptedException, URISyntaxException {
        return run(module, libraries, List.of(), sources, true, dir, "app/app.Main");
    }

    /**
     * Compiles the application in resource folder {@code sources} into {@code dir} and runs
     * {@code mainClass} ({@code module/class}) with {@code args}; returns what it printed.
     *
     * @param module a class of the module under test (its classes folder or jar goes on the module path)
     * @param libraries the jars the application's module graph needs, by artifact (file name without the
     *     version; a reactor module's {@code target/classes} folder by the module's folder name)
     * @throws IllegalStateException if it does not compile, does not end in a minute or exits non-zero,
     *     with javac's or the application's output
     */
    private static String run(
            Class<?> module,
            List<String> libraries,
            List<String> roots,
            String sources,
            boolean restOnClassPath,
            Path dir,
            String mainClass,
            String... args)
            throws IOException, InterruptedException, URISyntaxException {
        String modulePath = modulePath(module, libraries);
        URL found = module.getResource(sources);
        if (found == null) {
            throw new IllegalStateException("no application sources at resource " + sources);
        }
        Path app = copy(found.toURI(), Files.createDirectories(dir.resolve("src")));
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
                out + File.pathSeparator + modulePath));
        if (!roots.isEmpty()) {
            command.addAll(List.of("--add-modules", String.join(",", roots)));
        }
        if (restOnClassPath) {
            command.addAll(List.of("-cp", rest(modulePath)));
        }
        command.addAll(List.of("--module", mainClass));
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
            Path file = Path.of(entry);
            // a reactor module's classes folder (target/classes) is named by the module's folder
            String name = file.endsWith(Path.of("target", "classes"))
                    ? file.getParent().getParent().getFileName().toString()
                    : file.getFileName().toString();
            if (libraries.stream().anyMatch(m -> isArtifact(name, m))
                    && !entry.contains("test-classes")
                    && !entry.endsWith("-tests.jar")) {
                path.add(entry);
            }
        }
        if (path.size() < libraries.size() + 1) {
            throw new IllegalStateException(
                    "not every library is on the test class path: " + libraries + " in " + path);
        }
        return String.join(File.pathSeparator, path);
    }

    /** The test's class path but what is on {@code modulePath}, without the tests' own classes. */
    private static String rest(String modulePath) {
        List<String> modules = List.of(modulePath.split(File.pathSeparator));
        return Stream.of(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(entry ->
                        !modules.contains(entry) && !entry.contains("test-classes") && !entry.endsWith("-tests.jar"))
                .collect(Collectors.joining(File.pathSeparator));
    }

    /** {@code artifact}'s jar ({@code artifact-1.2.jar}, not {@code artifact-extra-1.2.jar}) or classes folder. */
    private static boolean isArtifact(String name, String artifact) {
        return name.equals(artifact)
                || (name.startsWith(artifact + "-")
                        && name.length() > artifact.length() + 1
                        && Character.isDigit(name.charAt(artifact.length() + 1)));
    }

    /** The application's sources, from a folder or from inside a jar (a shared test suite's), into {@code dir}. */
    private static Path copy(URI sources, Path dir) throws IOException {
        if (!sources.getScheme().equals("jar")) {
            return copyTree(Path.of(sources), dir);
        }
        try (FileSystem jar = FileSystems.newFileSystem(sources, Map.of())) {
            return copyTree(jar.provider().getPath(sources), dir);
        }
    }

    private static Path copyTree(Path from, Path dir) throws IOException {
        try (Stream<Path> files = Files.walk(from)) {
            for (Path file : files.filter(Files::isRegularFile).toList()) {
                Path to = dir.resolve(from.relativize(file).toString());
                Files.createDirectories(to.getParent());
                Files.copy(file, to);
            }
        }
        return dir;
    }
}
