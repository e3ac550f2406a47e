package dev.once.scan.internal;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * The entry-point catalogue ({@code dev/once/scan/entries.txt}): message and job APIs whose handler is an annotated
 * method, a class implementing a callback interface, or a callback handed to a registration call, with how each is
 * acknowledged. Kept as data so a client whose handler needs no settings read is a line, not a finder.
 */
final class EntryCatalogue {

    static final String RESOURCE = "/dev/once/scan/entries.txt";

    enum Shape {
        ANNOTATION,
        IMPLEMENTS,
        CALLBACK,
        /** A pulling call on a receiver of the type {@code method} names: the loop (or method) around it is the consumer. */
        RECEIVE,
        /**
         * A broker's own message type ({@code name} in package {@code pkg}): a method taking one that nothing in the
         * repository calls is run by the library or framework that delivers it.
         */
        RECORD,
        /**
         * A library wrapper ({@code name}) that starts a consumer with {@code method(handler, …)} and commits a record's
         * offset when the handler's future completes, failed or not, unless an error handler is installed with one of
         * the setters its {@code ack} column names ({@code UNLESS:processRecordErrorHandler}); {@code kind} is the
         * library's handler type whose handlers it runs.
         */
        FAILURE
    }

    /** One line of the catalogue. {@code method} is null for an annotation; {@code ackCalls} is empty unless EXPLICIT. */
    record Rule(
            Shape shape,
            String name,
            String method,
            String pkg,
            String broker,
            Entry.Ack ack,
            Set<String> ackCalls,
            String kind,
            String why) {}

    private static final EntryCatalogue DEFAULT = load();

    private final List<Rule> rules;

    private final Set<String> packages;

    private EntryCatalogue(List<Rule> rules) {
        this.rules = List.copyOf(rules);
        this.packages = rules.stream().map(Rule::pkg).collect(java.util.stream.Collectors.toUnmodifiableSet());
    }

    static EntryCatalogue get() {
        return DEFAULT;
    }

    /** The first rule of {@code shape} named {@code name} whose package the file imports. */
    Optional<Rule> match(Shape shape, String name, Repo.Source s) {
        for (Rule r : rules) {
            if (r.shape() == shape && r.name().equals(name) && imports(s, r.pkg())) {
                return Optional.of(r);
            }
        }
        return Optional.empty();
    }

    /** Every rule of {@code shape} named {@code name} whose package the file imports, in the catalogue's order. */
    List<Rule> all(Shape shape, String name, Repo.Source s) {
        return rules.stream()
                .filter(r -> r.shape() == shape && r.name().equals(name) && imports(s, r.pkg()))
                .toList();
    }

    /** The packages the rules need imported: a file naming none of them holds no catalogued handler. */
    Set<String> packages() {
        return packages;
    }

    /** Whether any rule has this shape and name (checked before the imports, which cost more). */
    boolean names(Shape shape, String name) {
        return rules.stream().anyMatch(r -> r.shape() == shape && r.name().equals(name));
    }

    /** The broker message rule for a parameter type {@code simpleName} the file imports exactly (or by a wildcard). */
    Optional<Rule> record(String simpleName, Repo.Source s) {
        for (Rule r : rules) {
            if (r.shape() == Shape.RECORD
                    && r.name().equals(simpleName)
                    && s.cu().getImports().stream()
                            .anyMatch(i -> i.isAsterisk()
                                    ? i.getNameAsString().equals(r.pkg())
                                    : i.getNameAsString().equals(r.pkg() + "." + simpleName))) {
                return Optional.of(r);
            }
        }
        return Optional.empty();
    }

    private static boolean imports(Repo.Source s, String pkg) {
        return s.cu().getImports().stream().anyMatch(i -> i.getNameAsString().startsWith(pkg))
                || s.cu().getPackageDeclaration()
                        .map(p -> p.getNameAsString().startsWith(pkg))
                        .orElse(false);
    }

    /** The failure rules: library wrappers that commit the records whose handler failed. */
    List<Rule> failures() {
        return rules.stream().filter(r -> r.shape() == Shape.FAILURE).toList();
    }

    static EntryCatalogue parse(List<String> lines, String source) {
        List<Rule> rules = new ArrayList<>();
        for (DataLine line : DataLine.of(lines)) {
            int n = line.number();
            String[] c = line.columns(source, "shape", "name", "method", "package", "broker", "ack", "kind", "why");
            Shape shape;
            try {
                shape = Shape.valueOf(c[0].toUpperCase(java.util.Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException(
                        source + ":" + n
                                + ": shape must be annotation, implements, callback, receive, record or failure, not '"
                                + c[0]
                                + "'",
                        e);
            }
            String method = c[2].equals("-") ? null : c[2];
            if (method == null && (shape == Shape.IMPLEMENTS || shape == Shape.RECEIVE || shape == Shape.FAILURE)) {
                throw new IllegalStateException(
                        source + ":" + n + ": a " + shape.name().toLowerCase(java.util.Locale.ROOT)
                                + " rule names its handler method (implements), its receiver's type (receive) or the call that"
                                + " starts the consumer (failure)");
            }
            String ackText = c[5];
            if (shape == Shape.FAILURE) {
                if (!ackText.matches("UNLESS:\\w+(,\\w+)*")) {
                    throw new IllegalStateException(source + ":" + n
                            + ": a failure rule's ack column names the setters that install an error handler"
                            + " (UNLESS:processRecordErrorHandler), not '" + ackText + "'");
                }
                Set<String> setters = Set.copyOf(
                        Arrays.asList(ackText.substring("UNLESS:".length()).split(",")));
                rules.add(new Rule(shape, c[1], method, c[3], c[4], Entry.Ack.AFTER_RETURN, setters, c[6], c[7]));
                continue;
            }
            String[] ackParts = ackText.split(":", 2);
            Entry.Ack ack;
            try {
                ack = Entry.Ack.valueOf(ackParts[0]);
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException(
                        source + ":" + n + ": ack must be AFTER_RETURN, EXPLICIT:call,…, AUTO or NONE, not '" + ackText
                                + "'",
                        e);
            }
            if ((ack == Entry.Ack.EXPLICIT) != (ackParts.length == 2)) {
                throw new IllegalStateException(source + ":" + n
                        + ": EXPLICIT names the acknowledging calls after a colon (EXPLICIT:complete), and only"
                        + " EXPLICIT does, not '" + ackText + "'");
            }
            Set<String> ackCalls = ackParts.length == 2 ? Set.copyOf(Arrays.asList(ackParts[1].split(","))) : Set.of();
            rules.add(new Rule(shape, c[1], method, c[3], c[4], ack, ackCalls, c[6], c[7]));
        }
        return new EntryCatalogue(rules);
    }

    private static EntryCatalogue load() {
        return parse(Catalogue.resourceLines(RESOURCE), RESOURCE);
    }
}
