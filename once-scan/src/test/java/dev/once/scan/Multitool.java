package dev.once.scan;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Microsoft's SARIF multitool (npm {@code @microsoft/sarif-multitool}, which ships its binary):
 * {@code ONCE_SARIF_MULTITOOL}, else {@code sarif-multitool} on the PATH, else installed once with
 * npm into {@code target/sarif-multitool}. Empty when none of these works (no npm, offline).
 */
final class Multitool {

    private static final Path LOCAL = Path.of("target/sarif-multitool");
    private static final Path BIN = LOCAL.resolve("node_modules/.bin/sarif-multitool");

    private Multitool() {}

    static synchronized Optional<Path> find() throws InterruptedException {
        String explicit = System.getenv("ONCE_SARIF_MULTITOOL");
        if (explicit != null && Files.isExecutable(Path.of(explicit))) {
            return Optional.of(Path.of(explicit));
        }
        for (String dir : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
            Path p = Path.of(dir, "sarif-multitool");
            if (Files.isExecutable(p)) {
                return Optional.of(p);
            }
        }
        if (Files.isExecutable(BIN)) {
            return Optional.of(BIN.toAbsolutePath());
        }
        try {
            Files.createDirectories(LOCAL);
            Process p = new ProcessBuilder(
                            "npm", "install", "--no-audit", "--no-fund", "--silent", "@microsoft/sarif-multitool")
                    .directory(LOCAL.toFile())
                    .redirectErrorStream(true)
                    .redirectOutput(LOCAL.resolve("npm.log").toFile())
                    .start();
            if (!p.waitFor(300, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return Optional.empty();
            }
            return p.exitValue() == 0 && Files.isExecutable(BIN) ? Optional.of(BIN.toAbsolutePath()) : Optional.empty();
        } catch (IOException e) {
            return Optional.empty(); // no npm here
        }
    }
}
