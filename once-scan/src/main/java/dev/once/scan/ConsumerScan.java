package dev.once.scan;

import dev.once.scan.internal.Engine;
import dev.once.scan.internal.Git;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * Scans a Java repository for message consumers that would not survive a duplicate delivery:
 * entry points, where each acknowledges relative to its effects, the effects it reaches through
 * the repository's own classes, the dedupe it has (or only seems to have), lease risks, and a
 * score per consumer and for the repository.
 *
 * <pre>{@code
 * ScanReport report = ConsumerScan.builder().root(Path.of(".")).build().run();
 * }</pre>
 *
 * <p>Stateless once built; {@link #run()} may be called from any thread. A file that does not
 * parse, or a type the symbol solver cannot resolve, is skipped for that node only.
 */
public final class ConsumerScan {

    private final Path root;
    private final String base;

    private ConsumerScan(Builder b) {
        this.root = b.root;
        this.base = b.base;
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Scans the root. In pull-request mode ({@link Builder#base}) only consumers whose entry
     * point, ack or effect path touches a line changed since the base are reported, and each
     * finding is marked {@code new} (absent at the base) or {@code existing}.
     *
     * @throws IllegalStateException in pull-request mode, when git fails (not a repository, unknown ref)
     */
    public ScanReport run() {
        long start = System.nanoTime();
        Engine.Raw raw = Engine.run(root);
        List<Consumer> consumers = raw.consumers();
        List<Finding> findings = raw.findings();
        if (base != null) {
            Git git = new Git(root);
            Map<String, TreeSet<Integer>> changed = git.changedLines(base, root);
            Set<String> before = baseFingerprints(git);
            Set<String> touched = new HashSet<>();
            for (Consumer c : consumers) {
                if (hit(changed, c.location())
                        || raw.spans().getOrDefault(c.id(), List.of()).stream().anyMatch(s -> hit(changed, s))) {
                    touched.add(c.id());
                }
            }
            for (Finding f : findings) {
                if (hit(changed, f.location())
                        || f.path().stream().anyMatch(s -> hit(changed, s.location()))
                        || f.related().stream().anyMatch(r -> hit(changed, r.location()))) {
                    touched.add(f.consumer());
                }
            }
            consumers = consumers.stream().filter(c -> touched.contains(c.id())).toList();
            List<Finding> marked = new ArrayList<>();
            for (Finding f : findings) {
                if (touched.contains(f.consumer())) {
                    marked.add(f.withStatus(before.contains(f.fingerprint()) ? "existing" : "new"));
                }
            }
            findings = marked;
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        return new ScanReport(
                root.toString(),
                raw.files(),
                raw.lines(),
                consumers,
                findings,
                Scoring.index(consumers),
                seconds,
                base,
                raw.suppressed(),
                raw.unresolved());
    }

    private Set<String> baseFingerprints(Git git) {
        Path tmp;
        try {
            tmp = Files.createTempDirectory("once-scan-base");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a temporary directory for the base tree", e);
        }
        try {
            Path baseRoot = git.checkout(base, root, tmp);
            Set<String> out = new HashSet<>();
            if (Files.isDirectory(baseRoot)) {
                Engine.run(baseRoot).findings().forEach(f -> out.add(f.fingerprint()));
            }
            return out;
        } finally {
            try (Stream<Path> walk = Files.walk(tmp)) {
                walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException e) {
                // a leftover temporary directory is not worth failing the scan
            }
        }
    }

    private static boolean hit(Map<String, TreeSet<Integer>> changed, Engine.Span span) {
        TreeSet<Integer> lines = changed.get(span.file());
        if (lines == null) {
            return false;
        }
        Integer next = lines.ceiling(span.from());
        return lines.contains(-1) || next != null && next <= span.to();
    }

    private static boolean hit(Map<String, TreeSet<Integer>> changed, Location at) {
        TreeSet<Integer> lines = changed.get(at.file());
        return lines != null && (lines.contains(-1) || lines.contains(at.line()));
    }

    /** Builds a {@link ConsumerScan}; {@link #root} is required. */
    public static final class Builder {
        private Path root;
        private String base;

        private Builder() {}

        /** The directory to scan. */
        public Builder root(Path root) {
            this.root = Objects.requireNonNull(root, "root");
            return this;
        }

        /** A git ref: report only consumers changed since it (pull-request mode). */
        public Builder base(String ref) {
            if (ref != null && (ref.isBlank() || ref.startsWith("-"))) {
                throw new IllegalArgumentException(
                        "base must be a git ref such as main or HEAD~1, but was '" + ref + "'");
            }
            this.base = ref;
            return this;
        }

        /**
         * @throws IllegalArgumentException if the root is missing or not a directory
         */
        public ConsumerScan build() {
            if (root == null) {
                throw new IllegalArgumentException("root is required: the directory to scan");
            }
            if (!Files.isDirectory(root)) {
                throw new IllegalArgumentException("root must be a directory, but '" + root + "' is not");
            }
            return new ConsumerScan(this);
        }
    }
}
