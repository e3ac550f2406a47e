package dev.once.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryPolicy;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.Receipt;
import dev.once.testkit.broker.BrokerChain;
import dev.once.testkit.broker.BrokerProcess;
import dev.once.testkit.broker.BrokerWorld;
import dev.once.testkit.broker.EngineMeters;
import dev.once.testkit.broker.Proxies;
import dev.once.testkit.broker.ScriptedHandler;
import dev.once.testsupport.StateMachines;
import dev.once.testsupport.TestDatabase;
import io.nats.client.Connection;
import io.nats.client.JetStream;
import io.nats.client.JetStreamManagement;
import io.nats.client.JetStreamSubscription;
import io.nats.client.Message;
import io.nats.client.api.ConsumerInfo;
import io.nats.client.api.MessageInfo;
import io.nats.client.api.StorageType;
import io.nats.client.api.StreamConfiguration;
import io.nats.client.impl.Headers;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.ActionChain;
import org.awaitility.core.ConditionTimeoutException;

/**
 * {@link NatsConsumer} against a model, on the real JetStream server and PostgreSQL, wired as a user
 * wires it (a durable with {@link NatsConsumer.Builder#deadLetterAfterRetries()}, so {@code
 * max_deliver} is the policy's retries + 1, a dead-letter subject captured by a stream, a short ack
 * wait, an {@link IdempotentConsumer} per process): random sequences of a hostile world's moves.
 * Publish a new event with {@link NatsPublisher}, with what the handler does on its first calls for
 * it (returns, throws a retryable or a permanent exception, swallows the SQLException of its own
 * failed effect statement, takes longer than the ack wait); publish an event again (a producer
 * retry: the stream's short duplicate window drops it or stores a second copy, as its publish ack
 * says); start or stop a second process on the same durable; arm a crash in the ack gap (after the
 * process's next commit its connection is closed before the ack; the dead process is started again
 * before the next move, and JetStream redelivers after the ack wait).
 *
 * <p>Observed, not scripted: the connection the consumer is given is wrapped, so every message it
 * fetches and every {@code ack}, {@code nak} and {@code term} is seen per delivery (stream sequence
 * and delivery count), and each process's {@link dev.once.OutcomeListener} reports each outcome.
 *
 * <p>Checked at every ack, as it is sent: the event's claim is committed. After every move: no
 * event's effect is applied twice or reported applied twice, and every settlement agrees with the
 * outcome: applied and duplicate acked, permanent failures dead-lettered and terminated, retryable
 * ones {@code nak}ed until the delivery {@code max_deliver} allows last, then dead-lettered, in-progress
 * ones {@code nak}ed. After draining: every copy ended acked or dead-lettered, nothing is pending or
 * unacknowledged on the durable, and the dead-letter stream holds exactly the copies whose last
 * outcome was a dead letter; each event's effect is applied exactly once when one of its copies
 * ended acked, else never (unless a process that lost its connection while holding the message
 * applied it); every redelivery (delivery count above 1) is counted in once.redeliveries and a
 * first delivery is not, every duplicate (once.duplicates) is of an applied event, and the counters
 * agree with the outcomes. Tries: {@value #TRIES} (CI); {@code -Donce.natsChain.tries=N} runs N
 * different chains in each try ({@link BrokerChain#chainsPerTry}).
 *
 * <p>Goes red when the mechanism is broken, on its first try, shrunk to one move ({@code publish
 * [SWALLOW, SWALLOW, SWALLOW]}): with every fetched message acked at once ("ack of w1-e0#0
 * (delivery 1:1) before its event's claim committed"). 32 chains (8 repeats) found no hole.
 */
class NatsConsumerStateMachineTest {

    static final int TRIES = 4;
    static final int CHAINS = BrokerChain.chainsPerTry("nats");
    static final int BATCH = 4;
    static final Duration ACK_WAIT = Duration.ofSeconds(1);
    static final RetryPolicy RETRIES = RetryPolicy.builder()
            .initialDelay(Duration.ofMillis(20))
            .maxDelay(Duration.ofMillis(40))
            .jitter(RetryPolicy.Jitter.NONE)
            .maxRetries(2)
            .build();
    static final long MAX_DELIVER = RETRIES.maxRetries() + 1L;
    static final Duration LOCK_TIMEOUT = Duration.ofMillis(100);
    static final long SLOW_MILLIS = 1500; // past the ack wait: only the heartbeat keeps it from redelivery

    private static final StateMachines.Databases databases = new StateMachines.Databases(8);

    @AfterContainer
    static void close() {
        databases.close();
    }

    @Property(tries = TRIES)
    void durable(@ForAll("chains") List<ActionChain<World>> chains) throws Exception {
        BrokerChain.run(chains, () -> new World(databases.postgres()));
    }

