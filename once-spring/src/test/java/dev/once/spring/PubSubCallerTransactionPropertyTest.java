package dev.once.spring;

import static dev.once.testsupport.StateMachines.move;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.cloud.spring.pubsub.core.PubSubTemplate;
import com.google.cloud.spring.pubsub.integration.PubSubHeaderMapper;
import com.google.cloud.spring.pubsub.support.BasicAcknowledgeablePubsubMessage;
import com.google.cloud.spring.pubsub.support.GcpPubSubHeaders;
import com.google.cloud.spring.pubsub.support.converter.ConvertedBasicAcknowledgeablePubsubMessage;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.PubsubMessage;
import dev.once.spring.SpringScopes.Kind;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.SkipWithoutPubSub;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.ActionChain;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.messaging.Message;

/**
 * Spring Cloud GCP Pub/Sub {@code @IdempotentListener} methods called in the caller's Spring transaction scopes, with
 * messages pulled from Google's Pub/Sub emulator and handed over the ways Spring Cloud GCP hands them: a
 * {@code BasicAcknowledgeablePubsubMessage} argument (as {@code PubSubTemplate.subscribe} passes it), a
 * {@code ConvertedBasicAcknowledgeablePubsubMessage} ({@code subscribeAndConvert}), and a {@code Message<String>}
 * built as a {@code PubSubInboundChannelAdapter} builds it (the attributes as headers, the converted message in the
 * {@code gcp_pubsub_original_message} header), in {@code AckMode.MANUAL} (the body acks through the header) and
 * {@code AckMode.AUTO} (the adapter acks the original after the call returned, nacks after it threw; only outside
 * any caller's scope: the adapter's subscriber thread has no transaction around its send). Random sequences of begin
 * REQUIRED / NESTED / REQUIRES_NEW, commit, rollback, setRollbackOnly and calls outside any scope (the listener's own
 * transaction), with bodies that ack, nack, ack then fail, fail, ack twice, ack from another thread, or leave the
 * message to once, and copies of events (same event id, another message) applied in an ended or the open transaction.
 *
 * <p>Each message's replies reach the emulator the way the streaming client's {@code AckReplyConsumer} sends them:
 * the first one only (the client's reply future is set once). The oracle: {@link AcknowledgingListenerWorld}'s
 * invariants (settled exactly once; acked only where its event's claim committed; the effect in the database iff the
 * claim committed; a committed event has an acked message), and per message: acked iff the call's work committed (a
 * mark the caller writes in its scope right after the call is there; a call of its own: it returned and its body did
 * not nack), so a duplicate in a committed scope is acked and a body's nack rolls back. Then, against the emulator:
 * every reply it got was accepted, every nacked message is delivered again and no acked one is.
 * {@value #TRIES} tries of up to 25 moves.
 */
class PubSubCallerTransactionPropertyTest {

    static final int TRIES = 15;
    static final String SUFFIX = Long.toString(System.nanoTime(), 36);
    static final String TOPIC = "spring-caller-" + SUFFIX;
    static final String SUBSCRIPTION = "spring-caller-" + SUFFIX;
    static final AtomicLong sequences = new AtomicLong();
    static final AtomicLong moveCount = new AtomicLong();
    static final AtomicLong ids = new AtomicLong();
    static final AtomicLong redeliveries = new AtomicLong();

    private static TestDatabase db;
    private static AnnotationConfigApplicationContext context;
    private static PubSubTestBeans emulator;

    static synchronized void start() {
        if (context != null) {
            return;
        }
        emulator = new PubSubTestBeans();
        // a message left unsettled comes back after 10 s at the earliest: never within the run that left it
        emulator.create(TOPIC, SUBSCRIPTION);
        db = TestPostgres.shared().freshDatabase(6);
        db.execute("CREATE TABLE ledger (event_id text NOT NULL)", "CREATE TABLE marks (message_id text NOT NULL)");
        context = JdbcListenerBeans.context(db.dataSource(), Config.class);
    }

