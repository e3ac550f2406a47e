package dev.once.scan.internal;

import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The work-verb catalogue ({@code dev/once/scan/work.txt}): the verbs under which a consumer hands the message's data to
 * code the repository does not hold ({@code hooks.doIndex(event, body)}, {@code processor.process(release)}). What that
 * code writes is not in sight, so such a call is no effect of its own; its failure is the message's failure all the
 * same, which an ack in a finally block or a catch-all that only logs consumes. Kept as data so a library's verb is a
 * line, not a rule.
 */
final class WorkVerbs {

    static final String RESOURCE = "/dev/once/scan/work.txt";

    private static final WorkVerbs DEFAULT = parse(Catalogue.resourceLines(RESOURCE), RESOURCE);

    private final Set<String> verbs;

    private WorkVerbs(Set<String> verbs) {
        this.verbs = Set.copyOf(verbs);
    }

    static WorkVerbs get() {
        return DEFAULT;
    }

    static WorkVerbs parse(List<String> lines, String source) {
        Set<String> out = new HashSet<>();
        for (DataLine line : DataLine.of(lines)) {
            String[] c = line.columns(source, "verb", "why");
            if (!c[0].matches("[a-z]+")) {
                throw new IllegalStateException(
                        source + ":" + line.number() + ": the verb must be one lower-case word, not '" + c[0] + "'");
            }
            out.add(c[0]);
        }
        return new WorkVerbs(out);
    }

    /**
     * Whether the method's leading verb (the lower-case letters before the first capital, read past a leading
     * {@code do}: {@code doIndex} is {@code index}) is a work verb.
     */
    boolean works(String name) {
        String rest = name.length() > 2 && name.startsWith("do") && Character.isUpperCase(name.charAt(2))
                ? Character.toLowerCase(name.charAt(2)) + name.substring(3)
                : name;
        int end = 0;
        while (end < rest.length() && Character.isLowerCase(rest.charAt(end))) {
            end++;
        }
        return verbs.contains(rest.substring(0, end));
    }
}
