package dev.once.scan.internal;

import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.body.BodyDeclaration;
import com.github.javaparser.ast.nodeTypes.NodeWithAnnotations;
import dev.once.scan.Consumer;
import dev.once.scan.Finding;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** One full scan of a directory: parse, find entry points, trace, judge. */
public final class Engine {

    /** What a scan produced, before ranking and pull-request filtering. */
    public record Raw(
            int files,
            long lines,
            List<Consumer> consumers,
            List<Finding> findings,
            int suppressed,
            int unresolved,
            Map<String, List<Span>> spans) {}

    /** Lines {@code from}–{@code to} of a file that a consumer's flow runs through. */
    public record Span(String file, int from, int to) {
        public boolean contains(int line) {
            return line >= from && line <= to;
        }
    }

    private Engine() {}

    public static Raw run(Path root) {
        Repo repo = Repo.load(root);
        Types types = new Types(repo);
        Settings settings = new Settings(repo);
        Schema schema = new Schema(repo);
        List<Entry> entries = new EntryPoints(repo, types, settings).find();
        Tracer tracer = new Tracer(repo, types, schema);
        Analyzer analyzer = new Analyzer();
        List<Consumer> consumers = new ArrayList<>();
        List<Finding> findings = new ArrayList<>();
        int suppressed = 0;
        Map<String, List<Span>> spans = new HashMap<>();
        for (Entry e : entries) {
            Analyzer.Result r = analyzer.analyze(e, tracer.trace(e), tracer.finallyAcks());
            spans.put(e.id(), tracer.spans());
            if (suppressed(e.body)) {
                suppressed += r.findings().size();
                continue;
            }
            consumers.add(r.consumer());
            for (Finding f : r.findings()) {
                if (ignored(repo, f)) {
                    suppressed++;
                } else {
                    findings.add(f);
                }
            }
        }
        consumers.sort(Comparator.comparingDouble(Consumer::risk)
                .reversed()
                .thenComparing(c -> c.blast() == null ? 0 : -c.blast().weight())
                .thenComparing(Consumer::id));
        List<String> order = consumers.stream().map(Consumer::id).toList();
        findings.sort(Comparator.comparingInt((Finding f) -> order.indexOf(f.consumer()))
                .thenComparing(f -> f.level().ordinal())
                .thenComparing(f -> f.location().file())
                .thenComparingInt(f -> f.location().line()));
        return new Raw(repo.files, repo.lines, consumers, findings, suppressed, repo.unresolved, spans);
    }

    /**
     * {@code // once-scan:ignore RULE reason} on the finding's line or the line above leaves that one
     * finding out, counted. The rule id (with or without {@code once/}) and a reason are both required:
     * a bare marker suppresses nothing, so every suppression says why the finding does not apply.
     */
    private static final java.util.regex.Pattern IGNORE =
            java.util.regex.Pattern.compile("once-scan:ignore\\s+(?:once/)?([\\w-]+)\\s+\\S.*");

    private static boolean ignored(Repo repo, Finding f) {
        String[] lines = repo.sources().stream()
                .filter(s -> s.rel().equals(f.location().file()))
                .map(Repo.Source::lines)
                .findFirst()
                .orElse(null);
        if (lines == null) {
            return false;
        }
        int at = f.location().line() - 1;
        for (int i = Math.max(0, at - 1); i <= at && i < lines.length; i++) {
            java.util.regex.Matcher m = IGNORE.matcher(lines[i]);
            if (m.find() && f.rule().id().equals("once/" + m.group(1))) {
                return true;
            }
        }
        return false;
    }

    /** {@code @SuppressWarnings("once-scan")} on the entry point's method or class leaves it out, counted. */
    private static boolean suppressed(Node body) {
        for (Node n = body; n != null; n = n.getParentNode().orElse(null)) {
            if (n instanceof BodyDeclaration<?>
                    && n instanceof NodeWithAnnotations<?> a
                    && a.getAnnotationByName("SuppressWarnings")
                            .map(x -> x.toString().contains("once-scan"))
                            .orElse(false)) {
                return true;
            }
        }
        return false;
    }
}
