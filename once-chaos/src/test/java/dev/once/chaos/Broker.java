package dev.once.chaos;

import dev.once.Delivery;
import java.util.Collection;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The broker of the fault tests, in memory: at-least-once, like the real ones. A delivery that
 * is not acknowledged goes back to the end of the queue as a redelivery; the producer's duplicates
 * are separate deliveries of the same event id. The test's oracle is what it published, never
 * what the consumer reported.
 */
final class Broker {

    private final LinkedBlockingQueue<Delivery> queue = new LinkedBlockingQueue<>();
    private final Set<String> published = ConcurrentHashMap.newKeySet();
    private final Set<String> acknowledged = ConcurrentHashMap.newKeySet();
    private final AtomicLong acks = new AtomicLong();
    private final AtomicLong deliveries = new AtomicLong();
    private final AtomicLong redeliveries = new AtomicLong();
    private final AtomicLong inFlight = new AtomicLong();

    void publish(Delivery d) {
        published.add(d.eventId());
        inFlight.incrementAndGet();
        queue.add(d);
    }

    /** The next delivery, or null after {@code millis} without one. */
    Delivery poll(long millis) throws InterruptedException {
        Delivery d = queue.poll(millis, TimeUnit.MILLISECONDS);
        if (d != null) {
            deliveries.incrementAndGet();
        }
        return d;
    }

    void ack(Delivery d) {
        acknowledged.add(d.eventId());
        acks.incrementAndGet();
        inFlight.decrementAndGet();
    }

    void redeliver(Delivery d) {
        redeliveries.incrementAndGet();
        queue.add(d.redelivery());
    }

    /** True when every published delivery was acknowledged. */
    boolean drained() {
        return inFlight.get() == 0;
    }

    long acks() {
        return acks.get();
    }

    long deliveries() {
        return deliveries.get();
    }

    long redeliveries() {
        return redeliveries.get();
    }

    Collection<String> published() {
        return published;
    }

    Collection<String> acknowledged() {
        return acknowledged;
    }
}
