package dev.once.spring;

import static dev.once.testsupport.StateMachines.move;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.cloud.spring.pubsub.core.PubSubTemplate;
import com.google.cloud.spring.pubsub.integration.AckMode;
import com.google.cloud.spring.pubsub.integration.inbound.PubSubMessageSource;
import com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage;
import com.google.cloud.spring.pubsub.support.GcpPubSubHeaders;
import com.google.pubsub.v1.AcknowledgeRequest;
import com.google.pubsub.v1.ModifyAckDeadlineRequest;
import com.google.pubsub.v1.PullResponse;
import com.google.pubsub.v1.ReceivedMessage;
import dev.once.testsupport.SkipWithoutPubSub;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.ActionChain;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.integration.StaticMessageHeaderAccessor;
import org.springframework.integration.acks.AcknowledgmentCallback;
import org.springframework.integration.channel.DirectChannel;
import org.springframework.integration.config.EnableIntegration;
import org.springframework.integration.endpoint.SourcePollingChannelAdapter;
import org.springframework.integration.transaction.TransactionInterceptorBuilder;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.messaging.Message;
import org.springframework.scheduling.Trigger;
import org.springframework.scheduling.concurrent.SimpleAsyncTaskScheduler;

/**
 * A Spring Integration flow polling Spring Cloud GCP's {@code PubSubMessageSource} (synchronous pull from Google's
 * Pub/Sub emulator) into an {@code @IdempotentListener} handler, through a real {@code SourcePollingChannelAdapter}
 * whose poll this test runs on its own thread: in each {@code AckMode} (AUTO, AUTO_ACK, MANUAL), with a plain poller
 * and with a transactional one (the poller's advice chain a {@code TransactionInterceptor} of the application's
 * transaction manager, in which the call runs), bodies that leave the message to once, ack it through the original
 * message or through the source's {@code AcknowledgmentCallback} header, nack it either way, fail, ack then fail, or
 * write a row whose deferred constraint fails the commit after the flow returned; and copies of committed events.
 *
 * <p>The pulled message's replies are what the emulator got: every Acknowledge and ModifyAckDeadline(0) request on
 * the application's channel, recorded by a gRPC interceptor and matched to the message by the ack id its Pull
 * answer carried (a pulled message's {@code ack()} and {@code nack()} are each a request, none swallowed as the
 * streaming client swallows a second reply). The oracle: {@link AcknowledgingListenerWorld}'s invariants (one reply
 * per message; an acked message's claim committed; a committed event acked; the effect in the database iff the claim
 * committed), and per message: acked iff its body's work was to commit and the poller's transaction (or once's) did
 * commit; rolled back, it is nacked, except in AUTO_ACK, whose callback sends no nack (the message comes back when its
 * ack deadline lapses: {@link #autoAckLeavesARolledBackMessageToItsDeadline}). Each nacked message is delivered again
 * by the emulator. {@value #TRIES} tries of up to 12 moves, each poll on a topic and subscription of its own.
 */
class PubSubMessageSourcePropertyTest {

    static final int TRIES = 15;
    static final String SUFFIX = Long.toString(System.nanoTime(), 36);
    static final String CONSUMER = "polled-pubsub";
    static final AtomicLong sequences = new AtomicLong();
    static final AtomicLong moveCount = new AtomicLong();
    static final AtomicLong ids = new AtomicLong();
    static final AtomicLong topicsMade = new AtomicLong();
    static final AtomicLong redeliveries = new AtomicLong();

    private static TestDatabase db;
    private static AnnotationConfigApplicationContext context;
    private static PubSubTestBeans emulator;

    /** Pub/Sub message id by ack id, from the Pull answers; replies by message id, in the order sent. */
    static final Map<String, String> messageIds = new ConcurrentHashMap<>();

    static final Map<String, List<String>> replies = new ConcurrentHashMap<>();

    static synchronized void start() {
        if (context != null) {
            return;
        }
        emulator = new PubSubTestBeans(RECORDS_REPLIES);
        db = TestPostgres.shared().freshDatabase(6);
        db.execute(
                "CREATE TABLE ledger (event_id text NOT NULL)",
                // checked at commit: two rows of one key fail the commit after the flow returned
                "CREATE TABLE doomed (k int NOT NULL, CONSTRAINT doomed_k UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)");
        context = JdbcListenerBeans.context(db.dataSource(), Config.class);
    }

