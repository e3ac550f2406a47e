package dev.once.scan.corpus;

import dev.once.scan.ConsumerScan;
import dev.once.scan.Finding;
import dev.once.scan.ScanReport;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Scans every checked-out corpus repository and scores it against its labels: one line per
 * repository, the misses and false alarms, and one {@code SCAN-SCORE} line per half.
 *
 * <p>usage: {@code CorpusScore LABEL_DIR CHECKOUT_DIR [--verbose] [--show-held-out]} (run by
 * once-scan/corpus/score.sh); {@code CORPUS_HALF=A} scores one half only.
 *
 * <p>Half B is held out: by default only its {@code SCAN-SCORE} line is printed, never its
 * repositories' lines, misses or false alarms, so a tuning run cannot read them by accident.
 * {@code --show-held-out} prints them (for a report on B, not for tuning).
 */
public final class CorpusScore {

    private CorpusScore() {}

    public static void main(String[] args) {
        if (args.length < 2) {
            throw new IllegalArgumentException(
                    "usage: CorpusScore LABEL_DIR CHECKOUT_DIR [--verbose] [--show-held-out]");
        }
        List<String> flags = List.of(args).subList(2, args.length);
        boolean verbose = flags.contains("--verbose");
        boolean showHeldOut = flags.contains("--show-held-out");
        List<Labels.Score> scores = new ArrayList<>();
        // CORPUS_HALF=A scores one half only (tuning reads A's misses without scanning B)
        String only = System.getenv("CORPUS_HALF");
        List<Labels> all = Labels.readAll(Path.of(args[0])).stream()
                .filter(l -> only == null || only.isEmpty() || only.equals(l.half()))
                .toList();
        List<String> missing = notScored(all, Path.of(args[1]));
        missing.forEach(System.out::println);
        List<Labels> unscored = all.stream()
                .filter(l -> missing.stream().anyMatch(m -> m.contains(" " + l.name() + " commit ")))
                .toList();
        for (Labels l : all) {
            if (unscored.contains(l)) {
                continue;
            }
            Path root = Path.of(args[1], l.name());
            ScanReport report = ConsumerScan.builder().root(root).build().run();
            Labels.Score s = l.score(report);
            scores.add(s);
            if (l.half().equals("B") && !showHeldOut) {
                continue;
            }
            System.out.printf(
                    Locale.ROOT,
                    "REPO half=%s %s must=%d/%d traps_sprung=%d/%d entries=%d/%d findings=%d seconds=%.2f%n",
                    l.half(),
                    l.name(),
                    s.count(Labels.Kind.MUST) - s.missed().size(),
                    s.count(Labels.Kind.MUST),
                    s.sprung().size(),
                    s.count(Labels.Kind.TRAP),
                    s.count(Labels.Kind.ENTRY) - s.entriesMissed().size(),
                    s.count(Labels.Kind.ENTRY),
                    report.findings().size(),
                    report.seconds());
            s.missed().forEach(m -> System.out.println("  MISSED " + m));
            s.sprung().forEach(m -> System.out.println("  FALSE-ALARM " + m));
            s.entriesMissed().forEach(m -> System.out.println("  ENTRY-MISSED " + m));
            if (verbose) {
                report.consumers().forEach(c -> System.out.println("  consumer " + c.kind() + " " + c.location()));
                for (Finding f : report.findings()) {
                    System.out.println("  finding " + f.rule().id() + " " + f.location() + " " + f.message());
                }
            }
        }
        summary(scores, unscored).forEach(System.out::println);
        missedByKind(scores).forEach(System.out::println);
    }

    /**
     * Per half, how many entry points were missed by kind and how many musts by rule: counts only, no repository,
     * file or line, so half B's can be printed without showing what its misses are.
     */
    static List<String> missedByKind(List<Labels.Score> scores) {
        Map<String, Map<String, Long>> entries = new TreeMap<>();
        Map<String, Map<String, Long>> musts = new TreeMap<>();
        for (Labels.Score s : scores) {
            String half = s.labels().half();
            s.entriesMissed()
                    .forEach(l ->
                            entries.computeIfAbsent(half, k -> new TreeMap<>()).merge(l.rule(), 1L, Long::sum));
            s.missed()
                    .forEach(l ->
                            musts.computeIfAbsent(half, k -> new TreeMap<>()).merge(l.rule(), 1L, Long::sum));
        }
        List<String> out = new ArrayList<>();
        java.util.Set<String> halves = new java.util.TreeSet<>(entries.keySet());
        halves.addAll(musts.keySet());
        for (String half : halves) {
            StringBuilder line = new StringBuilder("MISSED-BY-KIND half=" + half + " entries");
            entries.getOrDefault(half, Map.of())
                    .forEach((k, n) -> line.append(' ').append(k).append('=').append(n));
            line.append(" musts");
            musts.getOrDefault(half, Map.of())
                    .forEach((k, n) -> line.append(' ').append(k).append('=').append(n));
            out.add(line.toString());
        }
        return out;
    }

