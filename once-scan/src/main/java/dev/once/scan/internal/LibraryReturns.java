package dev.once.scan.internal;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

/**
 * The return-type catalogue ({@code dev/once/scan/returns.txt}): what a library's factory or fluent call hands out
 * ({@code Session.createProducer} a {@code MessageProducer}, Pulsar's {@code Producer.newMessage} a {@code
 * TypedMessageBuilder}). The scan reads no library's code, so without it a call made on what another library call
 * returned has a receiver of unknown type, and every rule that goes by the receiver's type passes it by. Kept as data so
 * a client's fluent API is a line, not a rule.
 */
final class LibraryReturns {

    static final String RESOURCE = "/dev/once/scan/returns.txt";

    private static final LibraryReturns DEFAULT = parse(Catalogue.resourceLines(RESOURCE), RESOURCE);

    record Rule(Pattern owner, Pattern method, String returns) {}

    private final List<Rule> rules;
    /** By owner and method: asked for nearly every chained call the trace walks. */
    private final Map<String, Optional<String>> known = new ConcurrentHashMap<>();

    private LibraryReturns(List<Rule> rules) {
        this.rules = List.copyOf(rules);
    }

    static LibraryReturns get() {
        return DEFAULT;
    }

    /** The type a call of {@code method} on a library receiver of type {@code owner} returns, if a line says. */
    Optional<String> returns(String owner, String method) {
        return known.computeIfAbsent(
                owner + '\0' + method,
                k -> rules.stream()
                        .filter(r -> r.owner().matcher(owner).matches()
                                && r.method().matcher(method).matches())
                        .map(Rule::returns)
                        .findFirst());
    }

    static LibraryReturns parse(List<String> lines, String source) {
        List<Rule> rules = new ArrayList<>();
        for (DataLine line : DataLine.of(lines)) {
            String[] c = line.columns(source, "owner", "method", "returns");
            if (!c[2].matches("[A-Z]\\w*")) {
                throw new IllegalStateException(source + ":" + line.number()
                        + ": returns must be a type's simple name (MessageProducer), not '" + c[2] + "'");
            }
            rules.add(new Rule(Pattern.compile(c[0]), Pattern.compile(c[1]), c[2]));
        }
        return new LibraryReturns(rules);
    }
}
