package dev.once.spring;

import static dev.once.testsupport.StateMachines.move;
import static org.assertj.core.api.Assertions.assertThat;

import dev.once.spring.SpringScopes.Kind;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import io.awspring.cloud.sqs.annotation.SqsListener;
import io.awspring.cloud.sqs.listener.QueueAttributes;
import io.awspring.cloud.sqs.listener.SqsHeaders;
import io.awspring.cloud.sqs.listener.acknowledgement.Acknowledgement;
import io.awspring.cloud.sqs.listener.acknowledgement.AcknowledgementCallback;
import io.awspring.cloud.sqs.support.converter.SqsMessageConversionContext;
import io.awspring.cloud.sqs.support.converter.SqsMessagingMessageConverter;
import java.net.URI;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.ActionChain;
import org.elasticmq.rest.sqs.SQSRestServer;
import org.elasticmq.rest.sqs.SQSRestServerBuilder;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.messaging.Message;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeName;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;
import software.amazon.awssdk.services.sqs.model.ReceiveMessageResponse;

/**
 * Spring Cloud AWS {@code @SqsListener} methods ({@code @IdempotentListener}) called in the caller's Spring transaction
 * scopes, with messages received from a real SQS queue (ElasticMQ in-process) and converted as the listener container
 * converts them (Spring Cloud AWS's {@code SqsMessagingMessageConverter}, its acknowledgement callback in the
 * {@code AcknowledgementCallback} header): random sequences of begin REQUIRED / NESTED / REQUIRES_NEW, commit,
 * rollback, setRollbackOnly, and calls outside any scope (the listener's own transaction), as a container running the
 * listener inside a transaction does. Two listeners: {@code acknowledgementMode = MANUAL}, whose body deletes the
 * message through its {@code Acknowledgement} parameter ({@code acknowledge()}, {@code acknowledgeAsync()}) or
 * {@code Acknowledgement.acknowledge(message)}; and {@code ON_SUCCESS}, whose message the test deletes when the method
 * returns normally, as the container's acknowledgement stage does. Bodies: fresh messages, a body that acknowledges and
 * then throws, one that swallows a failed statement, and copies of events applied in an ended transaction or in the
 * open one. Every delete is made on the real queue and recorded. The oracle ({@link AcknowledgingListenerWorld}, shared
 * with the RabbitMQ and Pub/Sub generators, in its at-most-one-delete form), after every outermost transaction: a
 * message deleted must find its event's claim and effect committed (a delete for a call whose claim a rollback, whole
 * or to a savepoint, undid loses the message: SQS never hands it out again); no message deleted twice; an event whose
 * claim committed has one of its messages deleted; an effect is in the ledger once where its claim committed and absent
 * where it did not (so never applied twice). A message not deleted comes back when its visibility timeout runs out.
 * {@value #TRIES} tries of up to 25 moves.
 */
class SqsAcknowledgementCallerTransactionPropertyTest {

    static final int TRIES = 15;
    static final String QUEUE = "once-spring-caller-sqs-" + UUID.randomUUID();
    static final AtomicLong sequences = new AtomicLong();
    static final AtomicLong ids = new AtomicLong();

    private static TestDatabase db;
    private static AnnotationConfigApplicationContext context;
    private static SQSRestServer server;
    private static SqsClient sqs;
    private static String queueUrl;

    static synchronized void start() {
        if (context != null) {
            return;
        }
        server = SQSRestServerBuilder.withInterface("127.0.0.1")
                .withDynamicPort()
                .start();
        int port = server.waitUntilStarted().localAddress().getPort();
        sqs = SqsClient.builder()
                .endpointOverride(URI.create("http://127.0.0.1:" + port))
                .region(Region.US_EAST_1)
                .credentialsProvider(StaticCredentialsProvider.create(AwsBasicCredentials.create("x", "x")))
                .build();
        // long enough that a message not deleted never comes back within a run: every receive gets the new one
        queueUrl = sqs.createQueue(
                        r -> r.queueName(QUEUE).attributes(Map.of(QueueAttributeName.VISIBILITY_TIMEOUT, "600")))
                .queueUrl();
        System.setProperty("once.test.caller-sqs.mode", "MANUAL");
        db = TestPostgres.shared().freshDatabase(6);
        db.execute(
                "CREATE TABLE ledger (event_id text NOT NULL)",
                "CREATE TABLE taken (id text PRIMARY KEY)",
                "INSERT INTO taken VALUES ('taken')");
        context = JdbcListenerBeans.context(db.dataSource(), Config.class);
    }