    /**
     * The labelled repositories with no checkout at their pinned commit (checkout.py writes the commit into
     * {@code .commit} once the files are out; a mirror whose snapshot lacks the commit leaves none): one line each,
     * so a repository is never dropped from the figures without a word. Only its name and commit, B's included.
     */
    static List<String> notScored(List<Labels> labels, Path checkouts) {
        List<String> out = new ArrayList<>();
        for (Labels l : labels) {
            if (!checkedOut(l, checkouts)) {
                out.add("NOT-SCORED half=" + l.half() + " " + l.name() + " commit " + l.commit()
                        + ": no checkout at the pinned commit (not in the mirror's snapshot?)");
            }
        }
        return out;
    }

    private static boolean checkedOut(Labels l, Path checkouts) {
        Path stamp = checkouts.resolve(l.name()).resolve(".commit");
        try {
            return Files.isRegularFile(stamp) && Files.readString(stamp).strip().equals(l.commit());
        } catch (IOException e) {
            return false;
        }
    }

    /** As {@link #summary(List)}, each half's line ending in how many of its repositories were not scored. */
    static List<String> summary(List<Labels.Score> scores, List<Labels> notScored) {
        Map<String, Long> missing = new TreeMap<>();
        notScored.forEach(l -> missing.merge(l.half(), 1L, Long::sum));
        List<String> out = new ArrayList<>();
        for (String line : summary(scores)) {
            String half = line.replaceFirst("^SCAN-SCORE half=(\\S+) .*", "$1");
            long n = missing.getOrDefault(half, 0L);
            out.add(n == 0 ? line : line + " not_scored=" + n);
        }
        return out;
    }

    /** One {@code SCAN-SCORE} line per half, in half order. */
    static List<String> summary(List<Labels.Score> scores) {
        Map<String, List<Labels.Score>> halves = new TreeMap<>();
        for (Labels.Score s : scores) {
            halves.computeIfAbsent(s.labels().half(), k -> new ArrayList<>()).add(s);
        }
        List<String> out = new ArrayList<>();
        halves.forEach((half, ss) -> {
            long must = ss.stream().mapToLong(s -> s.count(Labels.Kind.MUST)).sum();
            long found = must - ss.stream().mapToLong(s -> s.missed().size()).sum();
            long traps = ss.stream().mapToLong(s -> s.count(Labels.Kind.TRAP)).sum();
            long sprung = ss.stream().mapToLong(s -> s.sprung().size()).sum();
            long entries =
                    ss.stream().mapToLong(s -> s.count(Labels.Kind.ENTRY)).sum();
            long entriesFound = entries
                    - ss.stream().mapToLong(s -> s.entriesMissed().size()).sum();
            double[] secs =
                    ss.stream().mapToDouble(s -> s.report().seconds()).sorted().toArray();
            double median = secs.length == 0
                    ? 0
                    : secs.length % 2 == 1
                            ? secs[secs.length / 2]
                            : (secs[secs.length / 2 - 1] + secs[secs.length / 2]) / 2;
            out.add(String.format(
                    Locale.ROOT,
                    "SCAN-SCORE half=%s repos=%d recall=%.3f (%d/%d) trap_false_alarms=%.3f (%d/%d) entry_points=%.3f (%d/%d) median_s=%.2f max_s=%.2f",
                    half,
                    ss.size(),
                    ratio(found, must),
                    found,
                    must,
                    ratio(sprung, traps),
                    sprung,
                    traps,
                    ratio(entriesFound, entries),
                    entriesFound,
                    entries,
                    median,
                    secs.length == 0 ? 0 : secs[secs.length - 1]));
        });
        return out;
    }

    private static double ratio(long a, long b) {
        return b == 0 ? 0 : (double) a / b;
    }
}
