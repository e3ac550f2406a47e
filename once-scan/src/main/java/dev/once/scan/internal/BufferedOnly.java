package dev.once.scan.internal;

import dev.once.scan.Location;
import java.util.List;
import java.util.Optional;

/**
 * A listener that its container acknowledges when it returns (Spring's Kafka, Rabbit, JMS and Stream containers, a
 * library's loop) and that only puts the message in an in-process buffer (a concurrent queue another thread takes it
 * from): the container acknowledges the delivery while the work is still to be done in memory. Nothing waits for
 * the buffer to drain before the listener returns.
 */
final class BufferedOnly {

    /**
     * How effects.txt's queue line names the hand-off: a queue another thread takes from is a worker's backlog. A Flux
     * sink a listener emits into more often feeds live subscribers (server-sent events, a web socket), which keep
     * nothing and want nothing redelivered.
     */
    private static final String QUEUE = "puts it on a queue";

    private BufferedOnly() {}

    /**
     * A listener the container or library calls with each message and acknowledges when it returns. A loop that pulls
     * (a poll, a pull, a receive) decides its own commits, often later and on another thread once the buffer's
     * drain reports back: its acks are read where it makes them.
     */
    static boolean pushed(Entry e) {
        return !e.kind.matches("(?i).*\\b(loop|pull|poll|receive\\w*)\\b.*");
    }

    /** The first buffer the handler's own thread puts the message in with no wait for its drain after it. */
    static Optional<Event> find(List<Event> events) {
        for (Event b : events) {
            if (b.kind() != Event.Kind.BUFFER
                    || b.handedOff() != null
                    || !b.what().startsWith(QUEUE)
                    || b.keyed()) {
                continue;
            }
            // a wait after it drains the buffer first; an ack the code makes after it is judged where it is made; an
            // effect the handler's thread makes after it is work done before the return, not only a buffer
            boolean drainedOrAcked = events.stream()
                    .anyMatch(w -> (w.kind() == Event.Kind.WAIT
                                    || w.kind() == Event.Kind.ACK
                                    || w.kind() == Event.Kind.EFFECT && w.handedOff() == null)
                            && w.seq() > b.seq()
                            && !w.exclusiveWith(b));
            if (!drainedOrAcked) {
                return Optional.of(b);
            }
        }
        return Optional.empty();
    }

    /**
     * Where a reader of the listener sees the hand-off: the listener's own call that led to the buffer (the second step
     * of the path; the first is the entry point), or the buffer itself when the listener makes it.
     */
    static Location where(Event b) {
        return b.path().size() > 1 ? b.path().get(1).location() : b.location();
    }
}
