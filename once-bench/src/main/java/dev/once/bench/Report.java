package dev.once.bench;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * BENCHMARKS.md as sections ({@code ## } headings), each owned by the suite that wrote it (a
 * marker comment in it) or by nobody (hand-written notes). Rerunning some suites replaces their
 * sections where they stood and keeps every other section as it was.
 */
final class Report {

    private static final Pattern MARKER = Pattern.compile("<!-- suite: ([a-z0-9-]+) -->");
    private static final String MACHINE = "Machine and settings";
    // Sections written before the markers existed, by title.
    private static final Map<String, String> UNMARKED = Map.of(
            "Core: naive vs hand-written floor vs once", "core",
            "Peers: Camel, Eventuate Tram, Spring Integration", "peers",
            "Kafka end to end: naive vs once", "kafka",
            "Retention at scale", "retention");

    private Report() {}

    static String marker(String suite) {
        return "<!-- suite: " + suite + " -->";
    }

    private record Section(String title, String text) {}

    /**
     * The new report.
     *
     * @param old     the report on disk, or null
     * @param machine the machine section of this run
     * @param ran     suite name to its sections, for the suites of this run, in run order
     * @param all     every suite of the build: a run of all of them writes a fresh report
     */
    static String merge(String old, String machine, Map<String, String> ran, Set<String> all) {
        StringBuilder md = new StringBuilder(BenchMain.head()).append(machine);
        if (old == null || ran.keySet().containsAll(all)) {
            ran.values().forEach(md::append);
            return md.toString();
        }
        List<String> out = new ArrayList<>();
        Set<String> placed = new LinkedHashSet<>();
        int afterLastSuite = 0;
        for (Section s : sections(old)) {
            if (s.title().equals(MACHINE)) {
                continue;
            }
            String owner = owner(s);
            if (owner != null && ran.containsKey(owner)) {
                if (placed.add(owner)) {
                    out.add(ran.get(owner));
                    afterLastSuite = out.size();
                }
                continue;
            }
            out.add(s.text());
            if (owner != null) {
                afterLastSuite = out.size();
            }
        }
        List<String> added = new ArrayList<>();
        ran.forEach((suite, text) -> {
            if (!placed.contains(suite)) {
                added.add(text);
            }
        });
        out.addAll(afterLastSuite, added);
        out.forEach(md::append);
        return md.toString();
    }

    private static String owner(Section s) {
        Matcher m = MARKER.matcher(s.text());
        return m.find() ? m.group(1) : UNMARKED.get(s.title());
    }

    // The text before the first section is the head, which every run writes anew.
    private static List<Section> sections(String md) {
        List<Section> sections = new ArrayList<>();
        String title = null;
        StringBuilder text = new StringBuilder();
        for (String line : md.split("\n", -1)) {
            if (line.startsWith("## ")) {
                if (title != null) {
                    sections.add(new Section(title, text.toString()));
                }
                title = line.substring(3).trim();
                text.setLength(0);
            }
            if (title != null) {
                text.append(line).append('\n');
            }
        }
        if (title != null) {
            sections.add(new Section(title, text.toString().replaceAll("\n+$", "\n") + "\n"));
        }
        return sections;
    }
}
