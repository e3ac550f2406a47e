package dev.once.pubsub;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.api.gax.grpc.GrpcTransportChannel;
import com.google.api.gax.rpc.FixedTransportChannelProvider;
import com.google.api.gax.rpc.TransportChannelProvider;
import com.google.cloud.pubsub.v1.Publisher;
import com.google.pubsub.v1.AcknowledgeRequest;
import com.google.pubsub.v1.DeadLetterPolicy;
import com.google.pubsub.v1.ModifyAckDeadlineRequest;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.PublishRequest;
import com.google.pubsub.v1.PubsubMessage;
import com.google.pubsub.v1.PullRequest;
import com.google.pubsub.v1.PullResponse;
import com.google.pubsub.v1.ReceivedMessage;
import com.google.pubsub.v1.StreamingPullRequest;
import com.google.pubsub.v1.StreamingPullResponse;
import com.google.pubsub.v1.TopicName;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.outbox.OutboxMessage;
import dev.once.testkit.broker.BrokerChain;
import dev.once.testkit.broker.BrokerProcess;
import dev.once.testkit.broker.BrokerWorld;
import dev.once.testkit.broker.EngineMeters;
import dev.once.testkit.broker.Proxies;
import dev.once.testkit.broker.ScriptedHandler;
import dev.once.testkit.broker.ScriptedHandler.Behaviour;
import dev.once.testsupport.SkipWithoutPubSub;
import dev.once.testsupport.StateMachines;
import dev.once.testsupport.TestDatabase;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.ActionChain;
import org.awaitility.core.ConditionTimeoutException;

