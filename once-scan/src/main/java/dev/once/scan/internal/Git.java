package dev.once.scan.internal;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The git binary, for pull-request mode: what changed since a ref, and the tree at that ref. */
public final class Git {

    private static final Pattern HUNK = Pattern.compile("^@@ -\\d+(?:,\\d+)? \\+(\\d+)(?:,(\\d+))? @@");

    private final Path dir;

    public Git(Path dir) {
        this.dir = dir;
    }

    /** Lines changed since {@code ref} in the working tree, per path relative to {@code scanRoot}; a new file maps to every line. */
    public Map<String, TreeSet<Integer>> changedLines(String ref, Path scanRoot) {
        Path top = Path.of(run("rev-parse", "--show-toplevel").strip());
        Map<String, TreeSet<Integer>> out = new HashMap<>();
        String file = null;
        for (String line : run("diff", "--unified=0", "--no-color", "--no-ext-diff", ref, "--")
                .split("\n")) {
            if (line.startsWith("+++ ")) {
                file = line.equals("+++ /dev/null") ? null : rel(top, scanRoot, line.substring(line.indexOf('/') + 1));
            } else if (file != null && line.startsWith("@@")) {
                Matcher m = HUNK.matcher(line);
                if (m.find()) {
                    int start = Integer.parseInt(m.group(1));
                    int count = m.group(2) == null ? 1 : Integer.parseInt(m.group(2));
                    TreeSet<Integer> lines = out.computeIfAbsent(file, k -> new TreeSet<>());
                    if (count == 0) {
                        lines.add(start); // a deletion: the lines around it changed
                        lines.add(start + 1);
                    }
                    for (int i = 0; i < count; i++) {
                        lines.add(start + i);
                    }
                }
            }
        }
        for (String untracked :
                run("ls-files", "--others", "--exclude-standard", "--full-name").split("\n")) {
            if (!untracked.isBlank()) {
                TreeSet<Integer> all = new TreeSet<>();
                all.add(-1); // every line
                out.put(rel(top, scanRoot, untracked.strip()), all);
            }
        }
        return out;
    }

    private static String rel(Path top, Path scanRoot, String fromTop) {
        return scanRoot.toAbsolutePath()
                .normalize()
                .relativize(top.resolve(fromTop).normalize())
                .toString()
                .replace('\\', '/');
    }

    /** Extracts the tree of {@code ref} into {@code target} and returns where {@code scanRoot} is in it. */
    public Path checkout(String ref, Path scanRoot, Path target) {
        Path top = Path.of(run("rev-parse", "--show-toplevel").strip())
                .toAbsolutePath()
                .normalize();
        Path tar = target.resolve("base.tar");
        run("archive", "--format=tar", "-o", tar.toString(), ref);
        exec(List.of("tar", "-xf", tar.toString(), "-C", target.toString()), target);
        try {
            Files.delete(tar);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return target.resolve(
                top.relativize(scanRoot.toAbsolutePath().normalize()).toString());
    }

    String run(String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add("git");
        cmd.add("-C");
        cmd.add(dir.toString());
        cmd.addAll(List.of(args));
        return exec(cmd, dir);
    }

    private static String exec(List<String> cmd, Path dir) {
        try {
            Path err = Files.createTempFile("once-scan-git", ".err");
            try {
                Process p = new ProcessBuilder(cmd)
                        .directory(dir.toFile())
                        .redirectError(err.toFile())
                        .start();
                byte[] out = p.getInputStream().readAllBytes();
                if (!p.waitFor(120, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    throw new IllegalStateException(String.join(" ", cmd) + " did not finish within 120 s");
                }
                if (p.exitValue() != 0) {
                    throw new IllegalStateException(String.join(" ", cmd) + " failed (exit " + p.exitValue() + "): "
                            + Files.readString(err).strip());
                }
                return new String(out, StandardCharsets.UTF_8);
            } finally {
                Files.deleteIfExists(err);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + cmd.get(0) + " (is git installed?)", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while running " + String.join(" ", cmd), e);
        }
    }
}
