package dev.once.scan;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

/** The output formats of {@code once scan}: a terminal report, JSON, Markdown for a pull-request comment, SARIF 2.1.0. */
public enum Format {
    TEXT,
    JSON,
    MARKDOWN,
    SARIF;

    private static final ObjectMapper MAPPER = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    /** The tool version written into JSON and SARIF. */
    public static final String VERSION = "0.1.0";

    /** Parses {@code text|json|markdown|sarif}. */
    public static Format parse(String s) {
        for (Format f : values()) {
            if (f.name().equalsIgnoreCase(s.strip()) || f == MARKDOWN && s.equalsIgnoreCase("md")) {
                return f;
            }
        }
        throw new IllegalArgumentException("format must be one of text, json, markdown, sarif, but was '" + s + "'");
    }

    /** Renders the report. */
    public String render(ScanReport r) {
        return switch (this) {
            case TEXT -> text(r);
            case JSON -> write(json(r));
            case MARKDOWN -> markdown(r);
            case SARIF -> write(sarif(r));
        };
    }

    private static String write(Object tree) {
        try {
            return MAPPER.writeValueAsString(tree) + "\n";
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot write the report as JSON", e);
        }
    }

    private static Map<String, List<Finding>> byConsumer(ScanReport r) {
        Map<String, List<Finding>> m = new LinkedHashMap<>();
        for (Consumer c : r.consumers()) {
            m.put(c.id(), new ArrayList<>());
        }
        for (Finding f : r.findings()) {
            m.computeIfAbsent(f.consumer(), k -> new ArrayList<>()).add(f);
        }
        return m;
    }

    private static String blast(Blast b) {
        return b == null ? "none" : b.id();
    }

    // ---- text -----------------------------------------------------------------------------------

    private static String text(ScanReport r) {
        StringBuilder b = new StringBuilder();
        b.append("once scan ")
                .append(r.root())
                .append(r.base() == null ? "" : " (changed since " + r.base() + ")")
                .append('\n');
        b.append(String.format(
                Locale.ROOT,
                "Production Reliability Index %d/100 · %d consumers · %d findings%n%n",
                r.index(),
                r.consumers().size(),
                r.findings().size()));
        Map<String, List<Finding>> by = byConsumer(r);
        int rank = 0;
        for (Consumer c : r.consumers()) {
            rank++;
            b.append(String.format(
                    Locale.ROOT,
                    "#%d %s  [%s]  score %d/100, blast %s%n",
                    rank,
                    c.name(),
                    c.kind(),
                    c.score(),
                    blast(c.blast())));
            b.append("   at     ").append(c.location()).append('\n');
            b.append("   ack    ").append(c.ack()).append('\n');
            b.append("   dedupe ").append(c.dedupe()).append('\n');
            List<Finding> fs = by.getOrDefault(c.id(), List.of());
            if (fs.isEmpty()) {
                b.append("   safe: no finding\n");
            }
            for (Finding f : fs) {
                b.append("   ")
                        .append(f.level().id().toUpperCase(Locale.ROOT))
                        .append(' ')
                        .append(f.rule().id())
                        .append(f.status() == null ? "" : " (" + f.status() + ")")
                        .append("  ")
                        .append(f.location())
                        .append('\n');
                b.append("      ").append(f.message()).append('\n');
                b.append("      path ")
                        .append(f.path().stream()
                                .map(s -> s.name() + " (" + s.location() + ")")
                                .collect(Collectors.joining("\n           → ")))
                        .append('\n');
                b.append("      fix  ").append(f.fix()).append('\n');
            }
            b.append('\n');
        }
        if (r.suppressed() > 0) {
            b.append(r.suppressed())
                    .append(
                            " findings suppressed (@SuppressWarnings(\"once-scan\") or // once-scan:ignore RULE reason)\n");
        }
        b.append(r.summaryLine()).append('\n');
        return b.toString();
    }

    // ---- JSON -----------------------------------------------------------------------------------

