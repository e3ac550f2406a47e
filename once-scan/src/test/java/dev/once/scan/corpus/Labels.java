package dev.once.scan.corpus;

import dev.once.scan.Consumer;
import dev.once.scan.Finding;
import dev.once.scan.Location;
import dev.once.scan.Related;
import dev.once.scan.ScanReport;
import dev.once.scan.Step;
import dev.once.scan.internal.DataLine;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * The hand labels of one real repository (see once-scan/corpus/README.md): its entry points, the
 * findings a reviewer must report, and the tempting false alarms. Matching is by file and a
 * window of {@link #SLACK} lines, because a reviewer and the scan may point at neighbouring lines
 * of one statement.
 */
record Labels(String name, String repo, String commit, String half, String scan, List<Label> labels) {

    static final int SLACK = 3;

    enum Kind {
        ENTRY,
        MUST,
        TRAP
    }

    /** One label line: what, which rule (or entry kind), where, and the reviewer's reason. */
    record Label(Kind kind, String rule, String file, int line, String reason) {

        /** Within the slack of what is located, from its first line to its last (a handler's annotations to its name). */
        boolean near(Location at) {
            return at.file().equals(file) && line >= at.line() - SLACK && line <= at.endLine() + SLACK;
        }

        /** How many lines lie between this label and what is located (0 within its span), or -1 in another file. */
        int distance(Location at) {
            if (!at.file().equals(file)) {
                return -1;
            }
            return line < at.line() ? at.line() - line : line > at.endLine() ? line - at.endLine() : 0;
        }

        /** A must-report label is found by a finding of its rule at it, or naming it on its path. */
        boolean foundBy(Finding f) {
            if (!f.rule().id().equals(rule)) {
                return false;
            }
            return near(f.location()) || named(f);
        }

        /** A finding naming this label's line on its path or among its related places (its entry point aside). */
        boolean named(Finding f) {
            return f.path().stream().map(Step::location).anyMatch(this::near)
                    || f.related().stream()
                            .filter(r -> !r.role().equals("entry point"))
                            .map(Related::location)
                            .anyMatch(this::near);
        }

        /**
         * A finding naming this label's line at a step of its path or a related place other than where it is reported
         * and its entry point: what the finding is about beyond its own line.
         */
        boolean namedElsewhere(Finding f) {
            List<Location> own = new ArrayList<>(List.of(f.location()));
            f.related().stream().filter(r -> r.role().equals("entry point")).forEach(r -> own.add(r.location()));
            java.util.function.Predicate<Location> other =
                    at -> own.stream().noneMatch(o -> o.file().equals(at.file()) && o.line() == at.line());
            return f.path().stream().map(Step::location).filter(other).anyMatch(this::near)
                    || f.related().stream()
                            .filter(r -> !r.role().equals("entry point"))
                            .map(Related::location)
                            .filter(other)
                            .anyMatch(this::near);
        }

        /** A trap is sprung by a finding of its rule (any rule for {@code *}) reported at it. */
        boolean sprungBy(Finding f) {
            return (rule.equals("*") || f.rule().id().equals(rule)) && near(f.location());
        }

        boolean foundBy(Consumer c) {
            return near(c.location());
        }

        @Override
        public String toString() {
            return kind.name().toLowerCase(java.util.Locale.ROOT) + " " + rule + " " + file + ":" + line + "  "
                    + reason;
        }
    }

    /** What the scan got right and wrong on one repository. */
    record Score(Labels labels, ScanReport report, List<Label> missed, List<Label> sprung, List<Label> entriesMissed) {

        long count(Kind k) {
            return labels.labels().stream().filter(l -> l.kind() == k).count();
        }
    }

    static Labels read(Path file) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read label file " + file, e);
        }
        String repo = null;
        String commit = null;
        String half = null;
        String scan = ".";
        List<Label> labels = new ArrayList<>();
        for (DataLine data : DataLine.of(lines)) {
            int n = data.number();
            String line = data.text();
            if (line.startsWith("repo:")) {
                repo = line.substring(5).strip();
            } else if (line.startsWith("commit:")) {
                commit = line.substring(7).strip();
            } else if (line.startsWith("half:")) {
                half = line.substring(5).strip();
            } else if (line.startsWith("scan:")) {
                scan = line.substring(5).strip();
            } else {
                String[] p = line.split("\\s+", 4);
                if (p.length < 3) {
                    throw new IllegalArgumentException(
                            file + ":" + n + ": expected 'entry|must|trap RULE FILE:LINE reason', got '" + line + "'");
                }
                Kind k = switch (p[0]) {
                    case "entry" -> Kind.ENTRY;
                    case "must" -> Kind.MUST;
                    case "trap" -> Kind.TRAP;
                    default ->
                        throw new IllegalArgumentException(
                                file + ":" + n + ": a label starts with entry, must or trap, not '" + p[0] + "'");
                };
                int colon = p[2].lastIndexOf(':');
                if (colon < 0) {
                    throw new IllegalArgumentException(file + ":" + n + ": expected FILE:LINE, got '" + p[2] + "'");
                }
                labels.add(new Label(
                        k,
                        p[1],
                        p[2].substring(0, colon),
                        Integer.parseInt(p[2].substring(colon + 1)),
                        p.length > 3 ? p[3] : ""));
            }
        }
        if (repo == null || commit == null || half == null) {
            throw new IllegalArgumentException(file + ": repo:, commit: and half: are required");
        }
        String name = file.getFileName().toString().replaceFirst("\\.txt$", "");
        return new Labels(name, repo, commit, half, scan, List.copyOf(labels));
    }

    static List<Labels> readAll(Path dir) {
        try (Stream<Path> files = Files.list(dir)) {
            return files.filter(f -> f.getFileName().toString().endsWith(".txt"))
                    .sorted()
                    .map(Labels::read)
                    .toList();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + dir, e);
        }
    }

    /**
     * One finding reported where a must and a trap lie within the slack of each other is the nearer label's: the
     * trap's when its line is strictly nearer the finding's own location, the must's otherwise (a tie included). So
     * one finding never both finds a must and springs a trap at its location; a must it names at another step of its
     * path or another related place (not its own line or its entry point) is found all the same, since the finding
     * says it is about that line.
     */
    private boolean trapsFirst(Label trap, Finding f) {
        int d = trap.distance(f.location());
        return labels.stream()
                .filter(m -> m.kind() == Kind.MUST && m.rule().equals(f.rule().id()) && m.near(f.location()))
                .allMatch(m -> d < m.distance(f.location()));
    }

    private boolean mustFirst(Label must, Finding f) {
        if (!must.near(f.location()) || must.namedElsewhere(f)) {
            return true; // found on the path or through a related place: no trap competes for it
        }
        int d = must.distance(f.location());
        return labels.stream()
                .filter(t -> t.kind() == Kind.TRAP && t.sprungBy(f))
                .noneMatch(t -> t.distance(f.location()) < d);
    }

    Score score(ScanReport report) {
        List<Label> missed = new ArrayList<>();
        List<Label> sprung = new ArrayList<>();
        List<Label> entriesMissed = new ArrayList<>();
        for (Label l : labels) {
            switch (l.kind()) {
                case MUST -> {
                    if (report.findings().stream().noneMatch(f -> l.foundBy(f) && mustFirst(l, f))) {
                        missed.add(l);
                    }
                }
                case TRAP -> {
                    if (report.findings().stream().anyMatch(f -> l.sprungBy(f) && trapsFirst(l, f))) {
                        sprung.add(l);
                    }
                }
                case ENTRY -> {
                    if (report.consumers().stream().noneMatch(l::foundBy)) {
                        entriesMissed.add(l);
                    }
                }
            }
        }
        return new Score(this, report, missed, sprung, entriesMissed);
    }
}