/**
 * {@link PubSubConsumer} against a model, on Google's emulator and PostgreSQL, wired as a user wires
 * it (a subscription with a dead-letter policy of {@value #MAX_DELIVERY_ATTEMPTS} attempts to a topic of
 * its own, a {@link PubSubConsumer.Builder#deadLetters dead-letter topic} publisher for permanent
 * failures, an {@link IdempotentConsumer} per process, the builder's defaults but a 10 s
 * {@link PubSubConsumer.Builder#ackDeadline ack deadline}, {@value #THREADS} threads and quick
 * {@linkplain PubSubConsumer.Builder#receiveRetries receive retries}, which space the tries of a message
 * kept because another delivery held its claim): random sequences of a hostile world's moves. Publish a new event with
 * {@link PubSubPublisher}, with what the handler does on its first calls for it (returns, throws a
 * retryable or a permanent exception, swallows the SQLException of its own failed effect statement,
 * holds its transaction until Pub/Sub hands the message out again or for {@value #HOLD_SECONDS} s,
 * past the 10 s ack deadline: the client's lease extensions keep it unless the process's lease is
 * shorter); publish a new event whose first call holds its claim, and once it holds, a second message of
 * it, so that whichever process or thread gets that one meets a live holder ({@code IN_PROGRESS}); the
 * holder holds until deliveries met it {@value #MAX_DELIVERY_ATTEMPTS} times (as many as the policy allows
 * attempts) or for {@value #HOLD_SECONDS} s, then fails retryably and rolls back; publish an event again
 * (a producer retry: a second message of the event); start a second
 * process on the subscription, with the default lease or a {@value #SHORT_LEASE_SECONDS} s one (the
 * client stops extending, Pub/Sub hands the message to a subscriber again while the handler works),
 * or stop it; arm a crash in the ack gap (after the process's next commit its channel is cut before
 * the ack: the process works on as a zombie with the batch in hand, every ack, nack and extension of
 * it is lost; the dead process is replaced before the next move).
 *
 * <p>Observed, not scripted: each process's gRPC channel is intercepted, so every message streamed to
 * it (with its ack id and delivery attempt), every ack, every nack ({@code modifyAckDeadline} 0) and
 * every lease extension ({@code modifyAckDeadline} above 0) is seen, and so is every publish to the
 * dead-letter topic; each process's {@link dev.once.OutcomeListener} reports every outcome.
 *
 * <p>Checked at every ack, as it is sent: the event's claim is committed, or the message was published
 * to the dead-letter topic. After every move: no event's effect is applied twice or reported applied
 * twice; every settlement agrees with the latest outcome of its delivery (one kept in hand is tried
 * again): applied and duplicate acked, permanent failures published to the dead-letter topic and then
 * acked, retryable ones nacked (never acked), in-progress ones kept (neither acked nor dead-lettered,
 * nor nacked unless their process closed), nothing acked that was not processed. After draining:
 * nothing forwarded by the subscription's dead-letter policy (its attempts spent on nothing); every
 * message's latest delivery ended acked or dead-lettered; the dead-letter topic holds exactly what the consumer published there; each
 * event's effect is applied exactly once when one of its messages ended acked, else never unless a
 * process applied it after its channel had been cut while it held the message (a zombie: Pub/Sub
 * meanwhile handed it on and it was dead-lettered there). A message dead-lettered whose ack was then
 * lost comes again and the handler decides again; that is the ack gap, absorbed as any other. Also:
 * the counters agree with the outcomes (once.redeliveries with the delivery attempts, every
 * duplicate of an applied event). Tries: {@value #TRIES} (CI, the emulator streams ~50 messages/s and
 * a lost ack costs the 10 s deadline); {@code -Donce.pubsubChain.tries=N} runs N different chains in
 * each try ({@link BrokerChain#chainsPerTry}).
 *
 * <p>Found: a delivery whose claim another held was nacked, each nack one of the policy's attempts, so
 * while a live holder worked the policy forwarded the message unapplied, and the holder then rolled back
 * (before the holding move: 30 chains, 3 tries, 10 repeats, green at 19 s a chain; no move produced a
 * live holder). With the holding move, on the consumer as it was (and with the fix broken on purpose,
 * {@code IN_PROGRESS} nacked again), red on the first try, shrunk to five moves starting with the holding
 * one: "copies forwarded by the subscription's dead-letter policy, their 10 delivery attempts spent ...
 * Expecting empty but was: ["w5-e0#1"]". Green with the fix: 9 chains ({@code -Donce.pubsubChain.tries=3};
 * 13 holders, 10 of them met by another delivery, up to 11 in-progress tries a chain), about 40 s a chain.
 * The first runs found the wiring's: without an ack deadline the messages the emulator had streamed to a
 * cut process came back only after the client's 60 s stream deadline. Goes red when the mechanism is
 * broken: with every message acked as it is taken from the buffer, on the first try, shrunk to one move
 * ({@code publish [SWALLOW, OK]}): a FAILED_RETRYABLE delivery acked.
 */
@AddLifecycleHook(SkipWithoutPubSub.class)
class PubSubConsumerStateMachineTest {

    static final int TRIES = 3;
    static final int CHAINS = BrokerChain.chainsPerTry("pubsub");
    static final Duration LOCK_TIMEOUT = Duration.ofMillis(100);
    /**
     * Pub/Sub's least, as a user who wants a dead process's messages back soon sets it: without it the
     * client opens its stream with a 60 s deadline, and what the emulator streamed to a dead process
     * (it keeps a cut stream up to 5 s, see {@link TestPubSub#STREAMS_END_WITHIN_5_S}) comes back a minute later.
     */
    static final Duration ACK_DEADLINE = Duration.ofSeconds(10);

    static final int HOLD_SECONDS = 12;
    static final int SHORT_LEASE_SECONDS = 1;
    /**
     * The subscription's dead-letter policy: more attempts than the scripts' failures, lapses and crashes spend on
     * a message, so the policy forwards nothing unless attempts are spent on nothing (nacks of a claim another
     * delivery holds); the consumer's own dead-lettering decides.
     */
    static final int MAX_DELIVERY_ATTEMPTS = 10;
    /** Two threads a process: a copy that comes to the process whose other thread holds its claim meets it there. */
    static final int THREADS = 2;
    /** The tries of a message kept because another delivery held its claim. */
    static final RetryPolicy KEPT_TRIES = RetryPolicy.builder()
            .initialDelay(Duration.ofMillis(50))
            .maxDelay(Duration.ofMillis(500))
            .maxRetries(RetryPolicy.MAX_RETRIES_LIMIT)
            .build();

