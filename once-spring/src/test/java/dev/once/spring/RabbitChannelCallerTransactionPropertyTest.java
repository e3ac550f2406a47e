package dev.once.spring;

import static dev.once.testsupport.StateMachines.move;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.GetResponse;
import dev.once.spring.SpringScopes.Kind;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.ActionChain;
import org.springframework.amqp.core.Message;
import org.springframework.amqp.core.MessageProperties;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;

/**
 * A RabbitMQ {@code AckMode.MANUAL} listener ({@code @IdempotentListener} taking the {@code Channel}) called in the
 * caller's Spring transaction scopes: random sequences of begin REQUIRED / NESTED / REQUIRES_NEW, commit, rollback,
 * setRollbackOnly, and calls of the listener with messages fetched from a real RabbitMQ queue (127.0.0.1:5672) with
 * {@code basicGet}, as a caller that pulls messages itself, or a container running the listener in its transaction,
 * hands them over: fresh messages whose body acknowledges, whose body acknowledges and then throws, whose body
 * swallows a failed statement, and copies of events applied in an ended transaction or in the open one. Each
 * settlement once sends on the real channel is recorded. The oracle ({@link AcknowledgingListenerWorld}, shared with
 * the Pub/Sub generator) is the database after every outermost transaction: a message acknowledged must find its event's claim and effect committed (an ack for a call whose
 * claim a rollback, whole or to a savepoint, undid loses the message); a fresh call whose claim committed must be
 * acknowledged; every message handed to the listener is settled exactly once by the time the transactions it was
 * called in have ended (one left unsettled waits, unacknowledged, until the channel closes); an effect is in the
 * ledger once where its claim committed and absent where it did not. {@value #TRIES} tries of up to 25 moves.
 */
class RabbitChannelCallerTransactionPropertyTest {

    static final int TRIES = 15;
    static final String QUEUE = "once-spring-caller-channel-" + UUID.randomUUID();
    static final AtomicLong sequences = new AtomicLong();
    static final AtomicLong ids = new AtomicLong();

    private static TestDatabase db;
    private static AnnotationConfigApplicationContext context;
    private static Connection rabbit;

    static synchronized void start() {
        if (context != null) {
            return;
        }
        RabbitBeans.assumeRunning();
        db = TestPostgres.shared().freshDatabase(6);
        db.execute(
                "CREATE TABLE ledger (event_id text NOT NULL)",
                "CREATE TABLE taken (id text PRIMARY KEY)",
                "INSERT INTO taken VALUES ('taken')");
        context = JdbcListenerBeans.context(db.dataSource(), Config.class);
        try {
            ConnectionFactory cf = new ConnectionFactory();
            cf.setHost("127.0.0.1");
            cf.setPort(5672);
            rabbit = cf.newConnection("once-caller-channel");
            try (Channel c = rabbit.createChannel()) {
                c.queueDeclare(QUEUE, false, false, false, null);
            }
        } catch (IOException | java.util.concurrent.TimeoutException e) {
            throw new IllegalStateException(e);
        }
    }

