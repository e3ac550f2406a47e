package dev.once.testkit.broker;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.IdempotentConsumer;
import dev.once.Outcome.Status;
import dev.once.testsupport.ChildJvm;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.concurrent.Callable;
import org.awaitility.Awaitility;
import org.awaitility.core.ConditionTimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;

/**
 * The guarantee every broker adapter must give, whatever the broker does: each event's effect
 * is applied exactly once. Runs against the real broker and real PostgreSQL; each case gets a
 * fresh schema and a fresh destination, asserts the ledger's end state and prints
 * {@code attempted / delivered / duplicates absorbed / lost / applied twice}.
 *
 * <p>An adapter extends this class and implements a small SPI:
 *
 * <pre>{@code
 * class SqsBrokerContractTest extends BrokerContract {
 *     protected String createDestination(String name) { return createQueue(name); }
 *     protected void publish(String queue, List<Event> events) { ... one message per event ... }
 *     protected AutoCloseable startConsumer(String queue, IdempotentConsumer c, int batchSize) {
 *         return SqsConsumer.builder().client(sqs).queueUrl(queue).consumer(c).maxMessages(batchSize).build().start();
 *     }
 * }
 * }</pre>
 *
 * <p>The crash case starts {@link AckGapChild} in a child JVM, which instantiates the subclass
 * with its no-argument constructor and calls {@link #startConsumer} there; whatever the
 * subclass needs to reach the broker must therefore work in a fresh JVM, given
 * {@link #childEnvironment()}.
 *
 * <p>The cases are {@code final}: the contract is the same for every broker.
 */
public abstract class BrokerContract {

    /** For a subclass: one per broker adapter under test. */
    protected BrokerContract() {}

    /** The consumer name every case claims under, in this JVM and in the crash child. */
    public static final String CONSUMER = "ledger";

    /** Events in {@link #manyEventsWithDuplicatesAndRestarts()} unless {@link #manyEvents()} says otherwise. */
    public static final int DEFAULT_MANY_EVENTS = 10_000;

    /**
     * One message to publish. {@code copy} marks a second message of an event already published,
     * which the broker must not be able to deduplicate (a re-send after its dedup window, or from
     * a second producer): the consumer has to absorb it.
     */
    public record Event(String eventId, String payload, boolean copy) {
        public Event {
            Objects.requireNonNull(eventId, "eventId");
            Objects.requireNonNull(payload, "payload");
        }

        static Event of(String eventId, long amount) {
            return new Event(eventId, Long.toString(amount), false);
        }

        Event asCopy() {
            return new Event(eventId, payload, true);
        }
    }

    // ---- SPI -------------------------------------------------------------------------------

    /**
     * Creates a destination (queue, stream, topic) of its own for one case and returns what
     * {@link #publish} and {@link #startConsumer} take to address it.
     *
     * @param name unique per case and run: {@code [a-z0-9-]}, at most 60 characters
     */
    protected abstract String createDestination(String name) throws Exception;

    /** Removes what {@link #createDestination} made; called after each case. Default: nothing. */
    protected void deleteDestination(String destination) throws Exception {}

    /**
     * Publishes the events in order, one broker message each, with the event id where the
     * adapter's consumer reads it. Events not marked {@link Event#copy()} go through the
     * adapter's own publisher, with its deduplication (FIFO dedup id, {@code Nats-Msg-Id}).
     */
    protected abstract void publish(String destination, List<Event> events) throws Exception;

    /**
     * Starts the adapter's consumer on {@code destination}, running {@code consumer}, and
     * returns a handle whose {@code close()} stops it. Several may run at once on one destination
     * (competing consumers) and any may be closed and replaced at any time.
     *
     * @param batchSize how many messages the consumer may hold unacknowledged at once (prefetch,
     *                  receive batch, fetch batch); 1 in the cases that need a second delivery
     *                  of one event to reach a second consumer
     */
    protected abstract AutoCloseable startConsumer(String destination, IdempotentConsumer consumer, int batchSize)
            throws Exception;

    /** Environment for the crash child JVM (an endpoint of an in-process broker). Default: none. */
    protected Map<String, String> childEnvironment() {
        return Map.of();
    }

    /** True when publishing the same event twice through the adapter's publisher yields one message. */
    protected boolean publisherDeduplicates() {
        return false;
    }

    /** Batch size of the bulk cases; default 10. */
    protected int batchSize() {
        return 10;
    }

    /** Events in the bulk case; default {@value #DEFAULT_MANY_EVENTS}. */
    protected int manyEvents() {
        return DEFAULT_MANY_EVENTS;
    }

    /** How long any one wait of a case may take before it fails; default 2 minutes. */
    protected Duration patience() {
        return Duration.ofMinutes(2);
    }

    // ---- per-case state ----------------------------------------------------------------------

    private TestDatabase database;
    private String destination;
    private String caseName;
    private LedgerHandler handler;
    private CountingConsumer counting;
    private final Deque<AutoCloseable> running = new ArrayDeque<>();
    private long attempted;
    private long elsewhere;