    @Provide
    Arbitrary<List<ActionChain<World>>> chains() {
        return BrokerChain.perTry(
                BrokerChain.moves(
                                BrokerChain.scripts(3),
                                World::publish,
                                BrokerChain.picks(),
                                World::publishAgain,
                                "crash after next commit, before its ack")
                        .build()
                        .withMaxTransformations(12),
                CHAINS);
    }

    /** One delivery the engine processed, as its process's outcome listener saw it. */
    record Processed(
            String process,
            String copy,
            String eventId,
            int raw,
            String tag,
            int attempt,
            boolean redelivered,
            Status status,
            String verdict)
            implements BrokerWorld.Handled {}

    /** One process: its connection, engine and consumer. */
    static final class Process extends BrokerProcess {
        final Connection connection;
        final IdempotentConsumer engine;
        final NatsConsumer consumer;

        Process(String name, Connection connection, World w) throws Exception {
            super(name);
            this.connection = connection;
            DataSource ds = Proxies.afterCommit(w.db.dataSource(), () -> {
                if (crashesNow()) {
                    w.connectionsDied.incrementAndGet();
                    try {
                        connection.close(); // dies in the ack gap: committed, not yet acknowledged
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            });
            this.engine = IdempotentConsumer.builder()
                    .dataSource(ds)
                    .consumer(w.consumerName)
                    .handler(w.handler)
                    .lockTimeout(LOCK_TIMEOUT)
                    .meterRegistry(w.registry)
                    .outcomeListener((d, o) -> w.processed(this, d, o))
                    .build();
            this.consumer = NatsConsumer.builder().connection(w.observed(connection)).stream(w.stream)
                    .durable(w.durable)
                    .consumer(engine)
                    .batchSize(BATCH)
                    .fetchWait(Duration.ofMillis(200))
                    .ackWait(ACK_WAIT)
                    .retries(RETRIES)
                    .deadLetterAfterRetries()
                    .deadLetterSubject(w.stream + "-dlq")
                    .build()
                    .start();
        }

        /** What the consumer must send for this outcome, per its documented policy. */
        static String verdict(Delivery d, Outcome o) {
            return switch (o.status()) {
                case APPLIED, DUPLICATE -> "ack";
                case FAILED_PERMANENT -> "reject";
                case IN_PROGRESS -> "requeue";
                default -> d.attempt() < MAX_DELIVER ? "requeue" : "reject";
            };
        }

        @Override
        protected boolean running() {
            return consumer.isRunning();
        }

        @Override
        protected void stop() {
            try {
                consumer.close();
            } finally {
                try {
                    connection.close();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    static final class World extends BrokerWorld<Process, Processed> {
        final String stream = "once-sm-" + System.nanoTime();
        final String durable = "sm";
        final Connection admin = TestNats.connect();
        final NatsPublisher publisher;
        final Map<String, Integer> diedBeforePublish = new ConcurrentHashMap<>();
        final Map<String, AtomicInteger> rawDeliveries = new ConcurrentHashMap<>(); // copy -> fetched
        final Map<String, String> settled = new ConcurrentHashMap<>(); // "seq:delivered" -> ack, requeue, reject
        final Map<String, Connection> connectionOfTag = new ConcurrentHashMap<>();
        final AtomicInteger connectionsDied = new AtomicInteger();

        World(TestDatabase db) throws Exception {
            super(db, n -> "sm-" + n, SLOW_MILLIS);
            JetStreamManagement jsm = admin.jetStreamManagement();
            jsm.addStream(StreamConfiguration.builder()
                    .name(stream)
                    .subjects(stream)
                    .storageType(StorageType.Memory)
                    .duplicateWindow(Duration.ofMillis(100)) // a producer retry soon after is dropped, later kept
                    .build());
            TestNats.createStream(admin, stream + "-dlq");
            publisher = new NatsPublisher(admin);
            startA();
        }

        @Override
        protected Process start(String name, boolean second) throws Exception {
            return new Process(name, TestNats.connect(), this);
        }

        // ---- moves

        void publish(List<ScriptedHandler.Behaviour> script) {
            send(newEvent(script));
        }

        void publishAgain(int pick) {
            send(publishedEvent(pick));
        }

        private void send(String eventId) {
            String copy = nextCopy(eventId);
            int died = connectionsDied.get();
            Receipt r;
            try {
                r = publisher.publish(new OutboxMessage(
                        0,
                        eventId,
                        stream,
                        null,
                        ("payload of " + eventId).getBytes(StandardCharsets.UTF_8),
                        Map.of("test-copy", copy),
                        eventId,
                        0,
                        null));
            } catch (Exception e) {
                throw new IllegalStateException("publishing " + copy, e);
            }
            if (r.body().contains("duplicate=true")) {
                moves.add("(" + copy + " dropped by the stream's duplicate window)");
                return;
            }
            copies.put(copy, eventId);
            diedBeforePublish.put(copy, died);
        }

        @Override
        public void stopB() {
            connectionsDied.incrementAndGet(); // a pull it left open may have taken messages nobody sees
            super.stopB();
        }

        @Override
        protected void retire(Process dead) {
            connectionsDied.incrementAndGet();
            super.retire(dead);
        }

        // ---- observation

        void processed(Process p, Delivery d, Outcome o) {
            Map<String, String> h = d.headers();
            processed.add(new Processed(
                    p.name,
                    h.get("test-copy"),
                    d.eventId(),
                    Integer.parseInt(h.get("test-raw")),
                    h.get("test-tag"),
                    d.attempt(),
                    d.redelivered(),
                    o.status(),
                    Process.verdict(d, o)));
        }

        /** {@code c} with the JetStream subscriptions it makes, and the messages they fetch, observed. */
        Connection observed(Connection c) {
            return (Connection) wrap(
                    Connection.class,
                    c,
                    (m, r) -> m.getName().equals("jetStream")
                            ? wrap(
                                    JetStream.class,
                                    r,
                                    (jm, jr) -> jr instanceof JetStreamSubscription s
                                            ? wrap(
                                                    JetStreamSubscription.class,
                                                    s,
                                                    (sm, sr) -> sm.getName().equals("fetch")
                                                            ? ((List<?>) sr)
                                                                    .stream()
                                                                            .map(msg -> observed((Message) msg, c))
                                                                            .toList()
                                                            : sr)
                                            : jr)
                            : r);
        }

        private Message observed(Message msg, Connection c) {
            String copy = msg.getHeaders().getFirst("test-copy");
            String tag = msg.metaData().streamSequence() + ":" + msg.metaData().deliveredCount();
            int raw = rawDeliveries
                    .computeIfAbsent(copy, k -> new AtomicInteger())
                    .incrementAndGet();
            connectionOfTag.put(tag, c);
            Headers headers = new Headers(msg.getHeaders());
            headers.put("test-raw", Integer.toString(raw));
            headers.put("test-tag", tag);
            return (Message) Proxy.newProxyInstance(
                    getClass().getClassLoader(), new Class<?>[] {Message.class}, (proxy, m, args) -> {
                        switch (m.getName()) {
                            case "getHeaders" -> {
                                return headers;
                            }
                            case "ack", "ackSync" -> {
                                if (!claimCommitted(copies.get(copy))) {
                                    violations.add("ack of " + copy + " (delivery " + tag
                                            + ") before its event's claim committed");
                                }
                                settle(c, copy, tag, "ack");
                            }
                            case "nak", "nakWithDelay" -> settle(c, copy, tag, "requeue");
                            case "term" -> settle(c, copy, tag, "reject");
                            default -> {}
                        }
                        return Proxies.invoke(m, msg, args);
                    });
        }

        /** Records a settlement that can reach the server (after a crash none can, and none is compared). */
        private void settle(Connection c, String copy, String tag, String how) {
            if (c.getStatus() != Connection.Status.CONNECTED) {
                return;
            }
            String before = settled.putIfAbsent(tag, how);
            if (before != null) {
                violations.add(copy + " (delivery " + tag + ") settled twice: " + before + ", then " + how);
            }
        }

        /** Whether the connection that fetched this delivery has closed since (a crash). */
        boolean lost(String tag) {
            Connection c = connectionOfTag.get(tag);
            return c != null && c.getStatus() == Connection.Status.CLOSED;
        }

        // ---- the oracle

        /** Safety, at any moment: every settlement sent agrees with the outcome. */
        @Override
        public void check() {
            super.check();
            for (Processed p : processed) {
                String sent = settled.get(p.tag());
                if (sent != null) {
                    assertThat(sent)
                            .as(
                                    "settlement of %s, %s (attempt %d) in process %s, after %s: %s",
                                    p.copy(), p.status(), p.attempt(), p.process(), moves, processed)
                            .isEqualTo(p.verdict());
                }
            }
        }

        /** The copy's fate once its latest delivery was processed and acked or dead-lettered; null while it may come back. */
        private String fate(String copy) {
            Processed last = null;
            for (Processed p : processed) {
                if (p.copy().equals(copy) && (last == null || p.attempt() > last.attempt())) {
                    last = p;
                }
            }
            if (last != null
                    && last.status() == Status.IN_PROGRESS
                    && last.attempt() >= MAX_DELIVER
                    && "requeue".equals(settled.get(last.tag()))) {
                // JetStream delivers it no more; the delivery holding the claim applies the event
                return "dropped";
            }
            if (last == null || last.verdict().equals("requeue") || settled.get(last.tag()) == null) {
                return null;
            }
            return last.verdict();
        }

        @Override
        public void drainAndCheck() throws Exception {
            moves.add("drain");
            try {
                await().atMost(Duration.ofSeconds(20))
                        .pollInterval(Duration.ofMillis(20))
                        .until(() -> {
                            supervise();
                            long rejects = 0;
                            for (String copy : copies.keySet()) {
                                String fate = fate(copy);
                                if (fate == null) {
                                    return false;
                                }
                                rejects += fate.equals("reject") ? 1 : 0;
                            }
                            ConsumerInfo info = admin.jetStreamManagement().getConsumerInfo(stream, durable);
                            return info.getNumPending() == 0 && info.getNumAckPending() == 0 && dlq() == rejects;
                        });
            } catch (ConditionTimeoutException e) {
                Map<String, String> fates = new TreeMap<>();
                copies.keySet().forEach(c -> fates.put(c, String.valueOf(fate(c))));
                throw new AssertionError(
                        "did not drain after " + moves + ": fates " + fates + ", processed " + processed + ", settled "
                                + settled + ", violations " + violations,
                        e);
            }
            check();
            String what = "after " + moves + ", processed " + processed;

            Map<String, Long> dead = new TreeMap<>();
            JetStreamManagement jsm = admin.jetStreamManagement();
            for (long seq = 1; seq <= dlq(); seq++) {
                MessageInfo m = jsm.getMessage(stream + "-dlq", seq);
                dead.merge(m.getHeaders().getFirst("test-copy"), 1L, Long::sum);
            }
            Map<String, Long> expectedDead = new TreeMap<>();
            Map<String, Boolean> ackedCopy = new HashMap<>();
            for (String copy : copies.keySet()) {
                if (fate(copy).equals("reject")) {
                    expectedDead.put(copy, 1L);
                } else if (fate(copy).equals("ack")) {
                    ackedCopy.put(copies.get(copy), true);
                }
            }
            assertThat(dead).as("dead-lettered copies, " + what).isEqualTo(expectedDead);

            Map<String, Long> effects = handler.effects(db.dataSource());
            for (String copy : copies.keySet()) {
                if (fate(copy).equals("dropped")) {
                    assertThat(effects.getOrDefault(copies.get(copy), 0L))
                            .as(
                                    "%s, dropped at max_deliver while another delivery held its claim, applied by"
                                            + " that one; %s",
                                    copy, what)
                            .isEqualTo(1);
                }
            }
            for (String id : events) {
                long applied = applied(id);
                // Dead-lettered and yet applied only by a process that lost its connection while it held the
                // message (a zombie finishing its batch: JetStream meanwhile redelivered it elsewhere).
                boolean zombie = processed.stream()
                        .anyMatch(p -> p.eventId().equals(id) && p.status() == Status.APPLIED && lost(p.tag()));
                long expected = ackedCopy.containsKey(id) ? 1 : zombie ? applied : 0;
                assertThat(effects.getOrDefault(id, 0L))
                        .as("effects of %s (a copy acked: %s), %s", id, ackedCopy.containsKey(id), what)
                        .isEqualTo(expected)
                        .isEqualTo(applied);
            }

            long redeliveries = 0;
            for (Processed p : processed) {
                if (p.raw() > 1) {
                    assertThat(p.redelivered())
                            .as("%s, fetched for the %dth time, flagged redelivered; %s", p.copy(), p.raw(), what)
                            .isTrue();
                } else if (p.redelivered()) {
                    assertThat(connectionsDied.get())
                            .as(
                                    "%s flagged redelivered on its first fetch with no process stopped since its"
                                            + " publish; %s",
                                    p.copy(), what)
                            .isGreaterThan(diedBeforePublish.get(p.copy()));
                }
                redeliveries += p.redelivered() ? 1 : 0;
                EngineMeters.assertDuplicateOfApplied(p.status(), p.eventId(), effects, p.copy(), what);
            }
            EngineMeters.assertAgree(
                    registry, processed.stream().map(Processed::status).toList(), redeliveries, what);
        }

        private long dlq() throws Exception {
            return admin.jetStreamManagement()
                    .getStreamInfo(stream + "-dlq")
                    .getStreamState()
                    .getMsgCount();
        }

        @Override
        public void close() throws Exception {
            try {
                a.close();
                if (b != null) {
                    b.close();
                }
                TestNats.deleteStream(admin, stream);
                TestNats.deleteStream(admin, stream + "-dlq");
            } finally {
                admin.close();
            }
        }
    }

    /** A proxy of {@code type} over {@code target} whose answers pass through {@code answer}. */
    private static Object wrap(Class<?> type, Object target, Answer answer) {
        return Proxy.newProxyInstance(
                NatsConsumerStateMachineTest.class.getClassLoader(),
                new Class<?>[] {type},
                (proxy, m, args) -> answer.apply(m, Proxies.invoke(m, target, args)));
    }

    interface Answer {
        Object apply(Method m, Object result) throws Throwable;
    }
}
