package dev.once.scan;

import java.util.List;

/**
 * One problem found in one consumer.
 *
 * @param rule        the check
 * @param level       how serious
 * @param message     what happens, in this code
 * @param fix         the fix in one line, naming the {@code once} API
 * @param location    where to fix it
 * @param consumer    id of the {@link Consumer} it belongs to
 * @param blast       what the effect can break, null when no effect is involved
 * @param path        entry point to effect, each hop with its location
 * @param related     the ack site, the effect, the transaction or setting
 * @param fingerprint stable across line moves: rule, file, enclosing member, code of the line
 * @param status      {@code new} or {@code existing} in pull-request mode, null otherwise
 */
public record Finding(
        Rule rule,
        Level level,
        String message,
        String fix,
        Location location,
        String consumer,
        Blast blast,
        List<Step> path,
        List<Related> related,
        String fingerprint,
        String status) {

    public Finding {
        path = List.copyOf(path);
        related = List.copyOf(related);
    }

    /** This finding marked {@code new} or {@code existing}. */
    public Finding withStatus(String s) {
        return new Finding(rule, level, message, fix, location, consumer, blast, path, related, fingerprint, s);
    }

    /** The weight of this finding in the index: level factor times blast weight (see {@link Scoring}). */
    public double weight(Blast consumerBlast) {
        Blast b = blast != null ? blast : consumerBlast;
        return level.factor() * (b == null ? 1 : b.weight());
    }
}
