package dev.once.scan.internal;

import dev.once.scan.Blast;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The effect and guard catalogue ({@code dev/once/scan/effects.txt}): client APIs the scan does
 * not follow into, what a call to each does (effect kind and blast radius), and the call shapes
 * that are idempotent by construction. Kept as data so a new client is a line, not a rule.
 */
final class Catalogue {

    static final String RESOURCE = "/dev/once/scan/effects.txt";

    /**
     * One line of the catalogue. {@code category} is null for an idempotent shape and for a hand-off ({@code
     * handOff}: the call only buffers the message for a later stage, HANDOFF in the file).
     */
    record Rule(
            Pattern owner,
            Pattern method,
            Pattern args,
            Event.Category category,
            boolean handOff,
            Blast blast,
            Pattern keyed,
            String what) {

        boolean idempotent() {
            return category == null && !handOff;
        }

        /** The keyed pattern occurs somewhere in {@code text} (the call and its method), not as the whole of it. */
        boolean keyedBy(String text) {
            return keyed != null && keyed.matcher(text).find();
        }
    }

    private static final Catalogue DEFAULT = load();

    private final List<Rule> rules;

    private Catalogue(List<Rule> rules) {
        this.rules = List.copyOf(rules);
    }

    static Catalogue get() {
        return DEFAULT;
    }

    /** The first rule for a call of {@code method} on a receiver of type {@code owner}, whose text is {@code call}. */
    Optional<Rule> match(String owner, String method, String call) {
        if (owner == null) {
            return Optional.empty();
        }
        for (Rule r : candidates.computeIfAbsent(
                owner + '\0' + method,
                k -> rules.stream()
                        .filter(r -> r.owner().matcher(owner).matches()
                                && r.method().matcher(method).matches())
                        .toList())) {
            if (r.args() == null || r.args().matcher(call).matches()) {
                return Optional.of(r);
            }
        }
        return Optional.empty();
    }

    /**
     * The rules whose owner and method match, in order, by owner and method: the trace asks of nearly every call it
     * walks, and matching every rule's patterns each time was a fifth of a large repository's scan.
     */
    private final Map<String, List<Rule>> candidates = new java.util.concurrent.ConcurrentHashMap<>();

    static Catalogue parse(List<String> lines, String source) {
        List<Rule> rules = new ArrayList<>();
        for (DataLine line : DataLine.of(lines)) {
            int n = line.number();
            String[] c = line.columns(source, "owner", "method", "args", "category", "blast", "keyed", "what");
            String cat = c[3];
            Event.Category category;
            try {
                category = cat.equals("IDEMPOTENT") || cat.equals("HANDOFF") ? null : Event.Category.valueOf(cat);
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException(
                        source + ":" + n + ": category must be DATABASE, EXTERNAL, PUBLISH,"
                                + " CACHE, IDEMPOTENT or HANDOFF, not '" + cat + "'",
                        e);
            }
            Blast blast;
            try {
                blast = Blast.valueOf(c[4]);
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException(
                        source + ":" + n + ": blast must be one of MONEY, NOTIFICATION, DATA,"
                                + " MESSAGE, CACHE, not '" + c[4] + "'",
                        e);
            }
            rules.add(new Rule(
                    Pattern.compile(c[0]),
                    Pattern.compile(c[1]),
                    c[2].equals("*") ? null : Pattern.compile("(?s)" + c[2]),
                    category,
                    cat.equals("HANDOFF"),
                    blast,
                    c[5].equals("-") ? null : Pattern.compile("(?s)" + c[5]),
                    c[6]));
        }
        return new Catalogue(rules);
    }

    private static Catalogue load() {
        return parse(Catalogue.resourceLines(RESOURCE), RESOURCE);
    }

    /** The lines of a catalogue kept in the once-scan jar at {@code resource}. */
    static List<String> resourceLines(String resource) {
        try (InputStream in = Catalogue.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException(resource + " is missing from the once-scan jar");
            }
            try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                return r.lines().toList();
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + resource, e);
        }
    }
}
