package dev.once.testkit.broker;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryPolicy;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Publisher;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Clock;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The outbox path end to end through one broker, as every broker publisher must support it: a
 * handler enqueues messages with {@code tx.outbox().add(…)}, the real {@link OutboxRelay} sends
 * them with the adapter's {@link Publisher}, the adapter's consumer receives them and its inbox
 * applies each exactly once. Then the relay "crashes" after a send and before marking the row
 * (the row is set back to pending and relayed again): the copy is absorbed, by the broker where it
 * deduplicates on the row's idempotency key, by the receiving inbox otherwise. And the publisher
 * failure idiom of {@link Publisher}, the same for every broker: a row the broker refuses for good is
 * dead after one attempt, a row sent while the broker cannot be reached is retried after the retry
 * policy's delay. Real PostgreSQL, the real broker, a fresh schema and destination per case.
 *
 * <p>An adapter extends this class and implements the small SPI below; the case is {@code final}.
 */
public abstract class OutboxRelayContract {

    /** For a subclass: one per publisher under test. */
    protected OutboxRelayContract() {}

    /** Upstream events handled; each enqueues {@link #PER_EVENT} messages. */
    public static final int EVENTS = 3;
    /** Messages a handler enqueues per event. */
    public static final int PER_EVENT = 2;
    /** Rows of the backlog case: three per key, so each key's rows go out in three batches, in order. */
    public static final int BACKLOG = 300;

    private TestDatabase db;
    private String destination;

    // ---- SPI -------------------------------------------------------------------------------

    /**
     * Creates a destination of its own and returns it as an outbox row names it (a queue URL or
     * name, a subject, {@code exchange/routing-key}).
     *
     * @param name unique per run: {@code [a-z0-9-]}, at most 40 characters
     */
    protected abstract String createDestination(String name) throws Exception;

    /** Removes what {@link #createDestination} made. Default: nothing. */
    protected void deleteDestination(String destination) throws Exception {}

    /** The adapter's publisher, as the relay is given it. */
    protected abstract Publisher publisher() throws Exception;

    /** Starts the adapter's consumer on {@code destination}; {@code close()} stops it. */
    protected abstract AutoCloseable startConsumer(String destination, IdempotentConsumer consumer) throws Exception;

    /** Messages the broker holds at {@code destination}; called only before any consumer runs. */
    protected abstract long messagesStored(String destination) throws Exception;

    /** True when the broker drops a re-send with the same idempotency key (FIFO dedup id, {@code Nats-Msg-Id}). */
    protected abstract boolean brokerDeduplicates();

    /**
     * A row the broker refuses for good, as {@link #refusedRow} makes it.
     *
     * @param destination    the row's destination
     * @param payload        the row's payload
     * @param responseStatus the status the publisher records on the row for the refusal (an AMQP reply
     *                       code, an HTTP status), or null when it records none
     */
    public record Refused(String destination, byte[] payload, Integer responseStatus) {}

    /**
     * A row the broker refuses for good, which no later send can deliver: to a destination that does
     * not exist (a queue, a subject no stream takes, a topic), or, where a missing destination cannot
     * be told from an outage, with a payload over the destination's limit.
     *
     * @param destination the case's destination, for a refusal by payload
     */
    protected abstract Refused refusedRow(String destination) throws Exception;

    /**
     * The adapter's publisher with no broker to reach (its connection closed or aborted, or its
     * endpoint a port where nothing listens): every send fails, and would succeed once the broker is
     * back. The subclass releases it in {@link #deleteDestination}.
     */
    protected abstract Publisher unreachablePublisher() throws Exception;

    /**
     * Checks what the broker answered to the first send of a row and to its re-send, as the relay
     * recorded them on the row ({@code response}). Default: both are non-empty.
     */
    protected void checkReceipts(String firstSend, String reSend) {
        assertThat(firstSend).as("the broker's answer is recorded on the row").isNotBlank();
        assertThat(reSend)
                .as("the broker's answer to the re-send is recorded on the row")
                .isNotBlank();
    }

    // ---- the case ----------------------------------------------------------------------------

    @BeforeEach
    final void createDatabaseAndDestination() throws Exception {
        db = TestPostgres.shared().freshDatabase();
        db.execute("CREATE TABLE effect (event_id text NOT NULL, cause text, body text NOT NULL)");
        destination = createDestination("relay-" + System.nanoTime());
    }