    private static final StateMachines.Databases databases = new StateMachines.Databases(8);

    @AfterContainer
    static void close() {
        databases.close();
    }

    @Property(tries = TRIES)
    void subscriptionWithDeadLetters(@ForAll("chains") List<ActionChain<World>> chains) throws Exception {
        BrokerChain.run(chains, () -> new World(databases.postgres()));
    }

    @Provide
    Arbitrary<List<ActionChain<World>>> chains() {
        return BrokerChain.perTry(
                BrokerChain.moves(
                                BrokerChain.scripts(2),
                                World::publish,
                                BrokerChain.picks(),
                                World::publishAgain,
                                "crash after next commit, before its ack")
                        .starts(
                                "second consumer starts with",
                                Arbitraries.of("default lease", SHORT_LEASE_SECONDS + " s lease"),
                                World::startB)
                        .crashWeight(1)
                        .build()
                        .withAction(
                                2,
                                BrokerChain.move(
                                        w -> true,
                                        Arbitraries.just(0),
                                        "publish, its first call holding the claim until a copy met it, then failing",
                                        (World w, Integer i) -> w.publishHeld()))
                        .withMaxTransformations(8),
                CHAINS);
    }

    /** One message streamed to a process: its copy, ack id, delivery attempt and how often it was seen before. */
    record Receipt(String id, String process, String copy, String ackId, int attempt, int raw) {}

    /** One delivery the engine processed (or one more try of it), as its process's outcome listener saw it. */
    record Processed(String process, String receipt, String copy, String eventId, boolean redelivered, Status status)
            implements BrokerWorld.Handled {
        /**
         * What the consumer must do with it, per its documentation; {@code keep}: nothing, it is kept in hand and
         * settled by a later try of its own (nacked only when its process closes).
         */
        String verdict() {
            return switch (status) {
                case APPLIED, DUPLICATE -> "ack";
                case FAILED_PERMANENT -> "dead-letter";
                case IN_PROGRESS -> "keep";
                default -> "nack";
            };
        }
    }

    /** One process: its own channel, engine and consumer. */
    static final class Process extends BrokerProcess {
        final Set<String> closing;
        final boolean shortLease;
        final ManagedChannel channel;
        final PubSubConsumer consumer;

        Process(String name, boolean shortLease, World w) {
            super(name);
            this.closing = w.closing;
            this.shortLease = shortLease;
            this.channel = ManagedChannelBuilder.forTarget(TestPubSub.host())
                    .usePlaintext()
                    .intercept(w.observer(this), TestPubSub.STREAMS_END_WITHIN_5_S)
                    .build();
            IdempotentConsumer engine = IdempotentConsumer.builder()
                    .dataSource(Proxies.afterCommit(w.db.dataSource(), () -> {
                        if (crashesNow()) {
                            channel.shutdownNow(); // dies in the ack gap: committed, the ack not sent
                        }
                    }))
                    .consumer(w.consumerName)
                    .handler((d, tx) -> {
                        if (crashed()) {
                            w.zombieCalls.add(d.headers().get("test-receipt"));
                        }
                        w.handler.handle(d, tx);
                    })
                    .lockTimeout(LOCK_TIMEOUT)
                    .meterRegistry(w.registry)
                    .outcomeListener((d, o) -> w.processed(this, d, o))
                    .build();
            TransportChannelProvider provider =
                    FixedTransportChannelProvider.create(GrpcTransportChannel.create(channel));
            PubSubConsumer.Builder builder = TestPubSub.consumer(w.subscription, engine, provider)
                    .deadLetters(w.deadLetters)
                    .ackDeadline(ACK_DEADLINE)
                    .threads(THREADS)
                    .receiveRetries(KEPT_TRIES);
            if (shortLease) {
                builder.lease(Duration.ofSeconds(SHORT_LEASE_SECONDS));
            }
            this.consumer = builder.build().start();
        }

