package dev.once.testkit.broker;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Wraps the consumer handed to an adapter and counts what the adapter made of the broker:
 * every delivery it passed in and every outcome that came back, per event id. Shared by all
 * consumers of one contract case, so restarts do not reset it. Thread-safe.
 */
final class CountingConsumer implements IdempotentConsumer {

    private final IdempotentConsumer delegate;
    private final AtomicLong delivered = new AtomicLong();
    private final Map<Status, AtomicLong> byStatus = new EnumMap<>(Status.class);
    private final Map<String, List<Status>> outcomes = new ConcurrentHashMap<>();
    private final Map<String, AtomicLong> received = new ConcurrentHashMap<>();

    CountingConsumer(IdempotentConsumer delegate) {
        this.delegate = delegate;
        for (Status s : Status.values()) {
            byStatus.put(s, new AtomicLong());
        }
    }

    @Override
    public String consumer() {
        return delegate.consumer();
    }

    @Override
    public Inbox inbox() {
        return delegate.inbox();
    }

    @Override
    public Outcome process(Delivery delivery) {
        receive(delivery);
        return record(delegate.process(delivery));
    }

    @Override
    public List<Outcome> processBatch(List<Delivery> deliveries) {
        deliveries.forEach(this::receive);
        List<Outcome> result = delegate.processBatch(deliveries);
        result.forEach(this::record);
        return result;
    }

    private void receive(Delivery d) {
        delivered.incrementAndGet();
        received.computeIfAbsent(d.eventId(), k -> new AtomicLong()).incrementAndGet();
    }

    private Outcome record(Outcome o) {
        byStatus.get(o.status()).incrementAndGet();
        outcomes.computeIfAbsent(o.eventId(), k -> Collections.synchronizedList(new ArrayList<>()))
                .add(o.status());
        return o;
    }

    long delivered() {
        return delivered.get();
    }

    long received(String eventId) {
        AtomicLong n = received.get(eventId);
        return n == null ? 0 : n.get();
    }

    long count(Status status) {
        return byStatus.get(status).get();
    }

    /** Outcomes reported for one event id, in the order they came back. */
    List<Status> outcomes(String eventId) {
        List<Status> list = outcomes.get(eventId);
        if (list == null) {
            return List.of();
        }
        synchronized (list) {
            return List.copyOf(list);
        }
    }
}
