package dev.once.cli.demo;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Which event each fault is aimed at, and whether a lane has already suffered it. A fault fires
 * once per lane, on the first batch that holds its event, so both lanes get the same fault and
 * the redelivery it causes is processed normally. Thread-safe.
 */
final class Faults {

    private final Map<String, Fault> planned = new ConcurrentHashMap<>();
    private final Set<String> fired = ConcurrentHashMap.newKeySet();
    private final Map<String, CyclicBarrier> barriers = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> arrivals = new ConcurrentHashMap<>();

    void plan(String eventId, Fault fault) {
        planned.put(eventId, fault);
    }

    /** The fault aimed at an event, or null. */
    Fault of(String eventId) {
        return planned.get(eventId);
    }

    /** The first event of the batch the fault is aimed at and the lane has not suffered yet; marks it suffered. */
    String take(String lane, Fault fault, List<String> eventIds) {
        for (String id : eventIds) {
            if (planned.get(id) == fault && fired.add(lane + "/" + id)) {
                return id;
            }
        }
        return null;
    }

    /**
     * For {@link Fault#CONCURRENT}: the first two workers of a lane holding the event wait for each
     * other here so that their transactions really overlap. Waits at most {@code timeoutMillis}
     * (less than max.poll.interval.ms, so waiting never costs the group membership); a third
     * arrival, a redelivery, does not wait.
     */
    void meet(String lane, List<String> eventIds, long timeoutMillis) throws InterruptedException {
        for (String id : eventIds) {
            if (planned.get(id) != Fault.CONCURRENT) {
                continue;
            }
            String k = lane + "/" + id;
            if (arrivals.computeIfAbsent(k, x -> new AtomicInteger()).incrementAndGet() > 2) {
                continue;
            }
            try {
                barriers.computeIfAbsent(k, x -> new CyclicBarrier(2)).await(timeoutMillis, TimeUnit.MILLISECONDS);
            } catch (BrokenBarrierException | TimeoutException e) {
                // One worker holds both copies (as right after a restart): they run one after the other.
                return;
            }
        }
    }
}