        @Override
        protected boolean running() {
            return consumer.isRunning();
        }

        @Override
        protected void stop() {
            closing.add(name); // its close nacks what it keeps
            try {
                consumer.close();
            } finally {
                channel.shutdownNow();
            }
        }
    }

    static final class World extends BrokerWorld<Process, Processed> {
        final TopicName topic;
        final TopicName deadLetterTopic;
        final ProjectSubscriptionName subscription;
        final ProjectSubscriptionName deadLetterSubscription;
        final ManagedChannel deadLetterChannel;
        final Publisher deadLetters;
        final PubSubPublisher publisher = TestPubSub.outboxPublisher();
        final Map<String, AtomicInteger> rawReceives = new ConcurrentHashMap<>(); // copy -> times streamed
        final Map<String, Receipt> receipts = new ConcurrentHashMap<>(); // receipt id -> receive
        final Map<String, String> receiptOfAckId = new ConcurrentHashMap<>();
        final Map<String, String> acked = new ConcurrentHashMap<>(); // receipt id -> process, sent on a live channel
        final Map<String, String> nacked = new ConcurrentHashMap<>();
        final Map<String, AtomicInteger> extended = new ConcurrentHashMap<>();
        final Map<String, String> deadLettered = new ConcurrentHashMap<>(); // receipt id -> process, published
        final Set<String> zombieCalls = ConcurrentHashMap.newKeySet(); // receipts handled after their channel was cut
        final Set<String> closing = ConcurrentHashMap.newKeySet(); // processes closed (they nack what they keep)
        final Set<String> heldUntilMet = ConcurrentHashMap.newKeySet(); // events whose first call holds until met
        final Set<String> holding = ConcurrentHashMap.newKeySet(); // of those, the ones whose first call held
        final TopicName policyTopic; // where the subscription's dead-letter policy forwards
        final ProjectSubscriptionName policySubscription;
        final AtomicInteger receiptIds = new AtomicInteger();
        boolean bShortLease;

        World(TestDatabase db) throws Exception {
            super(db, n -> "cloudsm-pubsub-" + n, 0);
            String name = "cloudsm-sm-" + n + "-" + System.nanoTime();
            topic = TestPubSub.topic(name);
            deadLetterTopic = TestPubSub.topic(name + "-dlq");
            deadLetterSubscription = TestPubSub.subscription(deadLetterTopic, name + "-dlq", s -> s);
            policyTopic = TestPubSub.topic(name + "-policy");
            policySubscription = TestPubSub.subscription(policyTopic, name + "-policy", s -> s);
            subscription = TestPubSub.subscription(
                    topic,
                    name,
                    s -> s.setDeadLetterPolicy(DeadLetterPolicy.newBuilder()
                            .setDeadLetterTopic(policyTopic.toString())
                            .setMaxDeliveryAttempts(MAX_DELIVERY_ATTEMPTS)));
            deadLetterChannel = ManagedChannelBuilder.forTarget(TestPubSub.host())
                    .usePlaintext()
                    .intercept(deadLetterObserver())
                    .build();
            deadLetters = Publisher.newBuilder(deadLetterTopic)
                    .setChannelProvider(
                            FixedTransportChannelProvider.create(GrpcTransportChannel.create(deadLetterChannel)))
                    .setCredentialsProvider(TestPubSub.NO_CREDENTIALS)
                    .build();
            startA();
        }

