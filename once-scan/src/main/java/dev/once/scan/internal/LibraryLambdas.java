package dev.once.scan.internal;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

/**
 * The lambda-parameter catalogue ({@code lambdas.txt}): the type a library call gives to a parameter of the lambda it
 * is passed, for a parameter whose type the code leaves to inference ({@code Flux.create(emitter -> …)} gives a {@code
 * FluxSink}).
 */
final class LibraryLambdas {

    static final String RESOURCE = "/dev/once/scan/lambdas.txt";

    private static final LibraryLambdas DEFAULT = parse(Catalogue.resourceLines(RESOURCE), RESOURCE);

    record Rule(Pattern owner, Pattern method, int parameter, String type) {}

    private final List<Rule> rules;
    private final Map<String, Optional<String>> known = new ConcurrentHashMap<>();

    private LibraryLambdas(List<Rule> rules) {
        this.rules = List.copyOf(rules);
    }

    static LibraryLambdas get() {
        return DEFAULT;
    }

    private final Map<String, Boolean> methods = new ConcurrentHashMap<>();

    /**
     * Whether some line names this method: asked first, so the receiver of every other call given a lambda (a
     * stream's map, a repository's own callback) is never typed for it.
     */
    boolean names(String method) {
        return methods.computeIfAbsent(
                method, m -> rules.stream().anyMatch(r -> r.method().matcher(m).matches()));
    }

    /** The type of parameter {@code index} of a lambda given to {@code method} on {@code owner}, if a line says. */
    Optional<String> parameter(String owner, String method, int index) {
        return known.computeIfAbsent(
                owner + '\0' + method + '\0' + index,
                k -> rules.stream()
                        .filter(r -> r.parameter() == index
                                && r.owner().matcher(owner).matches()
                                && r.method().matcher(method).matches())
                        .map(Rule::type)
                        .findFirst());
    }

    static LibraryLambdas parse(List<String> lines, String source) {
        List<Rule> rules = new ArrayList<>();
        for (DataLine line : DataLine.of(lines)) {
            String[] c = line.columns(source, "owner", "method", "parameter", "type");
            if (!c[2].matches("\\d")) {
                throw new IllegalStateException(source + ":" + line.number()
                        + ": parameter must be an index (0 for the first), not '" + c[2] + "'");
            }
            if (!c[3].matches("[A-Z]\\w*")) {
                throw new IllegalStateException(source + ":" + line.number()
                        + ": type must be a type's simple name (FluxSink), not '" + c[3] + "'");
            }
            rules.add(new Rule(Pattern.compile(c[0]), Pattern.compile(c[1]), Integer.parseInt(c[2]), c[3]));
        }
        return new LibraryLambdas(rules);
    }
}
