package dev.once.testkit.broker;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome.Status;
import dev.once.RetryableException;
import dev.once.testkit.broker.ScriptedHandler.Behaviour;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.IntFunction;
import org.awaitility.core.ConditionTimeoutException;

/**
 * The world of one chain of a broker adapter's state machine ({@link BrokerChain}): what every broker's
 * has, the adapter's subclass adds its broker, its observers and its oracle. A world has its own
 * number {@link #n}, effect table ({@code effect_<n>}), event ids ({@code w<n>-e<k>}) and copies
 * ({@code <event id>#<k>}, in the {@link ScriptedHandler#COPY_HEADER} header), so that a chain jqwik's
 * bounded shrinking left running in the background shares nothing with the next one; the subclass
 * gives it a queue, stream or topic of its own too.
 *
 * <p>The processes: {@link #a}, always there, and a second one {@link #b} the chain starts and stops;
 * before every move (and while draining) {@link #supervise} replaces the dead ones, as a supervisor
 * restarts a crashed service.
 *
 * <p>Thread-safety: the moves run on the chain's thread; {@link #violations}, {@link #processed} and
 * the handler's scripts take entries from the processes' threads.
 *
 * @param <P> the adapter's process
 * @param <R> what the adapter records of each delivery its processes' outcome listeners report
 */
public abstract class BrokerWorld<P extends BrokerProcess, R extends BrokerWorld.Handled> implements AutoCloseable {

    /** What every adapter records of a processed delivery, with its own detail beside. */
    public interface Handled {
        /** The published copy the delivery is of ({@code <event id>#<k>}). */
        String copy();

        String eventId();

        boolean redelivered();

        Status status();
    }

    private static final AtomicInteger worlds = new AtomicInteger();

    /** This world's number, in its event ids and table and queue names. */
    public final int n = worlds.incrementAndGet();

    public final TestDatabase db;
    /** The engine's consumer name of every process of this world. */
    public final String consumerName;

    public final ScriptedHandler handler;
    public final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    /** The moves as they ran, with what the world noted between them: every assertion message names them. */
    public final List<String> moves = new ArrayList<>();
    /** The event ids published, in order. */
    public final List<String> events = new ArrayList<>();
    /** Copy to event id, of every copy the broker took, in the order published. */
    public final Map<String, String> copies = new LinkedHashMap<>();
    /** The deliveries processed, as the processes' outcome listeners reported them. */
    public final List<R> processed = new CopyOnWriteArrayList<>();
    /** What an observer saw go wrong on a process's thread; {@link #check} fails on the first. */
    public final List<String> violations = new CopyOnWriteArrayList<>();

    private final Inbox inbox;
    private final long slowMillis;
    /** The slow holders {@link #publishHeld} started, each until it rolled back. */
    private final List<Thread> holders = new CopyOnWriteArrayList<>();

    /** The first process, always running. */
    protected P a;
    /** The second process, or null. */
    protected P b;

    private int incarnations;

    /**
     * Makes the world's effect table afresh.
     *
     * @param consumer   the engine's consumer name, from the world's number
     * @param slowMillis how long a {@link Behaviour#SLOW} call takes, unless {@link #slow} says otherwise
     */
    protected BrokerWorld(TestDatabase db, IntFunction<String> consumer, long slowMillis) {
        this.db = db;
        this.consumerName = consumer.apply(n);
        this.slowMillis = slowMillis;
        this.handler = new ScriptedHandler("effect_" + n, this::slow);
        handler.createTable(db.dataSource());
        this.inbox = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer(consumerName)
                .handler((d, tx) -> {})
                .build()
                .inbox();
    }

    /** What a {@link Behaviour#SLOW} call waits for before it writes its effect: {@code slowMillis} by default. */
    protected void slow(Delivery d) throws InterruptedException {
        Thread.sleep(slowMillis);
    }

    // ---- processes

    /**
     * A new process.
     *
     * @param name   {@code a<k>} or {@code b<k>}, k counting the world's processes
     * @param second whether it is {@link #b}
     */
    protected abstract P start(String name, boolean second) throws Exception;

    /** Starts the first process; the subclass's constructor calls it once its broker is ready. */
    protected final void startA() {
        a = started("a", false);
    }

    /** The move "second process starts". */
    public void startB() {
        b = started("b", true);
    }

    /** The move "second process stops". */
    public void stopB() {
        b.close();
        b = null;
    }

    /** Whether the second process runs (the precondition of starting or stopping it). */
    public final boolean hasB() {
        return b != null;
    }

    /** The move "crash in the ack gap" of process {@code a} or {@code b} (a when there is no b). */
    public void armCrash(String which) {
        (which.equals("a") || b == null ? a : b).armCrash();
    }

    /** The supervisor: a process that died is replaced by a new one (a new incarnation of a or b). */
    public void supervise() {
        if (a.dead()) {
            moves.add("(a restarted" + why(a) + ")");
            retire(a);
            a = started("a", false);
        }
        if (b != null && b.dead()) {
            moves.add("(b restarted" + why(b) + ")");
            retire(b);
            b = started("b", true);
        }
    }

    /** What becomes of a dead process the supervisor replaces: closed, by default. */
    protected void retire(P dead) {
        dead.close();
    }

    private static String why(BrokerProcess p) {
        return p.failure().map(f -> ": " + f).orElse("");
    }