        /**
         * A SLOW call holds its transaction until Pub/Sub hands its message out again, or for {@value #HOLD_SECONDS}
         * s; the first call of an event {@link #publishHeld} published holds it until another delivery met its claim
         * {@value #MAX_DELIVERY_ATTEMPTS} times (as many as the policy allows attempts), or for {@value #HOLD_SECONDS}
         * s, and then fails retryably: its transaction rolls back.
         */
        @Override
        protected void slow(Delivery d) {
            if (heldUntilMet.remove(d.eventId())) {
                holding.add(d.eventId());
                try {
                    await().atMost(Duration.ofSeconds(HOLD_SECONDS))
                            .pollInterval(Duration.ofMillis(50))
                            .until(() -> met(d.eventId()) >= MAX_DELIVERY_ATTEMPTS);
                } catch (ConditionTimeoutException held) {
                    // held the whole time
                }
                throw new RetryableException("the holder of " + d.eventId() + " fails after it was met: rolled back");
            }
            String copy = d.headers().get(ScriptedHandler.COPY_HEADER);
            int seen = receipts.get(d.headers().get("test-receipt")).raw();
            try {
                await().atMost(Duration.ofSeconds(HOLD_SECONDS))
                        .pollInterval(Duration.ofMillis(50))
                        .until(() -> rawReceives.get(copy).get() > seen);
            } catch (ConditionTimeoutException held) {
                // held the whole time: nothing handed it out again
            }
        }

        /** The first process with the default lease, the second as the move that started it says. */
        @Override
        protected Process start(String name, boolean second) {
            return new Process(name, second && bShortLease, this);
        }

        // ---- moves

        void publish(List<Behaviour> script) {
            send(newEvent(script));
        }

        void publishAgain(int pick) {
            send(publishedEvent(pick));
        }

        /**
         * A new event whose first call holds its claim, and once it holds, a producer's second copy of it: whichever
         * process or thread gets the copy meets a live holder ({@code IN_PROGRESS}) until the holder rolls back.
         */
        void publishHeld() {
            String eventId = newEvent(List.of(Behaviour.SLOW));
            heldUntilMet.add(eventId);
            send(eventId);
            try {
                await().atMost(Duration.ofSeconds(30))
                        .pollInterval(Duration.ofMillis(50))
                        .until(() -> holding.contains(eventId));
            } catch (ConditionTimeoutException notYet) {
                moves.add("(" + eventId + " not held within 30 s)"); // a crashed process's stream took it
            }
            send(eventId);
        }

        private void send(String eventId) {
            String copy = nextCopy(eventId);
            copies.put(copy, eventId);
            try {
                publisher.publish(new OutboxMessage(
                        0,
                        eventId,
                        topic.getTopic(),
                        null,
                        ("payload of " + eventId).getBytes(StandardCharsets.UTF_8),
                        Map.of("test-copy", copy),
                        eventId,
                        0,
                        null));
            } catch (Exception e) {
                throw new IllegalStateException("publishing " + copy, e);
            }
        }

        void startB(String lease) {
            bShortLease = !lease.equals("default lease");
            startB();
        }

        // ---- observation

        void processed(Process p, Delivery d, Outcome o) {
            Map<String, String> h = d.headers();
            processed.add(new Processed(
                    p.name, h.get("test-receipt"), h.get("test-copy"), d.eventId(), d.redelivered(), o.status()));
        }

        /** Sees what a process's channel streams in (rewritten to carry the receipt's id) and every ack, nack, extension. */
        ClientInterceptor observer(Process p) {
            return GrpcTap.of(
                    message -> message instanceof StreamingPullResponse r ? received(p, r) : message, message -> {
                        if (message instanceof AcknowledgeRequest r) {
                            acks(p, r.getAckIdsList());
                        } else if (message instanceof ModifyAckDeadlineRequest r) {
                            modacks(p, r.getAckIdsList(), r.getAckDeadlineSeconds());
                        } else if (message instanceof StreamingPullRequest r) {
                            acks(p, r.getAckIdsList());
                            for (int i = 0; i < r.getModifyDeadlineAckIdsCount(); i++) {
                                modacks(p, List.of(r.getModifyDeadlineAckIds(i)), r.getModifyDeadlineSeconds(i));
                            }
                        }
                    });
        }