    private static ObjectNode json(ScanReport r) {
        ObjectNode root = MAPPER.createObjectNode();
        root.put("tool", "once scan");
        root.put("version", VERSION);
        root.put("root", r.root());
        if (r.base() != null) {
            root.put("base", r.base());
        }
        root.put("files", r.files());
        root.put("lines", r.lines());
        root.put("seconds", Math.round(r.seconds() * 1000) / 1000.0);
        root.put("index", r.index());
        root.put("suppressed", r.suppressed());
        ArrayNode consumers = root.putArray("consumers");
        int rank = 0;
        for (Consumer c : r.consumers()) {
            ObjectNode n = consumers.addObject();
            n.put("rank", ++rank);
            n.put("id", c.id());
            n.put("name", c.name());
            n.put("kind", c.kind());
            n.set("location", MAPPER.valueToTree(c.location()));
            n.put("ack", c.ack());
            n.put("dedupe", c.dedupe());
            n.put("effects", c.effects());
            n.put("blast", blast(c.blast()));
            n.put("risk", c.risk());
            n.put("score", c.score());
        }
        ArrayNode findings = root.putArray("findings");
        for (Finding f : r.findings()) {
            ObjectNode n = findings.addObject();
            n.put("rule", f.rule().id());
            n.put("level", f.level().id());
            n.put("message", f.message());
            n.put("fix", f.fix());
            n.set("location", MAPPER.valueToTree(f.location()));
            n.put("consumer", f.consumer());
            n.put("blast", blast(f.blast()));
            n.set("path", MAPPER.valueToTree(f.path()));
            n.set("related", MAPPER.valueToTree(f.related()));
            n.put("fingerprint", f.fingerprint());
            if (f.status() != null) {
                n.put("status", f.status());
            }
        }
        return root;
    }

    // ---- Markdown -------------------------------------------------------------------------------

    private static String markdown(ScanReport r) {
        StringBuilder b = new StringBuilder();
        b.append("### once scan: Production Reliability Index ")
                .append(r.index())
                .append("/100\n\n");
        b.append(r.findings().size())
                .append(" findings in ")
                .append(r.consumers().size())
                .append(" consumers")
                .append(r.base() == null ? "" : " changed since `" + r.base() + "`")
                .append(".\n\n");
        if (!r.consumers().isEmpty()) {
            b.append("| # | consumer | kind | blast | score | findings |\n|---|---|---|---|---|---|\n");
            Map<String, List<Finding>> by = byConsumer(r);
            int rank = 0;
            for (Consumer c : r.consumers()) {
                b.append("| ")
                        .append(++rank)
                        .append(" | `")
                        .append(c.name())
                        .append("` | ")
                        .append(c.kind())
                        .append(" | ")
                        .append(blast(c.blast()))
                        .append(" | ")
                        .append(c.score())
                        .append(" | ")
                        .append(by.getOrDefault(c.id(), List.of()).size())
                        .append(" |\n");
            }
            b.append('\n');
        }
        for (Finding f : r.findings()) {
            b.append("- **")
                    .append(f.level().id())
                    .append("** `")
                    .append(f.rule().id())
                    .append("`")
                    .append(f.status() == null ? "" : " _" + f.status() + "_")
                    .append(" at `")
                    .append(f.location())
                    .append("`: ")
                    .append(f.message().replace("|", "\\|"))
                    .append("  \n  **Fix:** ")
                    .append(f.fix())
                    .append('\n');
            b.append("  <details><summary>path</summary>\n\n");
            for (Step s : f.path()) {
                b.append("  1. `")
                        .append(s.name().replace("`", "'"))
                        .append("` at `")
                        .append(s.location())
                        .append("`\n");
            }
            b.append("\n  </details>\n");
        }
        b.append("\n<sub>").append(r.summaryLine()).append("</sub>\n");
        return b.toString();
    }

    // ---- SARIF 2.1.0 ----------------------------------------------------------------------------