    @AfterContainer
    static void stop() {
        if (context != null) {
            context.close();
        }
        if (emulator != null) {
            emulator.delete(TOPIC, SUBSCRIPTION);
            emulator.close();
        }
        if (db != null) {
            db.close();
        }
        System.out.println("PubSubCallerTransactionPropertyTest: sequences=" + sequences.get() + " moves="
                + moveCount.get() + " redelivered=" + redeliveries.get()
                + " lost=0 acked_rolled_back=0 unsettled=0 applied_twice=0");
    }

    @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
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

    /** What a listener body does with its message, after its effect. */
    enum Body {
        ACK,
        NACK,
        ACK_THEN_FAIL,
        FAIL,
        ACK_TWICE,
        ACK_ON_ANOTHER_THREAD,
        LEAVE_TO_ONCE
    }

    /** The application's listeners, one consumer: the effect, then what the payload asks of the message. */
    public static class Payments {
        final JdbcTemplate jdbc;
        // the Pub/Sub message ids whose body ran, and those whose body nacked
        final Set<String> ran = new HashSet<>();
        final Set<String> nacked = new HashSet<>();

        Payments(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        // methods, not fields: the bean is a class proxy, whose fields are its own
        public boolean ran(String messageId) {
            return ran.contains(messageId);
        }

        public boolean nacked(String messageId) {
            return nacked.contains(messageId);
        }

        /** As {@code PubSubTemplate.subscribe} hands it. */
        @IdempotentListener(consumer = "caller-pubsub")
        public void pulled(BasicAcknowledgeablePubsubMessage message) {
            PubsubMessage m = message.getPubsubMessage();
            body(m.getAttributesOrThrow("once-event-id"), m.getData().toStringUtf8(), message);
        }

        /** The same, its claim made in the commit's round trip after the body (in a transaction of its own). */
        @IdempotentListener(consumer = "caller-pubsub", claimTiming = dev.once.ClaimTiming.AT_COMMIT)
        public void pulledAtCommit(BasicAcknowledgeablePubsubMessage message) {
            pulled(message);
        }

        /** As {@code PubSubTemplate.subscribeAndConvert} hands it. */
        @IdempotentListener(consumer = "caller-pubsub")
        public void converted(ConvertedBasicAcknowledgeablePubsubMessage<String> message) {
            body(message.getPubsubMessage().getAttributesOrThrow("once-event-id"), message.getPayload(), message);
        }

        /** As a {@code PubSubInboundChannelAdapter} hands it: the body acks through the header (MANUAL's recipe). */
        @IdempotentListener(consumer = "caller-pubsub")
        public void adapter(Message<String> message) {
            BasicAcknowledgeablePubsubMessage original =
                    GcpPubSubHeaders.getOriginalMessage(message).orElseThrow();
            body((String) message.getHeaders().get("once-event-id"), message.getPayload(), original);
        }

        private void body(String id, String payload, BasicAcknowledgeablePubsubMessage message) {
            ran.add(message.getPubsubMessage().getMessageId());
            jdbc.update("INSERT INTO ledger VALUES (?)", id);
            switch (Body.valueOf(payload)) {
                case ACK -> message.ack();
                case NACK -> {
                    nacked.add(message.getPubsubMessage().getMessageId());
                    message.nack();
                }
                case ACK_THEN_FAIL -> {
                    message.ack();
                    throw new IllegalStateException("the body of " + id + " fails after its ack");
                }
                case FAIL -> throw new IllegalStateException("the body of " + id + " fails");
                case ACK_TWICE -> {
                    message.ack();
                    message.ack();
                }
                case ACK_ON_ANOTHER_THREAD ->
                    CompletableFuture.supplyAsync(message::ack, OwnThreads.each())
                            .thenCompose(f -> f)
                            .join();
                case LEAVE_TO_ONCE -> {}
            }
        }
    }