        private StreamingPullResponse received(Process p, StreamingPullResponse response) {
            StreamingPullResponse.Builder seen = response.toBuilder().clearReceivedMessages();
            for (ReceivedMessage m : response.getReceivedMessagesList()) {
                String copy = m.getMessage().getAttributesOrThrow("test-copy");
                String id = "r" + receiptIds.incrementAndGet();
                int raw = rawReceives
                        .computeIfAbsent(copy, k -> new AtomicInteger())
                        .incrementAndGet();
                receipts.put(id, new Receipt(id, p.name, copy, m.getAckId(), m.getDeliveryAttempt(), raw));
                receiptOfAckId.put(m.getAckId(), id);
                seen.addReceivedMessages(
                        m.toBuilder().setMessage(m.getMessage().toBuilder().putAttributes("test-receipt", id)));
            }
            return seen.build();
        }

        private void acks(Process p, List<String> ackIds) {
            for (String ackId : ackIds) {
                String id = receiptOfAckId.get(ackId);
                Receipt r = receipts.get(id);
                if (!deadLettered.containsKey(id) && !claimCommitted(copies.get(r.copy()))) {
                    violations.add("ack of " + r + " before its event's claim committed");
                }
                if (p.crashed()) {
                    continue; // never reaches Pub/Sub
                }
                if (acked.putIfAbsent(id, p.name) != null) {
                    violations.add(r + " acked twice");
                }
            }
        }

        private void modacks(Process p, List<String> ackIds, int seconds) {
            for (String ackId : ackIds) {
                String id = receiptOfAckId.get(ackId);
                if (p.crashed()) {
                    continue;
                }
                if (seconds == 0) {
                    nacked.putIfAbsent(id, p.name);
                } else {
                    extended.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
                }
            }
        }