    private P started(String role, boolean second) {
        String name = role + incarnations++;
        try {
            return start(name, second);
        } catch (Exception e) {
            throw new IllegalStateException("starting process " + name, e);
        }
    }

    // ---- the moves' events

    /** A new event: its id, its handler's script for its first calls. */
    protected final String newEvent(List<Behaviour> script) {
        String id = "w" + n + "-e" + events.size();
        events.add(id);
        handler.script(id, script);
        return id;
    }

    /** A published event, for a producer retry: {@code pick} modulo their number. */
    protected final String publishedEvent(int pick) {
        return events.get(pick % events.size());
    }

    /** The name of the next copy of {@code eventId}: its copies the broker took so far, counted. */
    protected final String nextCopy(String eventId) {
        return eventId + "#"
                + copies.keySet().stream()
                        .filter(c -> c.startsWith(eventId + "#"))
                        .count();
    }

    /**
     * The move {@link BrokerChain#HELD}: another process's engine (none of this world's consumers) claims a new
     * event and holds the claim in its open transaction until deliveries of the event met it ({@code
     * IN_PROGRESS}) {@code times} times, at most for {@code bound}, then fails retryably and rolls back; the event
     * is published ({@code send}, one copy) once the claim is held. So a live process meets a slow holder, each of
     * its threads alike: whatever the broker counts for a delivery settled meanwhile (a nack, a requeue, a
     * redelivery) is spent on nothing, and once the holder has rolled back the event must still be applied. With
     * {@code times} one more than the broker's deliveries allow, a consumer that hands such a delivery back loses
     * or dead-letters the event while the holder still holds. The holder's delivery carries the payload every
     * adapter's world publishes ({@code "payload of <event id>"}); it reports to no listener or meter.
     */
    public final void publishHeld(Consumer<String> send, int times, Duration bound) {
        String eventId = newEvent(List.of());
        CountDownLatch holding = new CountDownLatch(1);
        IdempotentConsumer holder = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer(consumerName)
                .handler((d, tx) -> {
                    holding.countDown();
                    try {
                        await().atMost(bound)
                                .pollInterval(Duration.ofMillis(20))
                                .until(() -> met(eventId) >= times);
                    } catch (ConditionTimeoutException e) {
                        // held as long as it may
                    }
                    throw new RetryableException("the slow holder of " + eventId + " fails: it rolls back");
                })
                .build();
        Thread t = new Thread(
                () -> holder.process(Delivery.builder(eventId)
                        .payload("payload of " + eventId)
                        .build()),
                "holder-" + eventId);
        t.setDaemon(true);
        t.start();
        holders.add(t);
        try {
            assertThat(holding.await(30, TimeUnit.SECONDS))
                    .as("the holder of %s holds its claim", eventId)
                    .isTrue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while " + eventId + "'s holder claimed it", e);
        }
        send.accept(eventId);
    }

    /** How often a delivery of {@code eventId} met its claim held by another ({@code IN_PROGRESS}). */
    public final long met(String eventId) {
        return processed.stream()
                .filter(p -> p.eventId().equals(eventId) && p.status() == Status.IN_PROGRESS)
                .count();
    }

    /** How many slow holders {@link #publishHeld} started. */
    public final int holders() {
        return holders.size();
    }

    /** Waits until the slow holders of {@link #publishHeld} have rolled back (each within its bound). */
    public final void awaitHolders() throws InterruptedException {
        for (Thread t : holders) {
            t.join(Duration.ofMinutes(1).toMillis());
        }
    }

    // ---- the oracle

    /** Which of {@code eventIds} have their claim committed, as another connection sees the inbox. */
    public final Set<String> claimed(List<String> eventIds) {
        try (Connection c = db.dataSource().getConnection()) {
            return inbox.claimedAmong(c, consumerName, eventIds);
        } catch (SQLException e) {
            violations.add("cannot read the inbox: " + e);
            return new HashSet<>(eventIds);
        }
    }

    /** Whether the claim of {@code eventId} is committed (what an acknowledgement must come after). */
    public final boolean claimCommitted(String eventId) {
        return claimed(List.of(eventId)).contains(eventId);
    }

    /**
     * Safety, at any moment (after every move): no violation seen, no event's effect applied twice,
     * no event reported applied twice. The subclass adds what its broker's settlements must agree with.
     */
    public void check() {
        assertThat(violations).as("violations after %s", moves).isEmpty();
        handler.effects(db.dataSource())
                .forEach((id, count) -> assertThat(count)
                        .as("effects of %s after %s", id, moves)
                        .isLessThanOrEqualTo(1));
        Map<String, Long> applied = new HashMap<>();
        for (R p : processed) {
            if (p.status() == Status.APPLIED) {
                applied.merge(p.eventId(), 1L, Long::sum);
            }
        }
        applied.forEach((id, count) -> assertThat(count)
                .as("%s reported applied, after %s: %s", id, moves, processed)
                .isEqualTo(1));
    }

    /** How many deliveries of {@code eventId} were reported applied. */
    public final long applied(String eventId) {
        return processed.stream()
                .filter(p -> p.eventId().equals(eventId) && p.status() == Status.APPLIED)
                .count();
    }

    /** After the chain: waits until the broker has settled every copy, then checks the end state. */
    public abstract void drainAndCheck() throws Exception;
}
