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
import java.math.BigInteger;
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
 *
 * <p>FIFO moves, in the same scopes: messages sent to two message groups of a real FIFO queue (a producer's copies of
 * an event too, bodies that fail or swallow a failed statement), received as the queue hands them out (several of a
 * group at once, in order), their visibility timeout run out (received again, the same sequence number; after
 * {@value #MAX_RECEIVES} receives moved to the dead-letter queue, so that the group goes on without the copy still in
 * hand), handed to a MANUAL or ON_SUCCESS listener in the queue's order or out of it, or as a batch (in order or
 * reversed). The model says each call's outcome: applied where its sequence number is past the group's position as
 * the transaction sees it (committed, or moved by that transaction, also by a call whose body then failed: its move
 * stays with its claim in the rollback-only transaction; undone by a rollback to a savepoint); none before a call moved
 * it (a queue's first message has sequence number 0); refused,
 * FAILED_PERMANENT "already applied up to position", at or behind it, whatever its body (the fence comes before the
 * body); a duplicate where the event's claim stands; a fast failure where a suspended transaction of the thread moved
 * the group; a failure in a transaction PostgreSQL has aborted; a body that swallows a failed statement in the
 * caller's transaction returns, its claim check left to the commit, which fails it; ON_SUCCESS refused in the
 * caller's transaction. A failed call is never deleted; an applied one is deleted
 * after its own commit, and not before the caller's. A batch runs one ordered run per group in transactions of its
 * own (a group out of the queue's order refused whole): a group that fails rolls back alone and the call throws, so
 * nothing of the batch is deleted. After every transaction: each group's stored position is the highest a committed
 * call moved it to, and its effects are in the ledger in ascending sequence numbers.
 * {@value #TRIES} tries of up to 40 moves.
 */
class SqsAcknowledgementCallerTransactionPropertyTest {

    static final int TRIES = 25;
    static final String QUEUE = "once-spring-caller-sqs-" + UUID.randomUUID();
    static final String FIFO = "once-spring-caller-sqs-" + UUID.randomUUID() + ".fifo";
    static final String FIFO_DLQ = "once-spring-caller-sqs-dlq-" + UUID.randomUUID() + ".fifo";
    /** Receives of a FIFO message before the queue moves it to its dead-letter queue (at the next receive). */
    static final int MAX_RECEIVES = 2;

    static final AtomicLong sequences = new AtomicLong();
    static final AtomicLong ids = new AtomicLong();
    // what the FIFO moves met, for the line printed at the end
    static final Map<String, AtomicLong> fifoMet = new java.util.concurrent.ConcurrentSkipListMap<>();

    static void met(String what) {
        fifoMet.computeIfAbsent(what, k -> new AtomicLong()).incrementAndGet();
    }

    private static TestDatabase db;
    private static AnnotationConfigApplicationContext context;
    private static SQSRestServer server;
    private static SqsClient sqs;
    private static String queueUrl;
    private static String fifoUrl;
    private static String fifoDlqUrl;

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
        fifoDlqUrl = sqs.createQueue(
                        r -> r.queueName(FIFO_DLQ).attributes(Map.of(QueueAttributeName.FIFO_QUEUE, "true")))
                .queueUrl();
        String dlqArn = sqs.getQueueAttributes(r -> r.queueUrl(fifoDlqUrl).attributeNames(QueueAttributeName.QUEUE_ARN))
                .attributes()
                .get(QueueAttributeName.QUEUE_ARN);
        fifoUrl = sqs.createQueue(r -> r.queueName(FIFO)
                        .attributes(Map.of(
                                QueueAttributeName.FIFO_QUEUE,
                                "true",
                                QueueAttributeName.VISIBILITY_TIMEOUT,
                                "600",
                                QueueAttributeName.REDRIVE_POLICY,
                                "{\"deadLetterTargetArn\":\"" + dlqArn + "\",\"maxReceiveCount\":\"" + MAX_RECEIVES
                                        + "\"}")))
                .queueUrl();
        System.setProperty("once.test.caller-sqs.mode", "MANUAL");
        db = TestPostgres.shared().freshDatabase(6);
        db.execute(
                "CREATE TABLE ledger (event_id text NOT NULL, n bigserial, grp text, seq numeric)",
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
                + " lost=0 deleted_twice=0 applied_twice=0 fifo=" + fifoMet);
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

        /** A FIFO queue's message, MANUAL: the effect (its group and sequence number with it), then the delete. */
        @SqsListener(value = "orders.fifo", acknowledgementMode = "MANUAL")
        @IdempotentListener(consumer = "caller-sqs")
        public void fifoManual(Message<String> message, Acknowledgement ack) {
            String id = fifoEffect(message);
            ack.acknowledge();
            failsIfAsked(message, id);
        }

        /** A FIFO queue's message, ON_SUCCESS: the container deletes it when the method returns. */
        @SqsListener(value = "orders.fifo")
        @IdempotentListener(consumer = "caller-sqs")
        public void fifoOnSuccess(Message<String> message) {
            failsIfAsked(message, fifoEffect(message));
        }

        /** A FIFO batch (ON_SUCCESS): once runs one ordered run per message group, each a transaction of its own. */
        @SqsListener(value = "orders.fifo")
        @IdempotentListener(consumer = "caller-sqs")
        public void fifoBatch(List<Message<String>> messages) {
            for (Message<String> m : messages) {
                fifoEffect(m);
            }
            for (Message<String> m : messages) {
                failsIfAsked(m, (String) m.getHeaders().get("once-event-id"));
            }
        }

        private String fifoEffect(Message<String> message) {
            String id = (String) message.getHeaders().get("once-event-id");
            jdbc.update(
                    "INSERT INTO ledger (event_id, grp, seq) VALUES (?, ?, ?)",
                    id,
                    message.getHeaders().get(SqsHeaders.MessageSystemAttributes.SQS_MESSAGE_GROUP_ID_HEADER),
                    new java.math.BigDecimal(
                            (String) message.getHeaders().get(SqsHeaders.MessageSystemAttributes.SQS_SEQUENCE_NUMBER)));
            swallowsIfAsked(message);
            return id;
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
            swallowsIfAsked(message);
            return id;
        }

        private void swallowsIfAsked(Message<String> message) {
            if (message.getPayload().equals("swallows")) {
                try {
                    jdbc.update("INSERT INTO taken VALUES ('taken')");
                } catch (org.springframework.dao.DataAccessException ignored) {
                    // the application logs and goes on: on PostgreSQL its transaction is aborted now
                }
            }
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
    static class Received extends AcknowledgingListenerWorld.Handed {
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

    /**
     * One receive of a FIFO queue's message: its group (the world's number of it), its sequence number, the SQS
     * message it is a receive of (a message received again has the same id and sequence number, a new receipt
     * handle), and the raw message, converted when it is handed to a listener.
     */
    static final class Fifo extends Received {
        final int group;
        final BigInteger seq;
        final String sqsId;
        final String body;
        final software.amazon.awssdk.services.sqs.model.Message raw;
        // made visible again (its visibility timeout ran out): the queue hands it out again
        boolean expired;
        // its call threw or was refused: it must never be deleted (it comes back, or is in the dead-letter queue)
        boolean mustStay;

        Fifo(
                String eventId,
                String label,
                software.amazon.awssdk.services.sqs.model.Message raw,
                int group,
                BigInteger seq,
                String body) {
            super(eventId, label, raw.receiptHandle(), "FIFO g" + group + "@" + seq + " " + body);
            this.group = group;
            this.seq = seq;
            this.sqsId = raw.messageId();
            this.body = body;
            this.raw = raw;
        }
    }

    /** The {@code once-event-id} message attribute, {@code id}. */
    static Map<String, MessageAttributeValue> eventIdAttribute(String id) {
        return Map.of(
                "once-event-id",
                MessageAttributeValue.builder()
                        .dataType("String")
                        .stringValue(id)
                        .build());
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
            if (h instanceof Fifo) {
                try {
                    sqs.deleteMessage(r -> r.queueUrl(fifoUrl).receiptHandle(receipt));
                } catch (software.amazon.awssdk.services.sqs.model.SqsException stale) {
                    // a receipt handle the message's later receive replaced: SQS does not delete with it
                }
                return;
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
                .withAction(3, move(w -> true, "fifo send to g0", w -> w.fifoSend(0, "ok")))
                .withAction(3, move(w -> true, "fifo send to g1", w -> w.fifoSend(1, "ok")))
                .withAction(
                        1, move(w -> true, "fifo send, its body fails", w -> w.fifoSend(w.moves.size() % 2, "fails")))
                .withAction(
                        1,
                        move(
                                w -> true,
                                "fifo send, its body swallows a failed statement",
                                w -> w.fifoSend(w.moves.size() % 2, "swallows")))
                .withAction(
                        2,
                        move(w -> !w.fifoEvents.isEmpty(), "fifo send a copy", w -> w.fifoSendCopy(w.moves.size() % 2)))
                .withAction(4, move(w -> w.fifoSent > 0, "fifo receive", World::fifoReceive))
                .withAction(2, move(w -> !w.expirable().isEmpty(), "fifo visibility timeout", World::fifoExpire))
                .withAction(5, move(w -> !w.inHand.isEmpty(), "fifo listen MANUAL", w -> w.fifoListen(0, true)))
                .withAction(
                        3,
                        move(
                                w -> !w.inHand.isEmpty(),
                                "fifo listen MANUAL to the last in hand",
                                w -> w.fifoListen(Integer.MAX_VALUE, true)))
                .withAction(2, move(w -> !w.inHand.isEmpty(), "fifo listen ON_SUCCESS", w -> w.fifoListen(0, false)))
                .withAction(1, move(w -> !w.inHand.isEmpty(), "fifo batch", w -> w.fifoBatch(false)))
                .withAction(1, move(w -> w.inHand.size() > 1, "fifo batch reversed", w -> w.fifoBatch(true)))
                .withAction(4, move(w -> !w.scopes.isEmpty(), "commit", World::commit))
                .withAction(3, move(w -> !w.scopes.isEmpty(), "rollback", World::rollback))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "setRollbackOnly", World::setRollbackOnly))
                .withMaxTransformations(40);
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

    /**
     * A FIFO message held past its visibility timeout (twice: {@value #MAX_RECEIVES} receives) while the queue moved
     * it to its dead-letter queue and handed out the next message of its group, which a caller's transaction applied:
     * refused there, FAILED_PERMANENT, not applied after it, not deleted; the transaction, rollback-only, commits
     * nothing.
     */
    @Example
    void aFifoMessageHeldWhileItsGroupWentOnIsRefusedInTheCallersTransaction() throws Exception {
        scripted(w -> {
            w.fifoSend(0, "ok");
            w.fifoReceive();
            Fifo held = w.inHand.get(0);
            w.fifoExpire(held);
            w.fifoReceive();
            w.fifoExpire(w.inHand.get(1));
            w.fifoSend(0, "ok");
            w.fifoReceive();
            assertThat(w.inHand)
                    .as("the group's next message, the first in the dead-letter queue: %s", w.moves)
                    .hasSize(3);
            w.begin(Kind.REQUIRED);
            w.fifoListen(2, true);
            w.fifoListen(0, true);
            w.commit();
            w.fifoListen(0, true);
            assertThat(held.settled).as("held: never deleted").isEmpty();
        });
    }

    /**
     * A FIFO message whose body fails in the caller's transaction after the fence moved its group: the move stays
     * there with the claim (rollback-only), so an earlier message of the group handed over next in that transaction is
     * refused at the failed one's position; never deleted, it comes again after the rollback and applies. (The model
     * once dropped the failed call's move and expected the earlier one applied: the red of the generated sequence
     * below.)
     */
    @Example
    void aFailedCallsMoveStaysInTheCallersTransactionAndTheMessageItRefusedAppliesAfterTheRollback() throws Exception {
        scripted(w -> {
            w.fifoSend(1, "ok");
            w.fifoSend(1, "fails");
            w.fifoReceive();
            Fifo earlier = w.inHand.get(0);
            Fifo failing = w.inHand.get(1);
            w.begin(Kind.REQUIRED);
            w.fifoListen(1, true);
            w.fifoListen(0, true);
            w.rollback();
            assertThat(earlier.settled)
                    .as("refused in the doomed transaction: not deleted")
                    .isEmpty();
            w.fifoExpire(earlier);
            w.fifoExpire(failing);
            w.fifoReceive();
            w.fifoListen(0, true);
            assertThat(w.claimed(earlier.eventId))
                    .as("applied after the rollback %s", w.moves)
                    .isTrue();
        });
    }

    /** The generated sequence (shrunk) of that red: f-124 refused at position 43, where f-133's body had failed. */
    @Example
    void aGeneratedSequenceWhereAFailedCallMovedTheGroupInTheCallersTransaction() throws Exception {
        scripted(w -> {
            w.fifoSend(1, "ok");
            w.listen(Mode.ANNOTATION, "ok");
            w.begin(Kind.REQUIRES_NEW);
            w.fifoReceive();
            w.listen(Mode.ANNOTATION, "fails");
            w.fifoSend(0, "ok");
            w.fifoExpire(w.inHand.get(0));
            w.rollback();
            w.listen(w.elsewhere(), "async");
            w.listen(Mode.ON_SUCCESS, "fails");
            w.listen(Mode.ON_SUCCESS, "ok");
            w.listen(Mode.ANNOTATION, "ok");
            w.fifoSend(1, "ok");
            w.fifoSend(1, "fails");
            w.begin(Kind.NESTED);
            w.fifoListen(0, true);
            w.rollback();
            w.begin(Kind.REQUIRED);
            w.listen(Mode.ANNOTATION, "fails");
            w.begin(Kind.REQUIRES_NEW);
            w.listen(Mode.ANNOTATION, "static");
            w.listen(Mode.ON_SUCCESS, "ok");
            w.listen(Mode.ANNOTATION, "ok");
            w.fifoReceive();
            w.fifoListen(Integer.MAX_VALUE, true);
            w.fifoSend(1, "ok");
            w.fifoListen(0, true);
            w.fifoListen(0, true);
            w.rollback();
            w.rollback();
        });
    }

    /**
     * The generated red (shrunk) that a run under load met, with nothing of load in it: a body swallowed a failed
     * statement in a NESTED scope of the caller's (ABORTS: the call returns), and the caller committed the scope.
     * Nothing had marked Spring's transaction rollback-only, so the commit released the savepoint, which PostgreSQL
     * refused (TransactionSystemException), and the transaction stayed aborted: the next call in it fails (25P02,
     * RetryableException, nothing deleted) and so does the commit. The model had taken the ABORTS call for one that
     * marked the transaction, so the scope's commit for a rollback to its savepoint, and expected the next call applied.
     */
    @Example
    void aNestedScopeCommittedAfterABodySwallowedAFailedStatementLeavesTheTransactionAborted() throws Exception {
        scripted(w -> {
            w.fifoSend(0, "swallows");
            w.fifoSend(1, "ok");
            w.fifoReceive();
            w.begin(Kind.REQUIRED);
            w.begin(Kind.NESTED);
            w.fifoListen(0, true);
            w.commit();
            w.fifoListen(0, true);
            w.commit();
        });
    }

    /** The same in transactions of their own: the next message applied and deleted, the held one refused. */
    @Example
    void aFifoMessageHeldWhileItsGroupWentOnIsRefused() throws Exception {
        scripted(w -> {
            w.fifoSend(1, "ok");
            w.fifoSend(1, "ok");
            w.fifoReceive();
            w.fifoListen(1, false);
            w.fifoListen(0, true);
        });
    }

    /** A batch with a group's messages out of order, and another group: each group applied in its order. */
    @Example
    void aFifoBatchOutOfOrderAppliesEachGroupInOrder() throws Exception {
        fifoBatchOf(true, "ok", "ok", "ok");
    }

    /** A batch whose group g0 fails while g1 applies: g1 committed, the call throws, nothing deleted. */
    @Example
    void aFifoBatchWithAFailingGroupAppliesTheOthersAndDeletesNothing() throws Exception {
        fifoBatchOf(false, "fails", "ok");
    }

    /** Sends messages with {@code bodies} (to g0 but the last, to g1), receives them and hands them over as a batch. */
    private static void fifoBatchOf(boolean reversed, String... bodies) throws Exception {
        scripted(w -> {
            for (int i = 0; i < bodies.length; i++) {
                w.fifoSend(i == bodies.length - 1 ? 1 : 0, bodies[i]);
            }
            w.fifoReceive();
            w.fifoBatch(reversed);
        });
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

        /** The standard queue's copies are of its own events: a FIFO event's claims are the FIFO moves' model. */
        @Override
        boolean copyableHere(String id) {
            return !id.startsWith("f-");
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
                if (!scopes.isEmpty() && manual) {
                    // the listener's template took part in the caller's transaction and failed: rollback-only
                    scopes.top().physical.rollbackOnly = true;
                }
            }
            if (manual && body.equals("swallows") && !scopes.isEmpty()) {
                scopes.top().items.add("x"); // PostgreSQL aborted the transaction, up to a savepoint before it
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
            if (h instanceof Fifo f && f.mustStay) {
                assertThat(f.settled)
                        .as("%s failed or refused: never deleted %s", f, moves)
                        .isEmpty();
            }
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
            sqs.sendMessage(r -> r.queueUrl(queueUrl).messageBody(body).messageAttributes(eventIdAttribute(id)));
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

        // ---- FIFO: the world's message groups on the FIFO queue, and where each stands as committed ----
        static final int GROUPS = 2;
        final String groupPrefix = "w" + ids.incrementAndGet() + "-g";
        // -1: none stored (a queue's first message has sequence number 0, which a group with no position applies)
        final BigInteger[] committedPosition = {BigInteger.ONE.negate(), BigInteger.ONE.negate()};
        // received, not yet handed to a listener (a receive may hand out several of a group, in order)
        final List<Fifo> inHand = new java.util.ArrayList<>();
        // per SQS message id, its latest receive
        final Map<String, Fifo> latest = new LinkedHashMap<>();
        // event ids sent to the FIFO queue, in order
        final List<String> fifoEvents = new java.util.ArrayList<>();
        // events a FIFO batch applied although the call threw: the container deleted none of the batch
        final java.util.Set<String> redrive = new java.util.HashSet<>();
        int fifoSent;

        String group(int g) {
            return groupPrefix + g;
        }

        String stream(int g) {
            return dev.once.StreamPositions.sqsMessageGroup(fifoUrl, group(g));
        }

        /** Sends a message of a fresh event, with {@code body}, to group {@code g}. */
        void fifoSend(int g, String body) {
            String id = "f-" + ids.incrementAndGet();
            fifoEvents.add(id);
            fifoSend(g, id, body);
        }

        /** Sends a second message of an event sent before (a producer's retry), to group {@code g}. */
        void fifoSendCopy(int g) {
            fifoSend(g, fifoEvents.get(fifoEvents.size() - 1 - (moves.size() % Math.min(3, fifoEvents.size()))), "ok");
        }

        private void fifoSend(int g, String id, String body) {
            sqs.sendMessage(r -> r.queueUrl(fifoUrl)
                    .messageBody(body)
                    .messageGroupId(group(g))
                    .messageDeduplicationId(UUID.randomUUID().toString())
                    .messageAttributes(eventIdAttribute(id)));
            fifoSent++;
            moves.add("fifo send " + id + " " + body + " to g" + g);
        }

        /** Receives what the FIFO queue hands out now: each group's next messages, in order, none of a group in flight. */
        void fifoReceive() {
            ReceiveMessageResponse r = sqs.receiveMessage(q -> q.queueUrl(fifoUrl)
                    .maxNumberOfMessages(10)
                    .waitTimeSeconds(0)
                    .messageAttributeNames("All")
                    .messageSystemAttributeNames(MessageSystemAttributeName.ALL));
            List<String> got = new java.util.ArrayList<>();
            for (software.amazon.awssdk.services.sqs.model.Message m : r.messages()) {
                String group = m.attributes().get(MessageSystemAttributeName.MESSAGE_GROUP_ID);
                if (!group.startsWith(groupPrefix)) {
                    throw new IllegalStateException("received a message of group " + group + ", not this run's");
                }
                MessageAttributeValue attribute = m.messageAttributes().get("once-event-id");
                Fifo f = new Fifo(
                        attribute.stringValue(),
                        "#" + (handed.size() + inHand.size() + 1),
                        m,
                        Integer.parseInt(group.substring(groupPrefix.length())),
                        new BigInteger(m.attributes().get(MessageSystemAttributeName.SEQUENCE_NUMBER)),
                        m.body());
                Fifo before = latest.put(f.sqsId, f);
                inHand.add(f);
                got.add(f + (before != null ? " (again)" : ""));
            }
            moves.add("fifo receive: " + got);
        }

        /** A receive whose visibility timeout may run out now: the latest of its message, not deleted. */
        List<Fifo> expirable() {
            List<Fifo> out = new java.util.ArrayList<>();
            for (Fifo f : latest.values()) {
                if (!f.expired && !deleted(f.sqsId)) {
                    out.add(f);
                }
            }
            return out;
        }

        private boolean deleted(String sqsId) {
            for (AcknowledgingListenerWorld.Handed h : handed) {
                if (h instanceof Fifo f && f.sqsId.equals(sqsId) && f.acked()) {
                    return true;
                }
            }
            return false;
        }

        /**
         * The visibility timeout of a message received and not deleted runs out (held in hand, or its call ended
         * without a delete): the queue hands it out again, or moves it to the dead-letter queue after {@value
         * #MAX_RECEIVES} receives and goes on with its group.
         */
        void fifoExpire() {
            List<Fifo> candidates = expirable();
            fifoExpire(candidates.get(moves.size() % candidates.size()));
        }

        void fifoExpire(Fifo f) {
            f.expired = true;
            moves.add("fifo visibility timeout of " + f + " runs out");
            try {
                sqs.changeMessageVisibility(
                        r -> r.queueUrl(fifoUrl).receiptHandle(f.receiptHandle).visibilityTimeout(0));
            } catch (software.amazon.awssdk.services.sqs.model.SqsException gone) {
                moves.add("  gone: " + gone.getMessage()); // moved to the dead-letter queue by a receive since
            }
        }

        enum Claim {
            FREE,
            COMMITTED,
            OPEN,
            SUSPENDED
        }

        /** Where the claim of FIFO event {@code id} stands for the physical transaction {@code physical} (null: none). */
        Claim fifoClaim(String id, SpringScopes.Physical physical) {
            for (SpringScopes.Scope scope : scopes.open()) {
                if (scope.items.contains("c:" + id)) {
                    return scope.physical == physical ? Claim.OPEN : Claim.SUSPENDED;
                }
            }
            return claimed(id) ? Claim.COMMITTED : Claim.FREE;
        }

        /** Where {@code physical} sees group {@code g}'s position: committed, or moved by it since. */
        BigInteger visible(int g, SpringScopes.Physical physical) {
            BigInteger at = committedPosition[g];
            if (physical == null) {
                return at;
            }
            for (SpringScopes.Scope scope : scopes.open()) {
                if (scope.physical == physical) {
                    for (String item : scope.items) {
                        if (item.startsWith("p:" + g + ":")) {
                            at = at.max(new BigInteger(item.split(":")[2]));
                        }
                    }
                }
            }
            return at;
        }

        private boolean aborted(SpringScopes.Physical physical) {
            for (SpringScopes.Scope scope : scopes.open()) {
                if (scope.physical == physical && scope.items.contains("x")) {
                    return true;
                }
            }
            return false;
        }

        /**
         * Whether an open transaction other than {@code physical} holds group {@code g}'s position row lock: an item
         * "l:g" of the scope whose call took it, gone with a rollback to the savepoint (both databases release a row
         * lock taken after a savepoint when it is rolled back to) or with the transaction's end.
         */
        private boolean heldByOther(int g, SpringScopes.Physical physical) {
            for (SpringScopes.Scope scope : scopes.open()) {
                if (scope.physical != physical && scope.items.contains("l:" + g)) {
                    return true;
                }
            }
            return false;
        }

        /** What must happen to one FIFO message's call. */
        enum Expect {
            APPLIED,
            DUPLICATE,
            /**
             * At or behind the group's position as the transaction sees it: FAILED_PERMANENT before the body runs,
             * whatever the body, not applied.
             */
            BEHIND,
            /** A suspended transaction of the thread holds the group's position row: fails before its claim. */
            FAIL_FAST,
            /** The body fails, or the transaction is aborted. */
            THROWS,
            /**
             * In the caller's transaction, the body swallows a failed statement after the fence moved the group:
             * PostgreSQL aborted the transaction, the call returns (its claim check is left to the commit, as Spring's
             * transaction asks), and the commit fails it: nothing of it commits, its message is never deleted. Spring's
             * transaction is not marked rollback-only: a NESTED scope around the call commits by releasing its
             * savepoint, which fails in the aborted transaction and leaves it aborted for the calls after it.
             */
            ABORTS,
            /** ON_SUCCESS in the caller's transaction: refused before the claim. */
            REFUSED
        }

        /**
         * Hands the {@code pick}-th message in hand to the FIFO listener ({@code manual}: MANUAL, else ON_SUCCESS),
         * in the innermost scope or a transaction of its own, its outcome against the model.
         */
        void fifoListen(int pick, boolean manual) {
            Fifo f = inHand.get(Math.min(pick, inHand.size() - 1));
            SpringScopes.Physical physical = scopes.isEmpty() ? null : scopes.top().physical;
            Claim claim = fifoClaim(f.eventId, physical);
            if (claim == Claim.SUSPENDED && (manual || physical == null)) {
                // its claim would wait for a transaction this thread cannot end
                moves.add("fifo listen " + f + ": left in hand, a suspended transaction holds its claim");
                return;
            }
            inHand.remove(f);
            int g = f.group;
            BigInteger seen = visible(g, physical);
            boolean abortedBefore = physical != null && aborted(physical);
            Expect expect;
            if (!manual && physical != null) {
                expect = Expect.REFUSED;
            } else if (physical != null && heldByOther(g, physical)) {
                expect = Expect.FAIL_FAST;
            } else if (abortedBefore) {
                expect = Expect.THROWS;
            } else if (claim == Claim.OPEN || claim == Claim.COMMITTED) {
                expect = Expect.DUPLICATE;
            } else if (f.seq.compareTo(seen) <= 0) {
                expect = Expect.BEHIND; // the fence, right after the claim, refuses it before its body runs
            } else if (f.body.equals("swallows") && physical != null) {
                expect = Expect.ABORTS;
            } else if (!f.body.equals("ok")) {
                expect = Expect.THROWS;
            } else {
                expect = Expect.APPLIED;
            }
            met((physical == null ? "own " : "caller's ") + expect);
            handed(f);
            moves.add("  " + (manual ? "MANUAL" : "ON_SUCCESS") + ", the group at " + seen + " as "
                    + (physical == null ? "committed" : "transaction " + physical.number + " sees it") + ": "
                    + expect);
            deleting.byReceipt.put(f.receiptHandle, f);
            calledIn(f.eventId);
            Message<String> message = fifoMessage(f, manual);
            Throwable thrown = null;
            try {
                if (manual) {
                    orders.fifoManual(message, acknowledgement(message));
                } else {
                    orders.fifoOnSuccess(message);
                }
            } catch (RuntimeException | AssertionError e) {
                thrown = e;
                moves.add("  threw " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            f.returnedOwn = thrown == null && physical == null;
            if (thrown == null && !manual) {
                deleting.delete(f.receiptHandle, "container");
            }
            switch (expect) {
                case APPLIED, DUPLICATE, ABORTS ->
                    assertThat(thrown)
                            .as("%s %s: the call returns %s", f, expect, moves)
                            .isNull();
                case BEHIND ->
                    assertThat(thrown)
                            .as("%s behind its group's position %s: refused %s", f, seen, moves)
                            .isNotNull()
                            .hasMessageContaining("has already applied up to position " + seen);
                case FAIL_FAST ->
                    assertThat(thrown)
                            .as("%s: a suspended transaction holds %s's position: fails fast %s", f, stream(g), moves)
                            .isInstanceOf(IllegalStateException.class)
                            .hasMessageContaining(stream(g));
                case THROWS ->
                    assertThat(thrown).as("%s: the call fails %s", f, moves).isNotNull();
                case REFUSED ->
                    assertThat(thrown)
                            .as("%s ON_SUCCESS in the caller's transaction: refused %s", f, moves)
                            .isInstanceOf(dev.once.InvalidConfigurationException.class);
            }
            if (thrown != null || expect == Expect.ABORTS) {
                f.mustStay = true;
                assertThat(f.settled).as("%s failed: not deleted %s", f, moves).isEmpty();
                // The listener's template took part and failed: rollback-only. Not where the call returned (ABORTS):
                // nothing marked Spring's transaction, only PostgreSQL aborted it ("x"), so a NESTED scope's commit
                // releases its savepoint, which fails and leaves the transaction aborted, rather than rolling back
                // to it (the model once said rolled back, and expected the next call applied: 25P02)
                if (physical != null && thrown != null && expect != Expect.REFUSED) {
                    physical.rollbackOnly = true;
                }
            }
            if (physical == null) {
                if (expect == Expect.APPLIED) {
                    assertThat(claimed(f.eventId))
                            .as("%s applied in its own transaction %s", f, moves)
                            .isTrue();
                    committedPosition[g] = committedPosition[g].max(f.seq);
                }
                if (thrown == null) {
                    assertThat(f.deletedBy)
                            .as("%s returned from its own transaction: deleted %s", f, moves)
                            .containsExactly(manual ? "once" : "container");
                }
            } else {
                SpringScopes.Scope top = scopes.top();
                boolean claims = claim == Claim.FREE
                        && !abortedBefore
                        && (expect == Expect.APPLIED
                                || expect == Expect.BEHIND
                                || expect == Expect.THROWS
                                || expect == Expect.ABORTS);
                if (claims) {
                    // the claim stays in the caller's transaction, doomed where the call failed
                    top.items.add("c:" + f.eventId);
                    // the fence ran right after the claim, before the body: the transaction holds the group's row
                    // lock (refused too: the stored position is read FOR UPDATE) until it ends or rolls back to a
                    // savepoint set before, whatever the body did
                    top.items.add("l:" + g);
                }
                if (claims && expect == Expect.THROWS) {
                    // the fence moved the group before the body failed, and the call leaves the move in the
                    // caller's transaction (rollback-only, no savepoint of its own), as it leaves the claim: until
                    // that transaction ends it sees the group there and refuses a message at or behind it, which,
                    // never deleted, comes again after the rollback and is checked against the group as committed
                    top.items.add("p:" + g + ":" + f.seq + ":" + f.eventId);
                }
                if (expect == Expect.APPLIED || expect == Expect.ABORTS) {
                    // moved by the fence before the body; an aborted transaction commits nothing of it
                    top.items.add("p:" + g + ":" + f.seq + ":" + f.eventId);
                    assertThat(f.settled)
                            .as("%s applied in the caller's transaction: its delete waits for the commit %s", f, moves)
                            .isEmpty();
                }
                if (expect == Expect.ABORTS) {
                    top.items.add("x");
                }
                if (expect == Expect.DUPLICATE && claim == Claim.OPEN) {
                    assertThat(f.settled)
                            .as(
                                    "%s a copy of an event claimed in the open transaction: its delete waits for the"
                                            + " commit %s",
                                    f, moves)
                            .isEmpty();
                }
            }
            callReturned();
            checkFifo();
        }

        /**
         * A batch of the messages in hand ({@code reversed}: in the opposite order), to the FIFO batch listener
         * (ON_SUCCESS): refused in the caller's transaction; else one ordered run per group, each in a transaction
         * of its own, a group refused or failed alone, and the call throws (the container deletes none of the batch)
         * when one did.
         */
        void fifoBatch(boolean reversed) {
            List<Fifo> batch = new java.util.ArrayList<>(inHand);
            inHand.clear();
            if (reversed) {
                java.util.Collections.reverse(batch);
            }
            moves.add("fifo batch " + batch);
            List<Message<String>> messages = new java.util.ArrayList<>();
            for (Fifo f : batch) {
                handed.add(f);
                f.ended = true; // checked here; counted by the world among its event's messages
                deleting.byReceipt.put(f.receiptHandle, f);
                messages.add(fifoMessage(f, false));
            }
            boolean own = scopes.isEmpty();
            // the model: per group, in the order of its first message, its run
            Map<Integer, List<Fifo>> groups = new LinkedHashMap<>();
            for (Fifo f : batch) {
                groups.computeIfAbsent(f.group, k -> new java.util.ArrayList<>())
                        .add(f);
            }
            java.util.Set<String> claimedNow = new java.util.HashSet<>();
            Map<Integer, List<String>> appliedBy = new LinkedHashMap<>();
            List<String> failedGroups = new java.util.ArrayList<>();
            BigInteger[] after = committedPosition.clone();
            for (Map.Entry<Integer, List<Fifo>> e : groups.entrySet()) {
                int g = e.getKey();
                Map<String, Fifo> firsts = new LinkedHashMap<>();
                for (Fifo f : e.getValue()) {
                    firsts.putIfAbsent(f.eventId, f);
                }
                List<Fifo> mine = new java.util.ArrayList<>();
                for (Fifo f : firsts.values()) {
                    if (!claimedNow.contains(f.eventId) && !claimed(f.eventId)) {
                        mine.add(f);
                    }
                }
                boolean increasing = true;
                for (int i = 1; i < e.getValue().size(); i++) {
                    increasing &= e.getValue().get(i).seq.compareTo(e.getValue().get(i - 1).seq) > 0;
                }
                if (!increasing) {
                    // not the queue's order: refused whole (its positions must increase along the run)
                    failedGroups.add("g" + g + " out of order");
                    continue;
                }
                if (mine.isEmpty()) {
                    continue;
                }
                if (mine.stream().anyMatch(f -> !f.body.equals("ok"))
                        || mine.get(0).seq.compareTo(after[g]) <= 0) {
                    failedGroups.add("g" + g);
                    continue;
                }
                List<String> applied = mine.stream().map(f -> f.eventId).toList();
                claimedNow.addAll(applied);
                appliedBy.put(g, applied);
                after[g] = mine.get(mine.size() - 1).seq; // where the engine moves the stream: the run's last
            }
            Throwable thrown = null;
            try {
                orders.fifoBatch(messages);
            } catch (RuntimeException | AssertionError e) {
                thrown = e;
                moves.add("  threw " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
            if (!own) {
                met("batch refused");
                assertThat(thrown)
                        .as("a FIFO batch (ON_SUCCESS) in the caller's transaction: refused %s", moves)
                        .isInstanceOf(dev.once.InvalidConfigurationException.class);
                return;
            }
            moves.add("  groups applied " + appliedBy + ", failed " + failedGroups);
            met(failedGroups.isEmpty() ? "batch" : appliedBy.isEmpty() ? "batch failed" : "batch, a group failed");
            if (failedGroups.isEmpty()) {
                assertThat(thrown)
                        .as("a FIFO batch whose groups all went through returns %s", moves)
                        .isNull();
                for (Fifo f : batch) {
                    deleting.delete(f.receiptHandle, "container");
                }
            } else {
                assertThat(thrown)
                        .as(
                                "a FIFO batch with a group that failed (%s) throws, so the container deletes none of it %s",
                                failedGroups, moves)
                        .isNotNull();
                redrive.addAll(claimedNow);
            }
            for (Fifo f : batch) {
                if (claimedNow.contains(f.eventId)) {
                    assertThat(claimed(f.eventId))
                            .as("%s of a group that went through: applied %s", f, moves)
                            .isTrue();
                }
                if (thrown != null) {
                    assertThat(f.settled)
                            .as("%s of a batch that threw: not deleted %s", f, moves)
                            .isEmpty();
                }
            }
            for (int g = 0; g < GROUPS; g++) {
                committedPosition[g] = after[g];
            }
            checkFifo();
        }

        @Override
        boolean leftForRedrive(String id) {
            return redrive.contains(id);
        }

        @Override
        void scopeEnded(SpringScopes.Ended ended) {
            if (!ended.physical()) {
                return;
            }
            for (String item : ended.scope().items) {
                if (item.startsWith("p:")) {
                    String[] p = item.split(":");
                    if (claimed(p[3])) {
                        int g = Integer.parseInt(p[1]);
                        committedPosition[g] = committedPosition[g].max(new BigInteger(p[2]));
                    }
                }
            }
            checkFifo();
        }

        /**
         * Each group as committed: its stored position where the committed runs moved it (none before one did), its
         * effects in the ledger in the order of their sequence numbers, the last at the position.
         */
        void checkFifo() {
            for (int g = 0; g < GROUPS; g++) {
                List<BigInteger> stored = fifoQuery(
                        "SELECT position FROM once_stream_position WHERE consumer = 'caller-sqs' AND stream = ?",
                        stream(g));
                assertThat(stored)
                        .as("stored position of g%d: the highest a committed call moved it to %s", g, moves)
                        .isEqualTo(committedPosition[g].signum() < 0 ? List.of() : List.of(committedPosition[g]));
                List<BigInteger> applied = fifoQuery("SELECT seq FROM ledger WHERE grp = ? ORDER BY n", group(g));
                assertThat(applied)
                        .as("effects of g%d in the order applied: ascending sequence numbers %s", g, moves)
                        .isSortedAccordingTo(BigInteger::compareTo)
                        .doesNotHaveDuplicates();
            }
        }

        private List<BigInteger> fifoQuery(String sql, String arg) {
            try (java.sql.Connection c = db.dataSource().getConnection();
                    java.sql.PreparedStatement ps = c.prepareStatement(sql)) {
                ps.setString(1, arg);
                List<BigInteger> out = new java.util.ArrayList<>();
                try (java.sql.ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        out.add(rs.getBigDecimal(1).toBigIntegerExact());
                    }
                }
                return out;
            } catch (java.sql.SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        /** Converts {@code f} as the listener container does, with the acknowledgement callback in MANUAL only. */
        @SuppressWarnings("unchecked")
        private Message<String> fifoMessage(Fifo f, boolean manual) {
            SqsMessageConversionContext c = new SqsMessageConversionContext();
            c.setQueueAttributes(new QueueAttributes(FIFO, fifoUrl, Map.of()));
            if (manual) {
                c.setAcknowledgementCallback(deleting);
            }
            c.setPayloadClass(String.class);
            return (Message<String>) converter.toMessagingMessage(f.raw, c);
        }

        @Override
        void close() {
            scopes.abandon();
            sqs.purgeQueue(r -> r.queueUrl(queueUrl));
            sqs.purgeQueue(r -> r.queueUrl(fifoUrl));
            sqs.purgeQueue(r -> r.queueUrl(fifoDlqUrl));
        }
    }
}