    @AfterEach
    final void dropDatabaseAndDestination() throws Exception {
        try {
            deleteDestination(destination);
        } finally {
            db.close();
        }
    }

    @Test
    @SuppressWarnings("try") // the consumer resource is used by running, not by name
    final void relayedMessagesAreAppliedOnceDownstreamAndARelayCrashResendIsAbsorbed() throws Exception {
        IdempotentConsumer upstream = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("orders")
                .handler((d, tx) -> {
                    for (int n = 1; n <= PER_EVENT; n++) {
                        tx.outbox()
                                .add(
                                        destination,
                                        d.eventId(),
                                        (d.payloadText() + "/" + n).getBytes(StandardCharsets.UTF_8),
                                        Map.of("kind", "charge"),
                                        null);
                    }
                })
                .build();
        for (int i = 1; i <= EVENTS; i++) {
            assertThat(upstream.process(Delivery.builder("order-" + i)
                                    .payload("order-" + i)
                                    .build())
                            .status())
                    .isEqualTo(Status.APPLIED);
        }
        int rows = EVENTS * PER_EVENT;
        Publisher publisher = publisher();
        OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .publisher(publisher)
                .name("contract")
                .meterRegistry(new SimpleMeterRegistry())
                .build();
        int relayed = 0;
        for (int batches = 0; batches < rows && relayed < rows; batches++) {
            relayed += relay.relayOnce(); // each key's rows in waves, one row per key per wave
        }
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent'"))
                .as("every row sent")
                .isEqualTo(rows);

        // The relay crashes after sending the first row and before marking it: the row is pending again.
        long first = db.queryLong("SELECT min(id) FROM once_outbox");
        String firstSend = response(first);
        db.execute("UPDATE once_outbox SET status = 'pending', sent_at = NULL WHERE id = " + first);
        assertThat(relay.relayOnce()).as("the re-send").isEqualTo(1);
        checkReceipts(firstSend, response(first));
        long stored = messagesStored(destination);
        assertThat(stored)
                .as(brokerDeduplicates() ? "the broker dropped the re-send" : "the re-send is a second message")
                .isEqualTo(brokerDeduplicates() ? rows : rows + 1);

        Recording downstream = new Recording(IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("billing")
                .handler((d, tx) -> {
                    try (PreparedStatement ps = tx.connection()
                            .prepareStatement("INSERT INTO effect (event_id, cause, body) VALUES (?, ?, ?)")) {
                        ps.setString(1, d.eventId()); // 1 event id
                        ps.setString(2, d.headers().get(OutboxMessage.CAUSE_ID_HEADER)); // 2 cause
                        ps.setString(3, d.payloadText()); // 3 body
                        ps.executeUpdate();
                    }
                })
                .build());
        try (AutoCloseable consumer = startConsumer(destination, downstream)) {
            Awaitility.await()
                    .atMost(Duration.ofMinutes(1))
                    .pollInterval(Duration.ofMillis(50))
                    .until(() -> downstream.deliveries.size() >= stored && settled(downstream, stored));
        }
        Map<String, String> applied = new HashMap<>();
        try (Connection c = db.dataSource().getConnection();
                ResultSet rs = c.createStatement().executeQuery("SELECT event_id, cause, body FROM effect")) {
            while (rs.next()) {
                assertThat(applied.put(rs.getString(1), rs.getString(2) + " " + rs.getString(3)))
                        .as("effect of %s applied exactly once", rs.getString(1))
                        .isNull();
            }
        }
        Map<String, String> expected = new HashMap<>();
        for (int i = 1; i <= EVENTS; i++) {
            for (int n = 1; n <= PER_EVENT; n++) {
                expected.put("orders:order-" + i + "#" + n, "order-" + i + " order-" + i + "/" + n);
            }
        }
        assertThat(applied)
                .as("each message applied once under its own event id, with its cause")
                .isEqualTo(expected);
        String resent = queryString("SELECT event_id FROM once_outbox WHERE id = " + first);
        List<Status> outcomes = downstream.outcomes(resent);
        if (brokerDeduplicates()) {
            assertThat(outcomes).as("outcomes of the re-sent " + resent).containsExactly(Status.APPLIED);
        } else {
            assertThat(outcomes).as("outcomes of the re-sent " + resent).contains(Status.APPLIED, Status.DUPLICATE);
        }
    }

