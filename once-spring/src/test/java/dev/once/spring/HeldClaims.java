package dev.once.spring;

import dev.once.Delivery;
import dev.once.Outcome;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The fixture of once-spring's tests whose listener meets a claim another process holds ({@link OtherProcessClaim}):
 * a bean beside {@link JdbcListenerBeans}, whose {@link OnceSpring} it makes give up each claim's wait for a holder
 * after {@link #LOCK_TIMEOUT} (IN_PROGRESS: one outcome per try that met the holder) and tell it every outcome, kept
 * here by event, in order.
 */
final class HeldClaims {

    static final Duration LOCK_TIMEOUT = Duration.ofMillis(200);

    /** One outcome the listener heard, with the delivery attempt it came from (a redelivery's is higher). */
    record Heard(Outcome.Status status, int attempt) {
        @Override
        public String toString() {
            return status + "@attempt" + attempt;
        }
    }

    private final Map<String, List<Heard>> heard = new ConcurrentHashMap<>();
    // when a try first met each event's holder (System.nanoTime())
    private final Map<String, Long> firstMet = new ConcurrentHashMap<>();

    void outcome(Delivery d, Outcome o) {
        if (o.status() == Outcome.Status.IN_PROGRESS) {
            firstMet.putIfAbsent(d.eventId(), System.nanoTime());
        }
        heard.computeIfAbsent(d.eventId(), k -> new CopyOnWriteArrayList<>()).add(new Heard(o.status(), d.attempt()));
    }

    /** Every outcome heard of {@code eventId}, in order, with its attempt. */
    List<Heard> heard(String eventId) {
        return heard.getOrDefault(eventId, List.of());
    }

    List<Outcome.Status> statuses(String eventId) {
        return heard(eventId).stream().map(Heard::status).toList();
    }

    List<Integer> attempts(String eventId) {
        return heard(eventId).stream().map(Heard::attempt).toList();
    }

    /** How long since a try first met {@code eventId}'s holder; zero before. */
    Duration metFor(String eventId) {
        Long since = firstMet.get(eventId);
        return since == null ? Duration.ZERO : Duration.ofNanos(System.nanoTime() - since);
    }

    /** How many of the listener's tries met {@code eventId}'s holder and gave up. */
    long inProgress(String eventId) {
        return heard(eventId).stream()
                .filter(h -> h.status() == Outcome.Status.IN_PROGRESS)
                .count();
    }
}