    @AfterContainer
    static void stop() {
        if (context != null) {
            context.close();
        }
        if (db != null) {
            db.close();
        }
        if (sqs != null) {
            sqs.close();
        }
        if (server != null) {
            server.stopAndWait();
        }
        System.out.println("SqsAcknowledgementCallerTransactionPropertyTest: sequences=" + sequences.get()
                + " lost=0 deleted_twice=0 applied_twice=0");
    }

    @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    @org.springframework.context.annotation.Import(JdbcListenerBeans.class)
    static class Config {
        @org.springframework.context.annotation.Bean
        Orders orders(JdbcTemplate jdbc) {
            return new Orders(jdbc);
        }
    }

    /** The application's listeners: the effect, then the acknowledgement; the body says what goes wrong. */
    public static class Orders {
        final JdbcTemplate jdbc;

        Orders(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @SqsListener(value = "orders", acknowledgementMode = "MANUAL")
        @IdempotentListener(consumer = "caller-sqs")
        public void manual(Message<String> message, Acknowledgement ack) {
            String id = effect(message);
            switch (message.getPayload()) {
                case "async" -> ack.acknowledgeAsync().join();
                case "static" -> Acknowledgement.acknowledge(message);
                default -> ack.acknowledge();
            }
            failsIfAsked(message, id);
        }

        @SqsListener(value = "orders")
        @IdempotentListener(consumer = "caller-sqs")
        public void onSuccess(Message<String> message) {
            failsIfAsked(message, effect(message));
        }

        /** MANUAL on its container factory only: no acknowledgementMode, no Acknowledgement parameter. */
        @SqsListener(value = "orders", factory = "manualSqsListenerContainerFactory")
        @IdempotentListener(consumer = "caller-sqs")
        public void factoryManual(Message<String> message) {
            acknowledgeMessage(message);
        }

        /** MANUAL through a property placeholder, no Acknowledgement parameter. */
        @SqsListener(value = "orders", acknowledgementMode = "${once.test.caller-sqs.mode}")
        @IdempotentListener(consumer = "caller-sqs")
        public void placeholderManual(Message<String> message) {
            acknowledgeMessage(message);
        }

        /** MANUAL through a placeholder that resolves empty: the container factory's mode, MANUAL here. */
        @SqsListener(value = "orders", acknowledgementMode = "${once.test.caller-sqs.unset:}")
        @IdempotentListener(consumer = "caller-sqs")
        public void emptyPlaceholderManual(Message<String> message) {
            acknowledgeMessage(message);
        }

        /** A batch listener whose container (its factory) is in MANUAL mode: its body deletes the batch at once. */
        @SqsListener(value = "orders", factory = "manualSqsListenerContainerFactory")
        @IdempotentListener(consumer = "caller-sqs-batch")
        public void batch(List<Message<String>> messages) {
            for (Message<String> m : messages) {
                effect(m);
            }
            Acknowledgement.acknowledge(messages);
        }

        private void acknowledgeMessage(Message<String> message) {
            String id = effect(message);
            if (message.getPayload().equals("async")) {
                Acknowledgement.acknowledgeAsync(message).join();
            } else {
                Acknowledgement.acknowledge(message);
            }
            failsIfAsked(message, id);
        }

        private String effect(Message<String> message) {
            String id = (String) message.getHeaders().get("once-event-id");
            jdbc.update("INSERT INTO ledger VALUES (?)", id);
            if (message.getPayload().equals("swallows")) {
                try {
                    jdbc.update("INSERT INTO taken VALUES ('taken')");
                } catch (org.springframework.dao.DataAccessException ignored) {
                    // the application logs and goes on: on PostgreSQL its transaction is aborted now
                }
            }
            return id;
        }

        private static void failsIfAsked(Message<String> message, String id) {
            if (message.getPayload().equals("fails")) {
                throw new IllegalStateException("the body of " + id + " fails after its acknowledgement");
            }
        }
    }

    /**
     * One message received from the real queue: its receipt handle, who deleted it, and whether its call returned in a
     * transaction of its own.
     */
    static final class Received extends AcknowledgingListenerWorld.Handed {
        final String receiptHandle;
        // the call returned outside any scope, in a transaction of its own that committed before the return
        boolean returnedOwn;
        // who made each delete in settled: "once" or "container"
        final List<String> deletedBy = new java.util.ArrayList<>();

        Received(String eventId, String label, String receiptHandle, String kind) {
            super(eventId, label, kind);
            this.receiptHandle = receiptHandle;
        }
    }

    /** The container's acknowledgement callback: deletes on the real queue and records it. */
    static final class Deleting implements AcknowledgementCallback<Object> {
        final Map<String, Received> byReceipt = new LinkedHashMap<>();