    @AfterContainer
    static void stop() throws Exception {
        if (rabbit != null) {
            try (Channel c = rabbit.createChannel()) {
                c.queueDelete(QUEUE);
            }
            rabbit.close();
        }
        if (context != null) {
            context.close();
        }
        if (db != null) {
            db.close();
        }
        System.out.println("RabbitChannelCallerTransactionPropertyTest: sequences=" + sequences.get()
                + " lost=0 acked_rolled_back=0 unsettled=0 applied_twice=0");
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

    /** The application's MANUAL listener: its effect, then {@code basicAck}; the body says what goes wrong. */
    public static class Orders {
        final JdbcTemplate jdbc;

        Orders(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @IdempotentListener(consumer = "caller-channel")
        public void on(Message message, Channel channel) throws IOException {
            String id = (String) message.getMessageProperties().getHeader("once-event-id");
            String body = new String(message.getBody(), StandardCharsets.UTF_8);
            jdbc.update("INSERT INTO ledger VALUES (?)", id);
            if (body.equals("swallows")) {
                try {
                    jdbc.update("INSERT INTO taken VALUES ('taken')");
                } catch (org.springframework.dao.DataAccessException ignored) {
                    // the application logs and goes on: on PostgreSQL its transaction is aborted now
                }
            }
            channel.basicAck(message.getMessageProperties().getDeliveryTag(), false);
            if (body.equals("fails")) {
                throw new IllegalStateException("the body of " + id + " fails after its basicAck");
            }
        }
    }

    /** The real channel, recording every settlement once sends on it. */
    static final class Recording implements java.lang.reflect.InvocationHandler {
        final Channel channel;
        final Map<Long, AcknowledgingListenerWorld.Handed> byTag = new HashMap<>();

        Recording(Channel channel) {
            this.channel = channel;
        }

        @Override
        public Object invoke(Object proxy, java.lang.reflect.Method method, Object[] args) throws Throwable {
            String name = method.getName();
            if (name.equals("basicAck") || name.equals("basicNack") || name.equals("basicReject")) {
                AcknowledgingListenerWorld.Handed h = byTag.get((Long) args[0]);
                if (h != null) {
                    if (name.equals("basicAck")) {
                        h.ack();
                    } else {
                        h.nack();
                    }
                }
            }
            try {
                return method.invoke(channel, args);
            } catch (java.lang.reflect.InvocationTargetException e) {
                throw e.getCause();
            }
        }
    }

    @AddLifecycleHook(SkipWithoutRabbit.class)
    @Property(tries = TRIES)
    void manualAckListenerInTheCallersScopes(@ForAll("chains") ActionChain<World> chain) throws Exception {
        start();
        World.next = new World();
        AcknowledgingListenerWorld.run(World.next, chain);
        sequences.incrementAndGet();
    }

    /** The generator's first find, shrunk: the body's basicAck outlived the rollback of the caller's NESTED step. */
    @Example
    void aCallInACallersNestedStepRolledBackIsNotAcknowledgedWhenTheOuterTransactionCommits() throws Exception {
        scripted(w -> {
            w.begin(Kind.REQUIRED);
            w.begin(Kind.NESTED);
            w.listen("ok");
            w.rollback();
            w.commit();
        });
    }

    /**
     * A body that acknowledges and then fails in the caller's NESTED step: Spring rolls back to the step's savepoint
     * (clearing the rollback-only mark the failure set) and the outer transaction commits without the call.
     */
    @Example
    void aBodyThatAcksThenFailsInACallersNestedStepIsNotAcknowledgedWhenTheOuterTransactionCommits() throws Exception {
        scripted(w -> {
            w.begin(Kind.REQUIRED);
            w.begin(Kind.NESTED);
            w.listen("fails");
            w.commit();
            w.commit();
        });
    }

    private static void scripted(java.util.function.Consumer<World> moves) throws Exception {
        start();
        AcknowledgingListenerWorld.scripted(new World(), moves);
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
                .withAction(5, move(w -> !w.scopes.isEmpty(), "listen", w -> w.listen("ok")))
                .withAction(2, move(w -> !w.scopes.isEmpty(), "listen, fails after basicAck", w -> w.listen("fails")))
                .withAction(
                        1,
                        move(
                                w -> !w.scopes.isEmpty(),
                                "listen, swallows a failed statement",
                                w -> w.listen("swallows")))
                .withAction(2, move(w -> !w.scopes.isEmpty() && w.copyable() != null, "listen to a copy", World::copy))
                .withAction(4, move(w -> !w.scopes.isEmpty(), "commit", World::commit))
                .withAction(3, move(w -> !w.scopes.isEmpty(), "rollback", World::rollback))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "setRollbackOnly", World::setRollbackOnly))
                .withMaxTransformations(25);
    }

    static final class World extends AcknowledgingListenerWorld {
        static World next;

        final Orders orders = context.getBean(Orders.class);
        final Channel real;
        final Recording recording;
        final Channel channel;

        World() {
            super(context.getBean(JdbcTransactionManager.class), db, "caller-channel");
            try {
                real = rabbit.createChannel();
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
            recording = new Recording(real);
            channel = (Channel) java.lang.reflect.Proxy.newProxyInstance(
                    Channel.class.getClassLoader(), new Class<?>[] {Channel.class}, recording);
        }

        void listen(String body) {
            String id = "e-" + ids.incrementAndGet();
            call(id, body, body);
        }

        void copy() {
            call(copyable(), "ok", "copy");
        }

        private void call(String id, String body, String kind) {
            Delivered h = fetch(id, body, kind);
            calledIn(id);
            MessageProperties props = new MessageProperties();
            props.setDeliveryTag(h.tag);
            props.setHeader("once-event-id", id);
            try {
                orders.on(new Message(body.getBytes(StandardCharsets.UTF_8), props), channel);
            } catch (Exception | AssertionError e) {
                moves.add("  threw " + e.getClass().getSimpleName());
            }
        }

        /** Publishes a message for {@code id} and takes it from the queue unacknowledged. */
        private Delivered fetch(String id, String body, String kind) {
            try {
                com.rabbitmq.client.AMQP.BasicProperties props = new com.rabbitmq.client.AMQP.BasicProperties.Builder()
                        .headers(Map.of("once-event-id", id))
                        .build();
                real.basicPublish("", QUEUE, props, body.getBytes(StandardCharsets.UTF_8));
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (System.nanoTime() < deadline) {
                    GetResponse r = real.basicGet(QUEUE, false);
                    if (r == null) {
                        Thread.onSpinWait();
                        continue;
                    }
                    Object header = r.getProps().getHeaders().get("once-event-id");
                    long tag = r.getEnvelope().getDeliveryTag();
                    if (header != null
                            && header.toString().equals(id)
                            && !r.getEnvelope().isRedeliver()) {
                        Delivered h = new Delivered(id, tag, kind);
                        recording.byTag.put(tag, h);
                        handed(h);
                        return h;
                    }
                    // a message requeued earlier in this chain: it stays unacknowledged until the channel closes
                }
                throw new IllegalStateException("message " + id + " not received from " + QUEUE);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }

        @Override
        void close() throws Exception {
            scopes.abandon();
            if (real.isOpen()) {
                real.close(); // gives every unacknowledged message back to the queue
            }
            try (Channel c = rabbit.createChannel()) {
                c.queuePurge(QUEUE);
            }
        }
    }

    /** A message taken from the queue: its delivery tag on the channel. */
    static final class Delivered extends AcknowledgingListenerWorld.Handed {
        final long tag;

        Delivered(String eventId, long tag, String kind) {
            super(eventId, "#" + tag, kind);
            this.tag = tag;
        }
    }
}