    @BeforeEach
    final void prepareCase(TestInfo info) throws Exception {
        caseName = info.getTestMethod().map(m -> m.getName()).orElse("case");
        database = TestPostgres.shared().freshDatabase();
        database.execute(LedgerHandler.CREATE);
        handler = new LedgerHandler();
        counting = new CountingConsumer(IdempotentConsumer.builder()
                .dataSource(database.dataSource())
                .consumer(CONSUMER)
                .handler(handler)
                .build());
        String name = (abbreviation(caseName) + "-" + Long.toString(System.nanoTime(), 36) + "-"
                        + ProcessHandle.current().pid())
                .toLowerCase(java.util.Locale.ROOT);
        destination = createDestination(name);
    }

    @AfterEach
    final void finishCase() throws Exception {
        try {
            while (!running.isEmpty()) {
                running.pop().close();
            }
            if (destination != null) {
                deleteDestination(destination);
            }
        } finally {
            if (database != null) {
                database.close();
            }
        }
    }

    // ---- the cases ---------------------------------------------------------------------------

    @Test
    final void sequentialDuplicateIsAbsorbed() throws Exception {
        Event e = Event.of("evt-1", 100);
        send(List.of(e));
        start(1);
        waitUntil("evt-1 applied", () -> counting.outcomes("evt-1").contains(Status.APPLIED));
        send(List.of(e.asCopy()));
        waitUntil(
                "the second message of evt-1 absorbed as a duplicate",
                () -> counting.outcomes("evt-1").contains(Status.DUPLICATE));
        assertLedger(List.of(e));
    }

    @Test
    final void crashBetweenCommitAndAckIsAbsorbed() throws Exception {
        Event e = Event.of("evt-1", 100);
        send(List.of(e));
        String url = TestPostgres.shared().jdbcUrl();
        url += (url.contains("?") ? "&" : "?") + "currentSchema=" + database.name();
        try (ChildJvm child =
                ChildJvm.start(AckGapChild.class, childEnvironment(), getClass().getName(), url, destination)) {
            child.awaitLineStartingWith(AckGapChild.COMMITTED, patience());
            child.kill();
        }
        assertThat(rows()).as("the child committed evt-1 before it was killed").containsEntry("evt-1", 1);
        start(1);
        waitUntil(
                "evt-1, never acknowledged by the killed consumer, redelivered and absorbed",
                () -> counting.outcomes("evt-1").contains(Status.DUPLICATE));
        assertThat(counting.outcomes("evt-1"))
                .as("outcomes of evt-1 after the crash")
                .doesNotContain(Status.APPLIED);
        elsewhere = 1; // the child's delivery; this JVM saw only the redelivery
        assertLedger(List.of(e));
    }

    @Test
    final void concurrentDuplicateAppliesOnce() throws Exception {
        Event e = Event.of("evt-1", 100);
        handler.gate("evt-1");
        start(1);
        start(1);
        send(List.of(e));
        assertThat(handler.awaitEntered(patience()))
                .as("evt-1 reached the handler")
                .isTrue();
        send(List.of(e.asCopy()));
        try {
            waitUntil(
                    "the second message of evt-1 delivered while the first holds the claim",
                    () -> counting.received("evt-1") >= 2);
        } finally {
            handler.release();
        }
        waitUntil(
                "both messages of evt-1 settled (applied once, the other absorbed)",
                () -> counting.outcomes("evt-1").contains(Status.APPLIED)
                        && counting.outcomes("evt-1").contains(Status.DUPLICATE));
        assertThat(counting.outcomes("evt-1"))
                .as("outcomes of two concurrent deliveries of evt-1")
                .containsOnlyOnce(Status.APPLIED)
                .doesNotContain(Status.FAILED_PERMANENT, Status.FAILED_RETRYABLE);
        assertLedger(List.of(e));
    }

    @Test
    final void producerDoublePublishAppliesOnce() throws Exception {
        Event e1 = Event.of("evt-1", 100);
        Event e2 = Event.of("evt-2", 7);
        send(List.of(e1, e1, e2));
        start(batchSize());
        long expected = publisherDeduplicates() ? 2 : 3;
        waitUntil(
                expected + " deliveries settled",
                () -> settled() >= expected && rows().keySet().containsAll(List.of("evt-1", "evt-2")));
        if (!publisherDeduplicates()) {
            assertThat(counting.outcomes("evt-1"))
                    .as("outcomes of evt-1 published twice")
                    .contains(Status.DUPLICATE);
        }
        assertLedger(List.of(e1, e2));
    }

    @Test
    final void poisonMessageDoesNotBlockTheRest() throws Exception {
        List<Event> events = new ArrayList<>();
        events.add(new Event("poison-1", LedgerHandler.POISON, false));
        List<Event> good = new ArrayList<>();
        for (int i = 1; i <= 20; i++) {
            good.add(Event.of("evt-" + i, i));
        }
        events.addAll(good);
        send(events);
        start(batchSize());
        waitUntil(
                "all 20 good events applied and the poison message failed permanently",
                () -> rows().size() == 20 && counting.outcomes("poison-1").contains(Status.FAILED_PERMANENT));
        assertThat(rows()).as("the poison message applied nothing").doesNotContainKey("poison-1");
        assertLedger(good);
    }