        @Override
        public CompletableFuture<Void> onAcknowledge(Message<Object> message) {
            return onAcknowledge(List.of(message));
        }

        @Override
        public CompletableFuture<Void> onAcknowledge(Collection<Message<Object>> messages) {
            for (Message<Object> m : messages) {
                delete((String) m.getHeaders().get(SqsHeaders.SQS_RECEIPT_HANDLE_HEADER), "once");
            }
            return CompletableFuture.completedFuture(null);
        }

        /** {@code by}: "once" (the body's acknowledgement, or once's for a copy), "container" (ON_SUCCESS). */
        void delete(String receipt, String by) {
            Received h = byReceipt.get(receipt);
            if (h != null) {
                h.ack(); // a delete, whoever made it: the world's "ack"
                h.deletedBy.add(by);
            }
            sqs.deleteMessage(r -> r.queueUrl(queueUrl).receiptHandle(receipt));
        }
    }

    @Property(tries = TRIES)
    void sqsListenersInTheCallersScopes(@ForAll("chains") ActionChain<World> chain) throws Exception {
        start();
        World.next = new World();
        AcknowledgingListenerWorld.run(World.next, chain);
        sequences.incrementAndGet();
    }

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        return ActionChain.<World>startWith(() -> World.next)
                .withAction(3, move(w -> w.scopes.size() < 4, "begin REQUIRED", w -> w.begin(Kind.REQUIRED)))
                .withAction(
                        4,
                        move(
                                w -> w.scopes.size() < 4 && w.savepointAllowed(),
                                "begin NESTED",
                                w -> w.begin(Kind.NESTED)))
                .withAction(1, move(w -> w.scopes.size() < 4, "begin REQUIRES_NEW", w -> w.begin(Kind.REQUIRES_NEW)))
                .withAction(3, move(w -> true, "listen MANUAL", w -> w.listen(Mode.ANNOTATION, "ok")))
                .withAction(
                        1, move(w -> true, "listen MANUAL, acknowledgeAsync", w -> w.listen(Mode.ANNOTATION, "async")))
                .withAction(
                        1,
                        move(
                                w -> true,
                                "listen MANUAL, Acknowledgement.acknowledge(message)",
                                w -> w.listen(Mode.ANNOTATION, "static")))
                .withAction(
                        2,
                        move(
                                w -> true,
                                "listen MANUAL, fails after acknowledging",
                                w -> w.listen(Mode.ANNOTATION, "fails")))
                .withAction(2, move(w -> true, "listen MANUAL from elsewhere", w -> w.listen(w.elsewhere(), "ok")))
                .withAction(
                        1,
                        move(
                                w -> true,
                                "listen MANUAL from elsewhere, Acknowledgement.acknowledgeAsync(message)",
                                w -> w.listen(w.elsewhere(), "async")))
                .withAction(
                        1,
                        move(
                                w -> true,
                                "listen MANUAL from elsewhere, fails after acknowledging",
                                w -> w.listen(w.elsewhere(), "fails")))
                .withAction(3, move(w -> true, "listen ON_SUCCESS", w -> w.listen(Mode.ON_SUCCESS, "ok")))
                .withAction(1, move(w -> true, "listen ON_SUCCESS, fails", w -> w.listen(Mode.ON_SUCCESS, "fails")))
                .withAction(
                        1,
                        move(
                                w -> true,
                                "listen, swallows a failed statement",
                                w -> w.listen(Mode.values()[w.moves.size() % Mode.values().length], "swallows")))
                .withAction(2, move(w -> w.copyable() != null, "listen to a copy", World::copy))
                .withAction(4, move(w -> !w.scopes.isEmpty(), "commit", World::commit))
                .withAction(3, move(w -> !w.scopes.isEmpty(), "rollback", World::rollback))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "setRollbackOnly", World::setRollbackOnly))
                .withMaxTransformations(25);
    }

    @Example
    void aManualAcknowledgementInACallersTransactionThatRollsBackDeletesNothing() throws Exception {
        scripted(w -> {
            w.begin(Kind.REQUIRED);
            w.listen(Mode.ANNOTATION, "ok");
            w.rollback();
        });
    }

    @Example
    void anOnSuccessListenerInACallersTransactionThatRollsBackIsNotDeleted() throws Exception {
        scripted(w -> {
            w.begin(Kind.REQUIRED);
            w.listen(Mode.ON_SUCCESS, "ok");
            w.rollback();
        });
    }

    /** The generator's first find, shrunk: the body's acknowledgement deleted the message its failure rolled back. */
    @Example
    void aBodyThatAcknowledgesThenFailsInACallersTransactionIsNotDeleted() throws Exception {
        scripted(w -> {
            w.begin(Kind.REQUIRES_NEW);
            w.listen(Mode.ANNOTATION, "fails");
            w.listen(Mode.ON_SUCCESS, "ok");
            w.commit();
        });
    }

    @Example
    void aBodyThatAcknowledgesThenFailsIsNotDeleted() throws Exception {
        scripted(w -> w.listen(Mode.ANNOTATION, "fails"));
    }

    @Example
    void aManualCopyOfAnAppliedEventIsDeleted() throws Exception {
        scripted(w -> {
            w.listen(Mode.ANNOTATION, "ok");
            w.copyOf(w.handed.get(0).eventId, Mode.ANNOTATION);
            assertThat(((Received) w.handed.get(1)).deletedBy)
                    .as("the copy deleted by once: %s", w.moves)
                    .containsExactly("once");
        });
    }

    /**
     * MANUAL set on the container factory only (the listener takes no Acknowledgement): once counted it as ON_SUCCESS
     * and refused it in a caller's transaction, and did not delete its copies, which came back until a dead-letter
     * queue took them.
     */
    @Example
    void aListenerManualByItsFactoryRunsInACallersTransactionAndItsCopyIsDeleted() throws Exception {
        scripted(w -> {
            w.begin(Kind.REQUIRED);
            w.listen(Mode.FACTORY, "ok");
            w.commit();
            w.copyOf(w.handed.get(0).eventId, Mode.FACTORY);
        });
    }

    /**
     * A batch whose messages carry the MANUAL container's callback (a container not found at startup) is refused
     * before the claim: its body would delete the batch at once, before the claims commit.
     */
    @Example
    void aBatchFromAManualContainerIsRefusedBeforeItsClaims() throws Exception {
        start();
        World w = new World();
        try {
            Message<String> message = w.receive("b-" + ids.incrementAndGet(), "ok", "MANUAL batch", true);
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> w.orders.batch(List.of(message)))
                    .isInstanceOf(dev.once.InvalidConfigurationException.class)
                    .hasMessageContaining("Orders.batch")
                    .hasMessageContaining("batch @SqsListener whose container is in acknowledgementMode MANUAL");
            assertThat(w.handed.get(0).settled).as("nothing deleted").isEmpty();
            assertThat(w.ledger(w.handed.get(0).eventId))
                    .as("refused before the body")
                    .isZero();
        } finally {
            w.close();
        }
    }

    private static void scripted(java.util.function.Consumer<World> moves) throws Exception {
        start();
        AcknowledgingListenerWorld.scripted(new World(), moves);
    }

    /** Where a listener's acknowledgement mode comes from; all but ON_SUCCESS are MANUAL. */
    enum Mode {
        /** {@code acknowledgementMode = "MANUAL"} and an {@code Acknowledgement} parameter. */
        ANNOTATION,
        /** The container factory's option only. */
        FACTORY,
        /** A property placeholder that resolves to MANUAL, no {@code Acknowledgement} parameter. */
        PLACEHOLDER,
        /** A placeholder that resolves empty: the container factory's mode. */
        EMPTY_PLACEHOLDER,
        /** The default: the container deletes when the method returns. */
        ON_SUCCESS
    }

    /**
     * The SQS side of the shared world ({@link AcknowledgingListenerWorld}, {@link
     * AcknowledgingListenerWorld.Settling#AT_MOST_ONCE}: SQS has no nack), and one invariant of its own: a call that
     * returned from its own committed transaction, its event applied, had its message deleted.
     */
    static final class World extends AcknowledgingListenerWorld {
        static World next;

        final Orders orders = context.getBean(Orders.class);
        final SqsMessagingMessageConverter converter = new SqsMessagingMessageConverter();
        final Deleting deleting = new Deleting();

        World() {
            super(context.getBean(JdbcTransactionManager.class), db, "caller-sqs", Settling.AT_MOST_ONCE);
        }

        void listen(Mode mode, String body) {
            call("e-" + ids.incrementAndGet(), mode, body, mode + " " + body);
        }

        /** A MANUAL mode set elsewhere than on the method's signature. */
        Mode elsewhere() {
            return List.of(Mode.FACTORY, Mode.PLACEHOLDER, Mode.EMPTY_PLACEHOLDER)
                    .get(moves.size() % 3);
        }

        void copy() {
            copyOf(copyable(), Mode.values()[moves.size() % Mode.values().length]);
        }

        void copyOf(String id, Mode mode) {
            call(id, mode, "ok", mode + " copy");
        }

        private void call(String id, Mode mode, String body, String kind) {
            boolean manual = mode != Mode.ON_SUCCESS;
            Message<String> message = receive(id, body, kind, manual);
            Received h = (Received) handed.get(handed.size() - 1);
            calledIn(id);
            boolean returned = false;
            try {
                switch (mode) {
                    case ANNOTATION -> orders.manual(message, acknowledgement(message));
                    case FACTORY -> orders.factoryManual(message);
                    case PLACEHOLDER -> orders.placeholderManual(message);
                    case EMPTY_PLACEHOLDER -> orders.emptyPlaceholderManual(message);
                    case ON_SUCCESS -> orders.onSuccess(message);
                }
                returned = true;
            } catch (RuntimeException | AssertionError e) {
                moves.add("  threw " + e.getClass().getSimpleName() + ": " + e.getMessage());
                assertThat(manual && e instanceof dev.once.InvalidConfigurationException)
                        .as(
                                "%s refused, but its container deletes only what the body or once acknowledges, which"
                                        + " once holds back until the commit: %s",
                                h, moves)
                        .isFalse();
            }
            h.returnedOwn = returned && scopes.isEmpty();
            if (returned && !manual) {
                // the container's acknowledgement stage: ON_SUCCESS deletes when the listener method returned
                deleting.delete(h.receiptHandle, "container");
            }
            callReturned();
        }

        @Override
        void checkSettled(AcknowledgingListenerWorld.Handed h, boolean claimed) {
            if (((Received) h).returnedOwn && claimed) {
                assertThat(h.acked())
                        .as(
                                "%s returned from its own committed transaction, its event applied: deleted (else it"
                                        + " comes back until a dead-letter queue takes it): %s",
                                h, moves)
                        .isTrue();
            }
        }

        /** The Acknowledgement argument Spring Cloud AWS resolves for a MANUAL listener. */
        private Acknowledgement acknowledgement(Message<String> message) {
            @SuppressWarnings("unchecked")
            AcknowledgementCallback<Object> callback =
                    (AcknowledgementCallback<Object>) message.getHeaders().get("AcknowledgementCallback");
            @SuppressWarnings("unchecked")
            Message<Object> m = (Message<Object>) (Message<?>) message;
            return new Acknowledgement() {
                @Override
                public void acknowledge() {
                    acknowledgeAsync().join();
                }

                @Override
                public CompletableFuture<Void> acknowledgeAsync() {
                    return callback.onAcknowledge(m);
                }
            };
        }

        /**
         * Sends a message for {@code id}, receives it and converts it as the listener container does: with the
         * acknowledgement callback header in MANUAL mode only (Spring Cloud AWS's
         * {@code AbstractMessageConvertingMessageSource} sets the callback on the conversion context in MANUAL only).
         */
        @SuppressWarnings("unchecked")
        private Message<String> receive(String id, String body, String kind, boolean manual) {
            sqs.sendMessage(r -> r.queueUrl(queueUrl)
                    .messageBody(body)
                    .messageAttributes(Map.of(
                            "once-event-id",
                            MessageAttributeValue.builder()
                                    .dataType("String")
                                    .stringValue(id)
                                    .build())));
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (System.nanoTime() < deadline) {
                ReceiveMessageResponse r = sqs.receiveMessage(q -> q.queueUrl(queueUrl)
                        .maxNumberOfMessages(1)
                        .waitTimeSeconds(1)
                        .messageAttributeNames("All")
                        .messageSystemAttributeNames(MessageSystemAttributeName.ALL));
                for (software.amazon.awssdk.services.sqs.model.Message m : r.messages()) {
                    MessageAttributeValue attribute = m.messageAttributes().get("once-event-id");
                    Received h = new Received(
                            attribute == null ? null : attribute.stringValue(),
                            "#" + (handed.size() + 1),
                            m.receiptHandle(),
                            kind);
                    handed(h);
                    deleting.byReceipt.put(m.receiptHandle(), h);
                    if (!id.equals(h.eventId)) {
                        throw new IllegalStateException("received " + h + " while waiting for " + id);
                    }
                    SqsMessageConversionContext c = new SqsMessageConversionContext();
                    c.setQueueAttributes(new QueueAttributes(QUEUE, queueUrl, Map.of()));
                    if (manual) {
                        c.setAcknowledgementCallback(deleting);
                    }
                    c.setPayloadClass(String.class);
                    return (Message<String>) converter.toMessagingMessage(m, c);
                }
            }
            throw new IllegalStateException("message " + id + " not received from " + QUEUE);
        }

        @Override
        void close() {
            scopes.abandon();
            sqs.purgeQueue(r -> r.queueUrl(queueUrl));
        }
    }
}
