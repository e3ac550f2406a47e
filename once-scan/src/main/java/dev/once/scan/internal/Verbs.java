package dev.once.scan.internal;

import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The verb catalogue ({@code dev/once/scan/verbs.txt}): the verbs other languages name methods with, each mapped to the
 * English verb the write rules read ({@code lagre} is {@code save}, {@code opprett} is {@code create}). Kept as data so a
 * team that names its methods in Norwegian, German or Portuguese is a few lines, not a rule per repository.
 */
final class Verbs {

    static final String RESOURCE = "/dev/once/scan/verbs.txt";

    private static final Verbs DEFAULT = parse(Catalogue.resourceLines(RESOURCE), RESOURCE);

    private final Map<String, String> english;

    private Verbs(Map<String, String> english) {
        this.english = Map.copyOf(english);
    }

    static Verbs get() {
        return DEFAULT;
    }

    static Verbs parse(List<String> lines, String source) {
        Map<String, String> out = new HashMap<>();
        for (DataLine line : DataLine.of(lines)) {
            String[] c = line.columns(source, "language", "verb", "english");
            if (!c[2].matches("[a-z]+")) {
                throw new IllegalStateException(source + ":" + line.number()
                        + ": the English verb must be one lower-case word, not '" + c[2] + "'");
            }
            out.put(c[1].toLowerCase(Locale.ROOT), c[2]);
        }
        return new Verbs(out);
    }

    /**
     * The method's name with its leading verb (the lower-case letters before the first capital) in English:
     * {@code lagreHendelse} is {@code saveHendelse}; a name whose verb is not catalogued is returned as it is.
     */
    String english(String name) {
        int end = 0;
        while (end < name.length() && Character.isLowerCase(name.charAt(end))) {
            end++;
        }
        String verb = english.get(name.substring(0, end));
        return verb == null ? name : verb + name.substring(end);
    }
}