    @Test
    final void manyEventsWithDuplicatesAndRestarts() throws Exception {
        long seed = System.nanoTime();
        Random random = new Random(seed);
        int n = manyEvents();
        List<Event> originals = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            originals.add(Event.of("evt-" + i, 1 + random.nextInt(1000)));
        }
        List<Event> messages = new ArrayList<>(originals);
        for (int i = 0; i < n / 10; i++) {
            messages.add(originals.get(random.nextInt(n)).asCopy());
        }
        Collections.shuffle(messages, random);
        send(messages);

        AutoCloseable[] consumers = {start(batchSize()), start(batchSize())};
        int restarts = 4;
        for (int r = 1; r <= restarts; r++) {
            long threshold = (long) messages.size() * r / (restarts + 1) + random.nextInt(Math.max(1, n / 50));
            waitUntil(
                    threshold + " deliveries before restart " + r + " (seed " + seed + ")",
                    () -> counting.delivered() >= threshold);
            int victim = random.nextInt(2);
            stop(consumers[victim]);
            consumers[victim] = start(batchSize());
        }
        waitUntil(
                "all " + n + " events applied and all " + messages.size() + " messages settled (seed " + seed + ")",
                () -> settled() >= messages.size() && rows().size() == n);
        assertLedger(originals);
    }

    // ---- helpers -----------------------------------------------------------------------------

    private void send(List<Event> events) throws Exception {
        publish(destination, events);
        attempted += events.size();
    }

    private AutoCloseable start(int batch) throws Exception {
        AutoCloseable c = startConsumer(destination, counting, batch);
        running.push(c);
        return c;
    }

    private void stop(AutoCloseable c) throws Exception {
        running.remove(c);
        c.close();
    }

    private long settled() {
        return counting.count(Status.APPLIED) + counting.count(Status.DUPLICATE);
    }

    private Map<String, Integer> rows() {
        try (Connection c = database.dataSource().getConnection()) {
            return LedgerHandler.rows(c);
        } catch (SQLException e) {
            throw new IllegalStateException("could not read the ledger: " + e.getMessage(), e);
        }
    }

    private void waitUntil(String what, Callable<Boolean> condition) {
        try {
            Awaitility.await(what)
                    .atMost(patience())
                    .pollDelay(Duration.ZERO)
                    .pollInterval(Duration.ofMillis(50))
                    .until(condition);
        } catch (ConditionTimeoutException e) {
            throw new AssertionError("waited " + patience() + " for: " + what + "; " + tally(List.of()), e);
        }
    }

    /**
     * The end state: every expected event applied exactly once, nothing else applied, and the
     * balance equal to the sum of their amounts. Prints the tally first, so a failure shows it.
     */
    private void assertLedger(List<Event> expected) throws SQLException {
        Map<String, Long> amounts = new LinkedHashMap<>();
        expected.forEach(e -> amounts.putIfAbsent(e.eventId(), Long.parseLong(e.payload())));
        Map<String, Integer> rows = rows();
        long lost =
                amounts.keySet().stream().filter(id -> !rows.containsKey(id)).count();
        long twice = rows.values().stream().mapToLong(c -> c - 1L).sum();
        String tally = tally(amounts.keySet());
        System.out.println(tally);
        assertThat(lost).as("events lost: %s", tally).isZero();
        assertThat(twice).as("effects applied twice: %s", tally).isZero();
        assertThat(rows.keySet()).as("events applied").containsExactlyInAnyOrderElementsOf(amounts.keySet());
        try (Connection c = database.dataSource().getConnection()) {
            assertThat(LedgerHandler.balance(c))
                    .as("ledger balance: every effect applied exactly once")
                    .isEqualTo(
                            amounts.values().stream().mapToLong(Long::longValue).sum());
        }
    }

    /** Messages published, deliveries seen (here and in the crash child), duplicates absorbed, lost, applied twice. */
    private String tally(Collection<String> expected) {
        Map<String, Integer> rows = rows();
        long lost = expected.stream().filter(id -> !rows.containsKey(id)).count();
        long twice = rows.values().stream().mapToLong(c -> c - 1L).sum();
        return String.format(
                java.util.Locale.ROOT,
                "%s.%s: attempted %d / delivered %d / duplicates absorbed %d / lost %d / applied twice %d",
                getClass().getSimpleName(),
                caseName,
                attempted,
                counting.delivered() + elsewhere,
                counting.count(Status.DUPLICATE),
                lost,
                twice);
    }

    private static String abbreviation(String method) {
        StringBuilder sb = new StringBuilder();
        for (char ch : method.toCharArray()) {
            if (Character.isUpperCase(ch) || sb.length() == 0) {
                sb.append(Character.toLowerCase(ch));
            }
        }
        return sb.toString();
    }
}