    @AfterContainer
    static void stop() {
        if (context != null) {
            context.close();
        }
        if (emulator != null) {
            emulator.close();
        }
        if (db != null) {
            db.close();
        }
        System.out.println("PubSubMessageSourcePropertyTest: sequences=" + sequences.get() + " moves="
                + moveCount.get() + " redelivered=" + redeliveries.get()
                + " lost=0 acked_rolled_back=0 unsettled=0 settled_twice=0 applied_twice=0");
    }

    /** Records what the emulator is told of each pulled message: its ack id (Pull), acks and nacks. */
    static final ClientInterceptor RECORDS_REPLIES = new ClientInterceptor() {
        @Override
        public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
            return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                @Override
                public void start(Listener<R> listener, Metadata headers) {
                    super.start(
                            new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                                @Override
                                public void onMessage(R message) {
                                    if (message instanceof PullResponse pulled) {
                                        for (ReceivedMessage m : pulled.getReceivedMessagesList()) {
                                            messageIds.put(
                                                    m.getAckId(), m.getMessage().getMessageId());
                                        }
                                    }
                                    super.onMessage(message);
                                }
                            },
                            headers);
                }

                @Override
                public void sendMessage(Q message) {
                    if (message instanceof AcknowledgeRequest ack) {
                        ack.getAckIdsList().forEach(id -> reply(id, "ack"));
                    } else if (message instanceof ModifyAckDeadlineRequest modify
                            && modify.getAckDeadlineSeconds() == 0) {
                        modify.getAckIdsList().forEach(id -> reply(id, "nack"));
                    }
                    super.sendMessage(message);
                }
            };
        }

        private void reply(String ackId, String reply) {
            String messageId = messageIds.get(ackId);
            if (messageId != null) {
                replies.computeIfAbsent(messageId, k -> new CopyOnWriteArrayList<>())
                        .add(reply);
            }
        }
    };

    @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    @EnableIntegration
    @org.springframework.context.annotation.Import(JdbcListenerBeans.class)
    static class Config {
        @org.springframework.context.annotation.Bean
        Payments payments(JdbcTemplate jdbc) {
            return new Payments(jdbc);
        }

        @org.springframework.context.annotation.Bean
        PubSubTemplate pubSubTemplate() {
            return emulator.template();
        }
    }

    /** What a handler body does with its message, after its effect. */
    enum Body {
        LEAVE_TO_ONCE,
        ACK,
        ACK_THROUGH_CALLBACK,
        NACK,
        NACK_THROUGH_CALLBACK,
        FAIL,
        ACK_THEN_FAIL,
        FAILS_THE_COMMIT;

        /** Whether the body's work is to commit: it neither fails nor asks for redelivery. */
        boolean keeps() {
            return this == LEAVE_TO_ONCE || this == ACK || this == ACK_THROUGH_CALLBACK;
        }
    }

    /** The application's handler, fed by the polled source's flow: the effect, then what the payload asks. */
    public static class Payments {
        final JdbcTemplate jdbc;

        Payments(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @IdempotentListener(consumer = CONSUMER)
        public void polled(Message<String> message) {
            String id = (String) message.getHeaders().get("once-event-id");
            jdbc.update("INSERT INTO ledger VALUES (?)", id);
            BasicAcknowledgeablePubsubMessage original =
                    GcpPubSubHeaders.getOriginalMessage(message).orElseThrow();
            AcknowledgmentCallback callback = StaticMessageHeaderAccessor.getAcknowledgmentCallback(message);
            switch (Body.valueOf(message.getPayload())) {
                case LEAVE_TO_ONCE -> {}
                case ACK -> original.ack();
                case ACK_THROUGH_CALLBACK -> callback.acknowledge(AcknowledgmentCallback.Status.ACCEPT);
                case NACK -> original.nack();
                case NACK_THROUGH_CALLBACK -> callback.acknowledge(AcknowledgmentCallback.Status.REQUEUE);
                case FAIL -> throw new IllegalStateException("the body of " + id + " fails");
                case ACK_THEN_FAIL -> {
                    original.ack();
                    throw new IllegalStateException("the body of " + id + " fails after its ack");
                }
                case FAILS_THE_COMMIT -> jdbc.update("INSERT INTO doomed VALUES (1), (1)");
            }
        }
    }

    /** One poll: the source's mode, whether the poller's advice chain is transactional, what the body does. */
    record Poll(AckMode mode, boolean transactional, Body body) {
        @Override
        public String toString() {
            return mode + (transactional ? " transactional poller " : " poller ") + body;
        }
    }

    @AddLifecycleHook(SkipWithoutPubSub.class)
    @Property(tries = TRIES)
    void polledPubSubSourceIntoAnIdempotentListener(@ForAll("chains") ActionChain<World> chain) throws Exception {
        start();
        World.next = new World();
        moveCount.addAndGet(AcknowledgingListenerWorld.run(World.next, chain));
        sequences.incrementAndGet();
    }

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        Arbitrary<Poll> polls = Combinators.combine(
                        Arbitraries.of(AckMode.class), Arbitraries.of(false, true), Arbitraries.of(Body.class))
                .as(Poll::new);
        return ActionChain.<World>startWith(() -> World.next)
                .withAction(6, move(w -> true, polls, "poll", World::poll))
                .withAction(2, move(w -> !w.committedEvents.isEmpty(), polls, "poll a copy", World::copy))
                .withMaxTransformations(12);
    }

    @Example
    void aTransactionalAutoPollerWhoseCommitFailsDoesNotLoseTheMessage() throws Exception {
        scripted(w -> w.poll(new Poll(AckMode.AUTO, true, Body.FAILS_THE_COMMIT)));
    }

    @Example
    void aNackInAnAutoPollerIsNotFollowedByTheSourcesAck() throws Exception {
        scripted(w -> w.poll(new Poll(AckMode.AUTO, false, Body.NACK)));
    }

    @Example
    void aManualTransactionalPollerAcksAfterTheCommit() throws Exception {
        scripted(w -> {
            w.poll(new Poll(AckMode.MANUAL, true, Body.ACK_THROUGH_CALLBACK));
            w.poll(new Poll(AckMode.MANUAL, true, Body.FAILS_THE_COMMIT));
        });
    }

    /** AUTO_ACK's callback sends no nack: a message rolled back comes again once its 10 s ack deadline lapses. */
    @Example
    void autoAckLeavesARolledBackMessageToItsDeadline() throws Exception {
        scripted(w -> {
            Polled h = w.poll(new Poll(AckMode.AUTO_ACK, false, Body.FAIL));
            assertThat(replies(h.messageId)).as("%s", w.moves).isEmpty();
            assertThat(w.redelivered(h, 30))
                    .as("%s delivered again after its deadline: %s", h, w.moves)
                    .isTrue();
        });
    }

    private static void scripted(java.util.function.Consumer<World> moves) throws Exception {
        start();
        AcknowledgingListenerWorld.scripted(new World(), moves);
    }

    static List<String> replies(String messageId) {
        return replies.getOrDefault(messageId, List.of());
    }

    /** A message polled into the flow: its subscription, its poll, the replies the emulator got for it. */
    static final class Polled extends AcknowledgingListenerWorld.Handed {
        final String messageId;
        final String subscription;
        final Poll poll;
        boolean copy;
        // once refused the call before its claim (the flow threw InvalidConfigurationException)
        boolean refused;

        Polled(String eventId, String messageId, String subscription, Poll poll, String kind) {
            super(eventId, messageId, kind);
            this.messageId = messageId;
            this.subscription = subscription;
            this.poll = poll;
        }
    }

    /** Keeps the adapter's poller instead of scheduling it: the test runs each poll on its own thread. */
    static final class PollOnDemand extends SimpleAsyncTaskScheduler {
        Runnable poller;

        @Override
        public ScheduledFuture<?> schedule(Runnable task, Trigger trigger) {
            poller = task;
            return super.schedule(() -> {}, Instant.now().plus(Duration.ofDays(1)));
        }
    }

    static final class World extends AcknowledgingListenerWorld {
        static World next;

        final Payments payments = context.getBean(Payments.class);
        final PubSubTemplate pubsub = context.getBean(PubSubTemplate.class);
        final JdbcTransactionManager tm = context.getBean(JdbcTransactionManager.class);
        final List<String[]> made = new ArrayList<>();

        World() {
            super(context.getBean(JdbcTransactionManager.class), db, CONSUMER);
        }

        Polled poll(Poll poll) {
            return poll("e-" + ids.incrementAndGet(), poll, "polled " + poll, false);
        }

        void copy(Poll poll) {
            poll(committedEvents.get(committedEvents.size() - 1), poll, "polled copy " + poll, true);
        }

        private Polled poll(String id, Poll poll, String kind, boolean copy) {
            String name = "polled-" + SUFFIX + "-" + topicsMade.incrementAndGet();
            emulator.create(name, name);
            made.add(new String[] {name});
            String messageId;
            try {
                messageId = pubsub.publish(name, poll.body().name(), Map.of("once-event-id", id))
                        .get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                throw new IllegalStateException("publishing " + id + " to " + name + " failed", e);
            }
            Polled h = new Polled(id, messageId, name, poll, kind);
            h.copy = copy;
            handed(h);
            calledIn(id);
            List<Throwable> thrown = new CopyOnWriteArrayList<>();
            PollOnDemand scheduler = new PollOnDemand();
            PubSubMessageSource source = new PubSubMessageSource(pubsub, name);
            source.setAckMode(poll.mode());
            source.setPayloadType(String.class);
            source.setBeanFactory(context);
            DirectChannel flow = new DirectChannel();
            flow.setBeanFactory(context);
            flow.afterPropertiesSet();
            @SuppressWarnings("unchecked")
            org.springframework.messaging.MessageHandler handler = m -> payments.polled((Message<String>) m);
            flow.subscribe(handler);
            SourcePollingChannelAdapter adapter = new SourcePollingChannelAdapter();
            adapter.setSource(source);
            adapter.setOutputChannel(flow);
            adapter.setMaxMessagesPerPoll(1);
            adapter.setTaskScheduler(scheduler);
            adapter.setErrorHandler(thrown::add);
            adapter.setBeanFactory(context);
            if (poll.transactional()) {
                adapter.setAdviceChain(List.of(new TransactionInterceptorBuilder()
                        .transactionManager(tm)
                        .build()));
            }
            adapter.afterPropertiesSet();
            adapter.start();
            try {
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (!messageIds.containsValue(messageId) && System.nanoTime() < deadline) {
                    scheduler.poller.run();
                }
            } finally {
                adapter.stop();
                scheduler.close();
            }
            assertThat(messageIds.containsValue(messageId))
                    .as("%s pulled by the source", h)
                    .isTrue();
            for (Throwable t : thrown) {
                Throwable cause = t;
                while (cause.getCause() != null) {
                    cause = cause.getCause();
                }
                moves.add("  threw " + cause.getClass().getSimpleName() + ": " + cause.getMessage());
                h.refused |= cause instanceof dev.once.InvalidConfigurationException;
            }
            h.settled.addAll(replies(messageId));
            if (h.settled.isEmpty() && poll.mode() == AckMode.AUTO_ACK) {
                h.settled.add("left to its deadline"); // AUTO_ACK's callback sends no nack
            }
            callReturned();
            return h;
        }

        @Override
        void checkSettled(AcknowledgingListenerWorld.Handed handed, boolean claimed) {
            Polled h = (Polled) handed;
            if (!h.copy) {
                assertThat(claimed)
                        .as(
                                "%s: committed iff its body neither failed nor asked for redelivery (and once did not"
                                        + " refuse the call): %s",
                                h, moves)
                        .isEqualTo(!h.refused && h.poll.body().keeps());
            }
            boolean kept = !h.refused && claimed && (h.copy || h.poll.body().keeps());
            assertThat(h.settled)
                    .as("%s acked iff its work committed (a copy of a committed event: acked): %s", h, moves)
                    .containsExactly(
                            kept ? "ack" : h.poll.mode() == AckMode.AUTO_ACK ? "left to its deadline" : "nack");
        }

        /** Ends the try and checks each nacked message is delivered again by the emulator. */
        @Override
        void end() {
            super.end();
            for (AcknowledgingListenerWorld.Handed handed : handed) {
                Polled h = (Polled) handed;
                if (h.settled.equals(List.of("nack"))) {
                    assertThat(redelivered(h, 10))
                            .as("%s nacked: delivered again by the emulator: %s", h, moves)
                            .isTrue();
                }
            }
        }

        /** Whether the emulator hands {@code h}'s message out again within {@code seconds} (acked to clear it). */
        boolean redelivered(Polled h, int seconds) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (System.nanoTime() < deadline) {
                for (var m : pubsub.pull(h.subscription, 10, true)) {
                    m.ack().join();
                    if (m.getPubsubMessage().getMessageId().equals(h.messageId)) {
                        redeliveries.incrementAndGet();
                        return true;
                    }
                }
            }
            return false;
        }

        @Override
        void close() {
            for (String[] m : made) {
                emulator.delete(m[0], m[0]);
            }
        }
    }
}
