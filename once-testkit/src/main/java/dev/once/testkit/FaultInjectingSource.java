package dev.once.testkit;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * An in-memory at-least-once source that behaves as a broker does in the ack gap: a message
 * stays until it is acknowledged, and a lost acknowledgement means it is delivered again, marked
 * redelivered. Faults are planned per event id, so a test says exactly where the crash happens.
 * Not thread-safe: one test thread drives it.
 */
public final class FaultInjectingSource {

    /** Redeliveries of one message before the source gives up and records it as stuck. */
    public static final int MAX_ATTEMPTS = 20;

    private final IdempotentConsumer consumer;
    private final Deque<Delivery> queue = new ArrayDeque<>();
    private final Set<String> loseAckOnce = ConcurrentHashMap.newKeySet();
    private final List<Outcome> outcomes = new ArrayList<>();
    private final List<Delivery> deadLettered = new ArrayList<>();
    private final List<Delivery> stuck = new ArrayList<>();

    public FaultInjectingSource(IdempotentConsumer consumer) {
        this.consumer = consumer;
    }

    /** Publishes a message (publishing the same event twice is a producer double publish). */
    public FaultInjectingSource publish(Delivery delivery) {
        queue.addLast(delivery);
        return this;
    }

    /**
     * The next time {@code eventId} is processed, its transaction commits but the
     * acknowledgement is lost, as when the consumer crashes between commit and ack.
     */
    public FaultInjectingSource crashInAckGap(String eventId) {
        loseAckOnce.add(eventId);
        return this;
    }

    /** Delivers until every message is acknowledged, dead-lettered or stuck; returns every outcome in order. */
    public List<Outcome> drain() {
        while (!queue.isEmpty()) {
            Delivery d = queue.removeFirst();
            Outcome o = consumer.process(d);
            outcomes.add(o);
            boolean ackLost = loseAckOnce.remove(d.eventId());
            if (o.shouldAcknowledge() && !ackLost) {
                continue;
            }
            if (o.status() == Outcome.Status.FAILED_PERMANENT && !ackLost) {
                deadLettered.add(d);
            } else if (d.attempt() >= MAX_ATTEMPTS) {
                stuck.add(d);
            } else {
                queue.addLast(d.redelivery());
            }
        }
        return List.copyOf(outcomes);
    }

    public List<Outcome> outcomes() {
        return List.copyOf(outcomes);
    }

    public List<Delivery> deadLettered() {
        return List.copyOf(deadLettered);
    }

    /** Messages still unacknowledged after {@value #MAX_ATTEMPTS} attempts. */
    public List<Delivery> stuck() {
        return List.copyOf(stuck);
    }
}