    /** How the message reaches the listener. */
    enum Form {
        PULLED,
        CONVERTED,
        ADAPTER_MANUAL,
        PULLED_AT_COMMIT,
        // last: only outside a caller's scope
        ADAPTER_AUTO
    }

    @AddLifecycleHook(SkipWithoutPubSub.class)
    @Property(tries = TRIES)
    void pubSubListenersInTheCallersScopes(@ForAll("chains") ActionChain<World> chain) throws Exception {
        start();
        World.next = new World();
        moveCount.addAndGet(AcknowledgingListenerWorld.run(World.next, chain));
        sequences.incrementAndGet();
    }

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        Arbitrary<Body> bodies = Arbitraries.of(Body.class);
        return ActionChain.<World>startWith(() -> World.next)
                .withAction(3, move(w -> w.scopes.size() < 4, "begin REQUIRED", w -> w.begin(Kind.REQUIRED)))
                .withAction(
                        4,
                        move(
                                w -> w.scopes.size() < 4 && w.savepointAllowed(),
                                "begin NESTED",
                                w -> w.begin(Kind.NESTED)))
                .withAction(1, move(w -> w.scopes.size() < 4, "begin REQUIRES_NEW", w -> w.begin(Kind.REQUIRES_NEW)))
                .withAction(3, move(w -> true, bodies, "listen pulled", (w, b) -> w.listen(Form.PULLED, b)))
                .withAction(2, move(w -> true, bodies, "listen converted", (w, b) -> w.listen(Form.CONVERTED, b)))
                .withAction(
                        2, move(w -> true, bodies, "listen adapter MANUAL", (w, b) -> w.listen(Form.ADAPTER_MANUAL, b)))
                .withAction(
                        1,
                        move(
                                w -> true,
                                bodies,
                                "listen pulled AT_COMMIT",
                                (w, b) -> w.listen(Form.PULLED_AT_COMMIT, b)))
                .withAction(
                        1,
                        move(
                                w -> w.scopes.isEmpty(),
                                bodies,
                                "listen adapter AUTO",
                                (w, b) -> w.listen(Form.ADAPTER_AUTO, b)))
                .withAction(2, move(w -> w.copyable() != null, "listen to a copy", World::copy))
                .withAction(4, move(w -> !w.scopes.isEmpty(), "commit", World::commit))
                .withAction(3, move(w -> !w.scopes.isEmpty(), "rollback", World::rollback))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "setRollbackOnly", World::setRollbackOnly))
                .withMaxTransformations(25);
    }

    @Example
    void inACallersNestedStepRolledBackTheMessageIsNackedAndDeliveredAgain() throws Exception {
        scripted(w -> {
            w.begin(Kind.REQUIRED);
            w.begin(Kind.NESTED);
            w.listen(Form.PULLED, Body.ACK);
            w.rollback();
            w.commit();
        });
    }

    @Example
    void aCopyInACallersCommittedTransactionIsAckedAndNotAppliedAgain() throws Exception {
        scripted(w -> {
            w.listen(Form.CONVERTED, Body.ACK);
            w.begin(Kind.REQUIRED);
            w.copy();
            w.commit();
        });
    }

    private static void scripted(java.util.function.Consumer<World> moves) throws Exception {
        start();
        AcknowledgingListenerWorld.scripted(new World(), moves);
    }

    /**
     * A pulled message as the listener gets it, standing for the subscriber's: every reply recorded, the first sent to
     * the emulator and the later ones dropped, as the streaming client's {@code AckReplyConsumer} does.
     */
    static final class Replying implements ConvertedBasicAcknowledgeablePubsubMessage<String> {
        final BasicAcknowledgeablePubsubMessage pulled;
        final String payload;
        final Delivered handed;
        // once's replies are recorded on the message; the AUTO adapter's are not once's
        boolean adapter;

        Replying(BasicAcknowledgeablePubsubMessage pulled, String payload, Delivered handed) {
            this.pulled = pulled;
            this.payload = payload;
            this.handed = handed;
        }

        @Override
        public ProjectSubscriptionName getProjectSubscriptionName() {
            return pulled.getProjectSubscriptionName();
        }

        @Override
        public PubsubMessage getPubsubMessage() {
            return pulled.getPubsubMessage();
        }

        @Override
        public String getPayload() {
            return payload;
        }

        @Override
        public synchronized CompletableFuture<Void> ack() {
            if (!adapter) {
                handed.ack();
            }
            return reply("ack", pulled::ack);
        }

        @Override
        public synchronized CompletableFuture<Void> nack() {
            if (!adapter) {
                handed.nack();
            }
            return reply("nack", pulled::nack);
        }

        private CompletableFuture<Void> reply(String reply, java.util.function.Supplier<CompletableFuture<Void>> send) {
            if (handed.sent == null) {
                handed.sent = reply;
                handed.sending = send.get();
            }
            return handed.sending;
        }
    }

    /** A message pulled from the subscription: its Pub/Sub message id, the first reply the emulator got. */
    static final class Delivered extends AcknowledgingListenerWorld.Handed {
        final String messageId;
        final Form form;
        String sent;
        CompletableFuture<Void> sending;
        boolean redelivered;
        boolean returned;
        // the mark the caller wrote in its scope right after the call (null: the call's own transaction)
        String mark;

        Delivered(String eventId, String messageId, Form form, String kind) {
            super(eventId, messageId, kind);
            this.messageId = messageId;
            this.form = form;
        }
    }

    static final class World extends AcknowledgingListenerWorld {
        static World next;

        final Payments payments = context.getBean(Payments.class);
        final PubSubTemplate pubsub = context.getBean(PubSubTemplate.class);
        final JdbcTemplate jdbc = context.getBean(JdbcTemplate.class);
        final PubSubHeaderMapper headers = new PubSubHeaderMapper();
        final Map<String, Delivered> byMessageId = new HashMap<>();

        World() {
            super(context.getBean(JdbcTransactionManager.class), db, "caller-pubsub");
        }

        void listen(Form form, Body body) {
            call("e-" + ids.incrementAndGet(), form, body, form + " " + body);
        }

        void copy() {
            Form form = Form.values()[moves.size() % (scopes.isEmpty() ? 5 : 4)];
            call(copyable(), form, Body.ACK, form + " copy");
        }

        private void call(String id, Form form, Body body, String kind) {
            Replying message = pull(id, form, body, kind);
            Delivered h = message.handed;
            calledIn(id);
            try {
                switch (form) {
                    case PULLED -> payments.pulled(message);
                    case PULLED_AT_COMMIT -> payments.pulledAtCommit(message);
                    case CONVERTED -> payments.converted(message);
                    case ADAPTER_MANUAL, ADAPTER_AUTO -> payments.adapter(adapterMessage(message));
                }
                h.returned = true;
            } catch (RuntimeException | AssertionError e) {
                moves.add("  threw " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            if (form == Form.ADAPTER_AUTO) {
                // the adapter's own reply after the send: a no-op where once replied first
                message.adapter = true;
                if (h.returned) {
                    message.ack();
                } else {
                    message.nack();
                }
            }
            if (!scopes.isEmpty()) {
                h.mark = "m-" + h.messageId;
                jdbc.update("INSERT INTO marks VALUES (?)", h.mark);
            }
            callReturned();
        }

        /** The {@code Message} a {@code PubSubInboundChannelAdapter} sends for {@code message}. */
        private Message<String> adapterMessage(Replying message) {
            Map<String, Object> h = headers.toHeaders(message.getPubsubMessage().getAttributesMap());
            h.put(GcpPubSubHeaders.ORIGINAL_MESSAGE, message);
            return org.springframework.integration.support.MessageBuilder.withPayload(message.getPayload())
                    .copyHeaders(h)
                    .build();
        }

        /** Publishes a message for {@code id} and pulls it, unacknowledged, in {@code form}. */
        private Replying pull(String id, Form form, Body body, String kind) {
            String messageId;
            try {
                messageId = pubsub.publish(TOPIC, body.name(), Map.of("once-event-id", id))
                        .get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                throw new IllegalStateException("publishing " + id + " to " + TOPIC + " failed", e);
            }
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (System.nanoTime() < deadline) {
                List<Replying> pulled = new ArrayList<>();
                if (form == Form.PULLED || form == Form.PULLED_AT_COMMIT) {
                    pubsub.pull(SUBSCRIPTION, 10, true).forEach(m -> pulled.add(new Replying(m, null, null)));
                } else {
                    pubsub.pullAndConvert(SUBSCRIPTION, 10, true, String.class)
                            .forEach(m -> pulled.add(new Replying(m, m.getPayload(), null)));
                }
                Replying found = null;
                for (Replying r : pulled) {
                    String mid = r.getPubsubMessage().getMessageId();
                    if (mid.equals(messageId)) {
                        Delivered h = new Delivered(id, mid, form, kind);
                        found = new Replying(r.pulled, r.payload, h);
                        byMessageId.put(mid, h);
                        handed(h);
                    } else {
                        delivered(r);
                    }
                }
                if (found != null) {
                    return found;
                }
            }
            throw new IllegalStateException("message " + id + " not pulled from " + SUBSCRIPTION);
        }

        /** A message delivered again (or one an earlier run left unsettled): recorded, and acked to clear it. */
        private void delivered(Replying again) {
            Delivered h = byMessageId.get(again.getPubsubMessage().getMessageId());
            if (h != null) {
                h.redelivered = true;
                redeliveries.incrementAndGet();
            }
            again.pulled.ack().join();
        }

        @Override
        void checkSettled(AcknowledgingListenerWorld.Handed handed, boolean claimed) {
            Delivered h = (Delivered) handed;
            boolean kept = h.mark != null
                    ? count("SELECT count(*) FROM marks WHERE message_id = ?", h.mark) == 1
                    : h.returned && !payments.nacked(h.messageId);
            assertThat(h.settled)
                    .as(
                            "%s acked iff the call's work committed (%s; nack rolls back, a duplicate is acked): %s",
                            h, kept ? "committed" : "undone", moves)
                    .containsExactly(kept ? "ack" : "nack");
            assertThat(!payments.ran(h.messageId) || !kept || claimed)
                    .as("%s: its body ran and its work committed, so did its claim: %s", h, moves)
                    .isTrue();
        }

        /** Ends the scopes, checks the world, then what the emulator got: each reply accepted, nacks delivered again. */
        @Override
        void end() {
            super.end();
            List<Delivered> nacked = new ArrayList<>();
            for (AcknowledgingListenerWorld.Handed handed : handed) {
                Delivered h = (Delivered) handed;
                assertThat(h.sent)
                        .as("%s: the emulator got a reply: %s", h, moves)
                        .isNotNull();
                try {
                    h.sending.get(30, TimeUnit.SECONDS);
                } catch (Exception e) {
                    throw new AssertionError("the emulator refused the " + h.sent + " of " + h + ": " + moves, e);
                }
                if (h.sent.equals("nack")) {
                    nacked.add(h);
                }
            }
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (nacked.stream().anyMatch(h -> !h.redelivered) && System.nanoTime() < deadline) {
                pubsub.pull(SUBSCRIPTION, 10, true).forEach(m -> delivered(new Replying(m, null, null)));
            }
            for (AcknowledgingListenerWorld.Handed handed : handed) {
                Delivered h = (Delivered) handed;
                assertThat(h.redelivered)
                        .as("%s delivered again by the emulator iff nacked: %s", h, moves)
                        .isEqualTo(h.sent.equals("nack"));
            }
        }

        @Override
        void close() {
            scopes.abandon();
        }
    }
}