    private static ObjectNode sarif(ScanReport r) {
        ObjectNode root = MAPPER.createObjectNode();
        root.put("$schema", "https://json.schemastore.org/sarif-2.1.0.json");
        root.put("version", "2.1.0");
        ObjectNode run = root.putArray("runs").addObject();
        ObjectNode driver = run.putObject("tool").putObject("driver");
        driver.put("name", "once-scan");
        driver.put("fullName", "once scan: consumers that would not survive a duplicate delivery");
        driver.put("semanticVersion", VERSION);
        ArrayNode rules = driver.putArray("rules");
        List<Rule> order = List.of(Rule.values());
        for (Rule rule : order) {
            ObjectNode n = rules.addObject();
            n.put("id", rule.id());
            n.put("name", pascal(rule.name()));
            n.putObject("shortDescription").put("text", rule.title());
            n.putObject("fullDescription").put("text", rule.description());
            ObjectNode help = n.putObject("help");
            help.put("text", rule.description() + " Fix: " + rule.fix().replace("`", ""));
            help.put("markdown", rule.description() + "\n\n**Fix:** " + rule.fix());
            n.putObject("defaultConfiguration")
                    .put(
                            "level",
                            rule == Rule.WEAK_DEDUPE
                                            || rule == Rule.SLOW_CALL_IN_LEASE
                                            || rule == Rule.BATCH_OUTLIVES_LEASE
                                            || rule == Rule.REMOTE_CALL_IN_TRANSACTION
                                            || rule == Rule.SELF_INVOCATION
                                            || rule == Rule.DUAL_WRITE
                                    ? "warning"
                                    : "error");
            ObjectNode props = n.putObject("properties");
            props.put("precision", rule.precision());
            props.putArray("tags").add("reliability").add("idempotency").add("messaging");
        }
        ObjectNode base = run.putObject("originalUriBaseIds").putObject("SRCROOT");
        base.put("uri", Path.of(r.root()).toAbsolutePath().normalize().toUri().toString());
        ArrayNode results = run.putArray("results");
        for (Finding f : r.findings()) {
            ObjectNode n = results.addObject();
            n.put("ruleId", f.rule().id());
            n.put("ruleIndex", order.indexOf(f.rule()));
            n.put("level", f.level().id());
            n.putObject("message")
                    .put("text", sentence(f.message()) + " Fix: " + f.fix().replace("`", ""));
            n.putArray("locations").addObject().set("physicalLocation", physical(f.location()));
            n.putObject("partialFingerprints").put("primaryLocationLineHash", f.fingerprint() + ":1");
            ArrayNode related = n.putArray("relatedLocations");
            int id = 0;
            for (Related rel : f.related()) {
                ObjectNode rn = related.addObject();
                rn.put("id", id++);
                rn.set("physicalLocation", physical(rel.location()));
                rn.putObject("message").put("text", rel.role());
            }
            ArrayNode steps = n.putArray("codeFlows")
                    .addObject()
                    .putArray("threadFlows")
                    .addObject()
                    .putArray("locations");
            for (Step s : f.path()) {
                ObjectNode loc = steps.addObject().putObject("location");
                loc.set("physicalLocation", physical(s.location()));
                loc.putObject("message").put("text", s.name());
            }
            ObjectNode props = n.putObject("properties");
            props.put("consumer", f.consumer());
            props.put("blast", blast(f.blast()));
            if (f.status() != null) {
                props.put("status", f.status());
            }
        }
        run.put("columnKind", "utf16CodeUnits");
        return root;
    }

    private static ObjectNode physical(Location l) {
        ObjectNode p = MAPPER.createObjectNode();
        ObjectNode a = p.putObject("artifactLocation");
        a.put("uri", l.file().replace(" ", "%20"));
        a.put("uriBaseId", "SRCROOT");
        ObjectNode region = p.putObject("region");
        region.put("startLine", l.line());
        if (l.endLine() > l.line()) {
            region.put("endLine", l.endLine());
        }
        region.put("startColumn", l.column());
        if (!l.snippet().isEmpty()) {
            region.putObject("snippet").put("text", l.snippet());
        }
        return p;
    }

    private static String sentence(String s) {
        String t = s.strip();
        return t.endsWith(".") ? t : t + ".";
    }

    private static String pascal(String constant) {
        StringBuilder b = new StringBuilder();
        for (String part : constant.split("_")) {
            b.append(part.charAt(0)).append(part.substring(1).toLowerCase(Locale.ROOT));
        }
        return b.toString();
    }
}