    /**
     * A backlog drained by two relays at once, each sending its batches through the publisher's
     * {@link Publisher#publishAll}: every row is sent, and the broker holds each at least once and
     * no more copies than there were attempts (exactly one each where it deduplicates).
     */
    @Test
    final void aBacklogDrainedByTwoRelaysThroughPublishAllIsStoredOnceEach() throws Exception {
        IdempotentConsumer upstream = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("orders")
                .handler((d, tx) -> {
                    for (int n = 1; n <= 3; n++) {
                        byte[] body = (d.eventId() + "/" + n).getBytes(StandardCharsets.UTF_8);
                        tx.outbox().add(destination, d.eventId(), body, Map.of(), null);
                    }
                })
                .build();
        for (int i = 0; i < BACKLOG / 3; i++) {
            assertThat(upstream.process(Delivery.builder("order-" + i).build()).status())
                    .isEqualTo(Status.APPLIED);
        }
        Publisher publisher = publisher();
        List<OutboxRelay> relays = List.of(relay(publisher, "backlog-1"), relay(publisher, "backlog-2"));
        try {
            relays.forEach(OutboxRelay::start);
            Awaitility.await()
                    .atMost(Duration.ofMinutes(2))
                    .pollInterval(Duration.ofMillis(50))
                    .until(() -> db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent'") == BACKLOG);
        } finally {
            relays.forEach(OutboxRelay::close);
        }
        long attempts = db.queryLong("SELECT sum(attempts) FROM once_outbox");
        long stored = messagesStored(destination);
        if (brokerDeduplicates()) {
            assertThat(stored).as("every row stored once").isEqualTo(BACKLOG);
        } else {
            assertThat(stored)
                    .as("every row stored, no more copies than the %d attempts", attempts)
                    .isBetween((long) BACKLOG, attempts);
        }
    }

    /**
     * The publisher failure idiom, the same for every broker: a row the broker refuses for good is
     * dead after one attempt, the broker's answer recorded, and its neighbour in the batch is sent
     * all the same; a row sent while the broker cannot be reached is retried, never given up: pending
     * with one attempt counted, held back for the retry policy's delay, and sent by the first batch
     * after it once the broker answers.
     */
    @Test
    final void aRefusedRowIsDeadAtOnceAndARowForAnUnreachableBrokerIsRetriedAfterItsBackoff() throws Exception {
        Refused refused = refusedRow(destination);
        IdempotentConsumer upstream = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("orders")
                .handler((d, tx) -> {
                    if (d.payloadText().equals("refused")) {
                        tx.outbox().add(refused.destination(), d.eventId(), refused.payload(), Map.of(), null);
                    } else {
                        byte[] body = d.payloadText().getBytes(StandardCharsets.UTF_8);
                        tx.outbox().add(destination, d.eventId(), body, Map.of(), null);
                    }
                })
                .build();
        Duration backoff = Duration.ofHours(1);
        RetryPolicy retries = RetryPolicy.builder()
                .initialDelay(backoff)
                .maxDelay(backoff)
                .jitter(RetryPolicy.Jitter.NONE)
                .maxRetries(3)
                .build();
        upstream.process(Delivery.builder("order-1").payload("refused").build());
        upstream.process(Delivery.builder("order-2").payload("sent").build());
        Publisher publisher = publisher();
        OutboxRelay relay = failureRelay(publisher, retries, Clock.systemUTC());
        assertThat(relay.relayOnce()).as("rows handled").isEqualTo(2);
        long refusedRow = db.queryLong("SELECT min(id) FROM once_outbox");
        assertThat(queryString("SELECT status || ' ' || attempts FROM once_outbox WHERE id = " + refusedRow))
                .as("a refused row is dead after one attempt")
                .isEqualTo("dead 1");
        assertThat(queryString("SELECT last_error FROM once_outbox WHERE id = " + refusedRow))
                .as("the refusal is recorded")
                .isNotBlank();
        if (refused.responseStatus() != null) {
            assertThat(db.queryLong("SELECT response_status FROM once_outbox WHERE id = " + refusedRow))
                    .as("the broker's answer to the refused row")
                    .isEqualTo(refused.responseStatus().longValue());
        }
        assertThat(queryString("SELECT status FROM once_outbox WHERE id > " + refusedRow))
                .as("the refused row's neighbour is sent all the same")
                .isEqualTo("sent");

        upstream.process(Delivery.builder("order-3").payload("retried").build());
        long retried = db.queryLong("SELECT max(id) FROM once_outbox");
        OutboxRelay cut = failureRelay(unreachablePublisher(), retries, Clock.systemUTC());
        assertThat(cut.relayOnce()).as("rows handled without a broker").isEqualTo(1);
        assertThat(queryString("SELECT status || ' ' || attempts FROM once_outbox WHERE id = " + retried))
                .as("a row sent while the broker cannot be reached is retried, one attempt counted")
                .isEqualTo("pending 1");
        assertThat(queryString("SELECT last_error FROM once_outbox WHERE id = " + retried))
                .as("the failure is recorded")
                .isNotBlank();
        assertThat(db.queryLong("SELECT count(*) FROM once_outbox WHERE id = " + retried
                        + " AND available_at > now() + interval '59 minutes'"))
                .as("held back for the retry policy's delay of " + backoff)
                .isEqualTo(1);
        assertThat(relay.relayOnce())
                .as("nothing sendable before the backoff is over")
                .isZero();
        OutboxRelay later = failureRelay(publisher, retries, Clock.offset(Clock.systemUTC(), backoff.plusMinutes(1)));
        assertThat(later.relayOnce())
                .as("rows handled once the backoff is over")
                .isEqualTo(1);
        assertThat(queryString("SELECT status FROM once_outbox WHERE id = " + retried))
                .as("the retried row is sent once the broker answers")
                .isEqualTo("sent");
    }

    // A send the client keeps retrying on its own (gRPC, the AWS SDK) is cut by the relay's send
    // timeout, which counts as a retryable failure like any other.
    private OutboxRelay failureRelay(Publisher publisher, RetryPolicy retries, Clock clock) {
        return OutboxRelay.builder()
                .dataSource(db.dataSource())
                .publisher(publisher)
                .name("failures")
                .retryPolicy(retries)
                .sendTimeout(Duration.ofSeconds(5))
                .clock(clock)
                .meterRegistry(new SimpleMeterRegistry())
                .build();
    }

    private OutboxRelay relay(Publisher publisher, String name) {
        return OutboxRelay.builder()
                .dataSource(db.dataSource())
                .publisher(publisher)
                .name(name)
                .batchSize(40)
                .pollInterval(Duration.ofMillis(50))
                .meterRegistry(new SimpleMeterRegistry())
                .build();
    }

    private static boolean settled(Recording r, long stored) {
        return r.outcomes.size() >= stored
                && r.outcomes.stream().allMatch(o -> o.status() == Status.APPLIED || o.status() == Status.DUPLICATE);
    }

    private String response(long id) throws Exception {
        return queryString("SELECT response FROM once_outbox WHERE id = " + id);
    }

    private String queryString(String sql) throws Exception {
        try (Connection c = db.dataSource().getConnection();
                ResultSet rs = c.createStatement().executeQuery(sql)) {
            assertThat(rs.next()).as(sql).isTrue();
            return rs.getString(1);
        }
    }

    /** Records every delivery and outcome of the downstream consumer. */
    private static final class Recording implements IdempotentConsumer {
        final List<Delivery> deliveries = new CopyOnWriteArrayList<>();
        final List<Outcome> outcomes = new CopyOnWriteArrayList<>();
        private final IdempotentConsumer delegate;

        Recording(IdempotentConsumer delegate) {
            this.delegate = delegate;
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
        public Outcome process(Delivery d) {
            deliveries.add(d);
            Outcome o = delegate.process(d);
            outcomes.add(o);
            return o;
        }

        @Override
        public List<Outcome> processBatch(List<Delivery> ds) {
            deliveries.addAll(ds);
            List<Outcome> os = delegate.processBatch(ds);
            outcomes.addAll(os);
            return os;
        }

        List<Status> outcomes(String eventId) {
            return outcomes.stream()
                    .filter(o -> o.eventId().equals(eventId))
                    .map(Outcome::status)
                    .toList();
        }
    }
}