        /** Sees every publish to the dead-letter topic that Pub/Sub confirmed. */
        private ClientInterceptor deadLetterObserver() {
            return new ClientInterceptor() {
                @Override
                public <Q, R> ClientCall<Q, R> interceptCall(
                        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                    List<String> sent = new ArrayList<>();
                    return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                        @Override
                        public void start(Listener<R> listener, Metadata headers) {
                            super.start(
                                    new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                                        @Override
                                        public void onClose(io.grpc.Status status, Metadata trailers) {
                                            if (status.isOk()) {
                                                for (String id : sent) {
                                                    if (deadLettered.putIfAbsent(
                                                                    id,
                                                                    receipts.get(id)
                                                                            .process())
                                                            != null) {
                                                        violations.add(receipts.get(id) + " dead-lettered twice");
                                                    }
                                                }
                                            }
                                            super.onClose(status, trailers);
                                        }
                                    },
                                    headers);
                        }

                        @Override
                        public void sendMessage(Q message) {
                            if (message instanceof PublishRequest r) {
                                for (PubsubMessage m : r.getMessagesList()) {
                                    sent.add(m.getAttributesOrThrow("test-receipt"));
                                }
                            }
                            super.sendMessage(message);
                        }
                    };
                }
            };
        }

        // ---- the oracle

        /**
         * Safety, at any moment: every settlement agrees with the latest outcome of its delivery (a delivery kept
         * because another held its claim is tried again), nothing is acked unprocessed.
         */
        @Override
        public void check() {
            super.check();
            Map<String, Processed> latest = new HashMap<>();
            for (Processed p : processed) {
                latest.put(p.receipt(), p);
            }
            for (Processed p : latest.values()) {
                String what = p + " (" + receipts.get(p.receipt()) + ") after " + moves;
                switch (p.verdict()) {
                    case "ack" -> {
                        assertThat(deadLettered).as("dead-lettered: " + what).doesNotContainKey(p.receipt());
                        assertThat(nacked).as("nacked: " + what).doesNotContainKey(p.receipt());
                    }
                    case "nack" -> {
                        assertThat(deadLettered).as("dead-lettered: " + what).doesNotContainKey(p.receipt());
                        assertThat(acked).as("acked: " + what).doesNotContainKey(p.receipt());
                    }
                    case "keep" -> {
                        assertThat(deadLettered).as("dead-lettered: " + what).doesNotContainKey(p.receipt());
                        assertThat(acked).as("acked: " + what).doesNotContainKey(p.receipt());
                        if (!closing.contains(p.process())) {
                            assertThat(nacked)
                                    .as("nacked while another delivery held its claim (each nack spends a delivery"
                                            + " attempt of the policy's " + MAX_DELIVERY_ATTEMPTS + "), its process"
                                            + " not closed: " + what)
                                    .doesNotContainKey(p.receipt());
                        }
                    }
                    default -> {
                        if (acked.containsKey(p.receipt())) {
                            assertThat(deadLettered)
                                    .as("acked before it was dead-lettered: " + what)
                                    .containsKey(p.receipt());
                        }
                    }
                }
            }
            for (String id : acked.keySet()) {
                assertThat(processed)
                        .as("%s acked unprocessed", receipts.get(id))
                        .anyMatch(p -> p.receipt().equals(id));
            }
        }

        /** The copy's latest delivery seen. */
        private Receipt last(String copy) {
            return receipts.values().stream()
                    .filter(r -> r.copy().equals(copy))
                    .max((x, y) -> Integer.compare(x.raw(), y.raw()))
                    .orElse(null);
        }

        /** "acked" or "dead-lettered" once the copy's latest delivery was acked; null while it may come back. */
        private String fate(String copy) {
            Receipt last = last(copy);
            if (last == null || !acked.containsKey(last.id())) {
                return null;
            }
            return deadLettered.containsKey(last.id()) ? "dead-lettered" : "acked";
        }

        /** Waits until every copy's latest delivery was acked, then stops the consumers and checks. */
        @Override
        public void drainAndCheck() throws Exception {
            moves.add("drain");
            List<String> forwarded = new ArrayList<>();
            try {
                // A liveness bound, not a check: each crash leaves its streamed messages with the dead process
                // until the 10 s ack deadline, a second crash another 10 s, and the emulator streams slowly under
                // load (a CI run drained in just over 60 s, every copy acked by then)
                await().atMost(Duration.ofSeconds(150))
                        .pollInterval(Duration.ofMillis(50))
                        .until(() -> {
                            supervise();
                            forwarded.addAll(pull(policySubscription));
                            return !forwarded.isEmpty()
                                    || copies.keySet().stream().allMatch(c -> fate(c) != null);
                        });
            } catch (ConditionTimeoutException e) {
                Map<String, String> fates = new TreeMap<>();
                copies.keySet().forEach(c -> fates.put(c, String.valueOf(fate(c))));
                throw new AssertionError(
                        "did not drain after " + moves + ": fates " + fates + ", receipts " + receipts.values()
                                + ", processed " + processed + ", acked " + acked + ", nacked " + nacked
                                + ", dead-lettered " + deadLettered + ", violations " + violations,
                        e);
            }
            String what = "after " + moves + ", receipts " + receipts.values() + ", processed " + processed;
            assertThat(forwarded)
                    .as(
                            "copies forwarded by the subscription's dead-letter policy, their %d delivery attempts spent, %s",
                            MAX_DELIVERY_ATTEMPTS, what)
                    .isEmpty();
            a.close();
            if (b != null) {
                b.close();
                b = null;
            }
            check();

            Map<String, Long> expectedDead = new TreeMap<>();
            deadLettered
                    .keySet()
                    .forEach(id -> expectedDead.merge(receipts.get(id).copy(), 1L, Long::sum));
            Map<String, Long> dead = new TreeMap<>();
            long want = deadLettered.size();
            await().atMost(Duration.ofSeconds(20))
                    .pollInterval(Duration.ofMillis(100))
                    .until(() -> {
                        for (String copy : pull(deadLetterSubscription)) {
                            dead.merge(copy, 1L, Long::sum);
                        }
                        return dead.values().stream().mapToLong(Long::longValue).sum() >= want;
                    });
            assertThat(dead).as("dead-letter topic, " + what).isEqualTo(expectedDead);
            Map<String, Boolean> ackedEvent = new HashMap<>();
            for (String copy : copies.keySet()) {
                if (fate(copy).equals("acked")) {
                    ackedEvent.put(copies.get(copy), true);
                }
            }
            Map<String, Long> effectRows = handler.effects(db.dataSource());
            for (String id : events) {
                long applied = applied(id);
                // dead-lettered and yet applied only by a zombie: Pub/Sub meanwhile handed the message on
                boolean zombie = processed.stream()
                        .anyMatch(p -> p.eventId().equals(id)
                                && p.status() == Status.APPLIED
                                && zombieCalls.contains(p.receipt()));
                long expected = ackedEvent.containsKey(id) ? 1 : zombie ? applied : 0;
                assertThat(effectRows.getOrDefault(id, 0L))
                        .as("effects of %s (a message acked: %s), %s", id, ackedEvent.containsKey(id), what)
                        .isEqualTo(expected)
                        .isEqualTo(applied);
            }

            long redeliveries = 0;
            for (Processed p : processed) {
                Receipt r = receipts.get(p.receipt());
                assertThat(p.redelivered())
                        .as("%s flagged redelivered exactly when its delivery attempt is above 1; %s", r, what)
                        .isEqualTo(r.attempt() > 1);
                redeliveries += p.redelivered() ? 1 : 0;
                EngineMeters.assertDuplicateOfApplied(p.status(), p.eventId(), effectRows, r, what);
            }
            EngineMeters.assertAgree(
                    registry, processed.stream().map(Processed::status).toList(), redeliveries, what);
            System.out.printf(
                    "PUBSUB chain %d: %d moves, %d messages, %d deliveries (attempts %s), %d acked, %d to nack, %d nacked,"
                            + " %d extended, %d dead-lettered, %d zombie calls, %d holders (%d met), %d in progress%n",
                    n,
                    moves.size(),
                    copies.size(),
                    receipts.size(),
                    receipts.values().stream()
                            .map(Receipt::attempt)
                            .distinct()
                            .sorted()
                            .toList(),
                    acked.size(),
                    processed.stream().filter(p -> p.verdict().equals("nack")).count(),
                    nacked.size(),
                    extended.size(),
                    deadLettered.size(),
                    zombieCalls.size(),
                    holding.size(),
                    holding.stream().filter(e -> met(e) > 0).count(),
                    processed.stream()
                            .filter(p -> p.status() == Status.IN_PROGRESS)
                            .count());
        }

        /** The copies of what {@code s} holds now, acked there. */
        private static List<String> pull(ProjectSubscriptionName s) {
            // returnImmediately: the emulator's pull otherwise waits for a message that may never come
            @SuppressWarnings("deprecation")
            PullResponse r = TestPubSub.subscriptions()
                    .pull(PullRequest.newBuilder()
                            .setSubscription(s.toString())
                            .setMaxMessages(100)
                            .setReturnImmediately(true)
                            .build());
            List<String> copies = new ArrayList<>();
            List<String> ackIds = new ArrayList<>();
            for (ReceivedMessage m : r.getReceivedMessagesList()) {
                copies.add(m.getMessage().getAttributesOrThrow("test-copy"));
                ackIds.add(m.getAckId());
            }
            if (!ackIds.isEmpty()) {
                TestPubSub.subscriptions().acknowledge(s, ackIds);
            }
            return copies;
        }

        @Override
        public void close() throws Exception {
            try {
                a.close();
                if (b != null) {
                    b.close();
                }
            } finally {
                publisher.close();
                deadLetters.shutdown();
                deadLetters.awaitTermination(10, TimeUnit.SECONDS);
                deadLetterChannel.shutdownNow();
                TestPubSub.delete(topic, subscription);
                TestPubSub.delete(deadLetterTopic, deadLetterSubscription);
                TestPubSub.delete(policyTopic, policySubscription);
            }
        }
    }
}
