package dev.once.scan.internal;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The client-failure catalogue ({@code dev/once/scan/failures.txt}): exception types a client library throws when the
 * write it was asked to make did not happen. A catch of one that only logs swallows the failure of the message's effect
 * as a catch of every exception does. A repository's own exception named after the client a write goes through is read
 * as one too ({@link #namedAfterClient}). Kept as data so a library's failure type is a line, not a rule.
 */
final class ClientFailures {

    static final String RESOURCE = "/dev/once/scan/failures.txt";

    private static final ClientFailures DEFAULT = parse(Catalogue.resourceLines(RESOURCE), RESOURCE);

    /** Leading words too general to name a client: an exception named after them says nothing of the write. */
    private static final Set<String> GENERIC = Set.of(
            "Application",
            "Base",
            "Business",
            "Client",
            "Common",
            "Custom",
            "Domain",
            "Generic",
            "Http",
            "Internal",
            "Processing",
            "Remote",
            "Rest",
            "Runtime",
            "Service",
            "Technical",
            "Validation");

    private final Map<String, String> types;

    private ClientFailures(Map<String, String> types) {
        this.types = Map.copyOf(types);
    }

    static ClientFailures get() {
        return DEFAULT;
    }

    static ClientFailures parse(List<String> lines, String source) {
        Map<String, String> out = new HashMap<>();
        for (DataLine line : DataLine.of(lines)) {
            String[] c = line.columns(source, "type", "effect", "why");
            if (!c[0].matches("[A-Z]\\w*")) {
                throw new IllegalStateException(
                        source + ":" + line.number() + ": the type must be a simple class name, not '" + c[0] + "'");
            }
            if (!c[1].matches("DATABASE|EXTERNAL|PUBLISH|ANY")) {
                throw new IllegalStateException(source + ":" + line.number()
                        + ": the effect must be DATABASE, EXTERNAL, PUBLISH or ANY, not '" + c[1] + "'");
            }
            out.put(c[0], c[1]);
        }
        return new ClientFailures(out);
    }

    /** Whether a catch of {@code type} catches the failure of an effect of {@code category} that {@code what} names. */
    boolean reports(String type, Event.Category category, String what) {
        String effect = types.get(type);
        if (effect != null) {
            return effect.equals("ANY") || effect.equals(category.name());
        }
        return namedAfterClient(type, what);
    }

    /**
     * {@code InnReachException} around a call that {@code what} describes as made through {@code InnReachClient}: the
     * exception's name without {@code Exception} starts a type name the description holds, at a word boundary, and is
     * not a general word ({@code HttpException} names no one client).
     */
    static boolean namedAfterClient(String type, String what) {
        if (!type.endsWith("Exception") || type.length() <= "Exception".length()) {
            return false;
        }
        String stem = type.substring(0, type.length() - "Exception".length());
        if (stem.length() < 4 || GENERIC.contains(stem) || !Character.isUpperCase(stem.charAt(0))) {
            return false;
        }
        for (int i = what.indexOf(stem); i >= 0; i = what.indexOf(stem, i + 1)) {
            boolean starts = i == 0 || !Character.isLetterOrDigit(what.charAt(i - 1));
            int end = i + stem.length();
            boolean word = end < what.length() && Character.isUpperCase(what.charAt(end));
            if (starts && word) {
                return true;
            }
        }
        return false;
    }
}
