package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.InvalidConfigurationException;
import dev.once.StreamPositions;
import dev.once.testsupport.TestDatabase;
import io.awspring.cloud.sqs.annotation.SqsListener;
import io.awspring.cloud.sqs.config.SqsBootstrapConfiguration;
import io.awspring.cloud.sqs.config.SqsMessageListenerContainerFactory;
import io.awspring.cloud.sqs.listener.interceptor.MessageInterceptor;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.Message;
import software.amazon.awssdk.services.sqs.SqsAsyncClient;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeName;
import software.amazon.awssdk.services.sqs.model.QueueAttributeName;

/**
 * {@code @IdempotentListener} on an {@code @SqsListener} method of a FIFO queue, run by real Spring Cloud AWS
 * containers fed from ElasticMQ, two applications ("processes": two contexts) on one PostgreSQL database. What
 * once-sqs's {@code SqsFifoTest.aProcessCutOffFromSqsDoesNotApplyAMessageAfterItsGroupWentOnWithoutIt} shows for its
 * consumer, transposed to the listener: A's call of g-1 is held before the listener (a message interceptor of the
 * container) past g-1's visibility timeout (1 s; a listener container extends no visibility by default, so a slow
 * call is enough, no cut-off needed); B's receive is past g-1's {@code maxReceiveCount} (1), so the queue moves g-1 to
 * its dead-letter queue and hands B g-2, which B applies. A's call then goes on: g-1 must not be applied after g-2,
 * nor its body run. The group's position in the database (SQS's sequence numbers, the stream once-sqs keys the group
 * by) refuses it right after A's claim, before the body. Held in its body instead, A's call holds the group's row
 * lock (taken before the body): B's call of the next message waits for A's commit and follows it. A batch listener
 * runs one ordered run per message group, and a group that fails rolls back alone while the others apply, the batch
 * left whole for redrive; a FIFO container that does not fetch the sequence numbers, or a method that cannot see the
 * message, fails the context start.
 */
class SqsFifoIdempotentListenerTest {

    static final String FIFO = "once-spring-sqs-fifo-" + UUID.randomUUID() + ".fifo";
    static final String DLQ = "once-spring-sqs-fifo-dlq-" + UUID.randomUUID() + ".fifo";
    static final String BATCH = "once-spring-sqs-fifo-batch-" + UUID.randomUUID() + ".fifo";
    static final String FAILING = "once-spring-sqs-fifo-failing-" + UUID.randomUUID() + ".fifo";
    /** The event ids of each call of the failing-group batch listener's body. */
    static final List<List<String>> failingCalls = new CopyOnWriteArrayList<>();
    /** Calls of group x's run in the failing-group batch listener's body, which fail while {@link #xFails}. */
    static final java.util.concurrent.atomic.AtomicInteger xCalls = new java.util.concurrent.atomic.AtomicInteger();

    static volatile boolean xFails = true;
    /** How often the batch containers handed each message to a call (before once), by event id. */
    static final Map<String, Integer> received = new ConcurrentHashMap<>();
    /** The event ids of each call of the batch listener's body. */
    static final List<List<String>> batches = new CopyOnWriteArrayList<>();

    /** Calls of the FIFO listener's body, and messages its containers handed over (before once), by event id. */
    static final Map<String, Integer> calls = new ConcurrentHashMap<>();

    static final Map<String, Integer> handedOver = new ConcurrentHashMap<>();
    /** A's first call of g-1, held before the listener (before once) until {@link #released}. */
    static final CountDownLatch holding = new CountDownLatch(1);

    static final CountDownLatch released = new CountDownLatch(1);
    /** A's first call of h-1, held in its body (after once's claim and fence) until {@link #releasedBody}. */
    static final CountDownLatch holdingBody = new CountDownLatch(1);

    static final CountDownLatch releasedBody = new CountDownLatch(1);

    static ElasticMqQueues mq;
    static SqsAsyncClient sqs;
    static TestDatabase db;
    static String fifoUrl;
    static String dlqUrl;
    static String batchUrl;
    static String failingUrl;

    @BeforeAll
    static void start() {
        mq = ElasticMqQueues.start();
        sqs = mq.sqs;
        dlqUrl = mq.fifo(DLQ, Map.of(QueueAttributeName.VISIBILITY_TIMEOUT, "30"));
        String dlqArn = mq.arn(dlqUrl);
        fifoUrl = mq.fifo(
                FIFO,
                Map.of(
                        QueueAttributeName.VISIBILITY_TIMEOUT,
                        "1",
                        QueueAttributeName.REDRIVE_POLICY,
                        "{\"deadLetterTargetArn\":\"" + dlqArn + "\",\"maxReceiveCount\":\"1\"}"));
        batchUrl = mq.fifo(BATCH, Map.of(QueueAttributeName.VISIBILITY_TIMEOUT, "30"));
        // short, so that a failed batch comes back soon
        failingUrl = mq.fifo(FAILING, Map.of(QueueAttributeName.VISIBILITY_TIMEOUT, "3"));
        System.setProperty("once.test.sqs.fifo", FIFO);
        System.setProperty("once.test.sqs.fifo-batch", BATCH);
        System.setProperty("once.test.sqs.fifo-failing", FAILING);
        db = ElasticMqQueues.ledgerDatabase();
    }

    @AfterAll
    static void stop() {
        released.countDown();
        releasedBody.countDown();
        if (db != null) {
            db.close();
        }
        if (mq != null) {
            mq.close();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    @Import({SqsBootstrapConfiguration.class, JdbcListenerBeans.class, Listeners.class})
    static class Config {
        /**
         * One message in flight per container: while A's call holds g-1, A does not receive (a receive would move g-1
         * to the dead-letter queue and take g-2 itself); B's receives do.
         */
        @Bean
        SqsMessageListenerContainerFactory<Object> defaultSqsListenerContainerFactory() {
            return SqsMessageListenerContainerFactory.builder()
                    .sqsAsyncClient(sqs)
                    .configure(o -> o.pollTimeout(Duration.ofSeconds(1))
                            .maxDelayBetweenPolls(Duration.ofSeconds(1))
                            .maxConcurrentMessages(1)
                            .maxMessagesPerPoll(1))
                    .messageInterceptor(new MessageInterceptor<Object>() {
                        @Override
                        public Message<Object> intercept(Message<Object> message) {
                            if (!(message.getHeaders().get("once-event-id") instanceof String id)) {
                                return message;
                            }
                            if (handedOver.merge(id, 1, Integer::sum) == 1 && id.equals("g-1")) {
                                // A: held before the listener past g-1's visibility timeout, until B has applied g-2
                                holding.countDown();
                                await(released);
                            }
                            return message;
                        }
                    })
                    .build();
        }

        /**
         * Batches that mix message groups: once splits them, one ordered run per group. One batch in hand at a time
         * (no receive until the call ends): a call slower than the queue's visibility timeout (a loaded machine)
         * would otherwise let a receive with the permits left take messages of the batch back before the call
         * ended, and a message that came back would no longer show that the call deleted none of its batch.
         */
        @Bean
        SqsMessageListenerContainerFactory<Object> mixedGroupsSqsListenerContainerFactory() {
            return SqsMessageListenerContainerFactory.builder()
                    .sqsAsyncClient(sqs)
                    .configure(o -> o.pollTimeout(Duration.ofSeconds(1))
                            .maxDelayBetweenPolls(Duration.ofSeconds(1))
                            .maxConcurrentMessages(10)
                            .maxMessagesPerPoll(10)
                            .backPressureMode(io.awspring.cloud.sqs.listener.BackPressureMode.ALWAYS_POLL_MAX_MESSAGES)
                            .fifoBatchGroupingStrategy(
                                    io.awspring.cloud.sqs.listener.FifoBatchGroupingStrategy
                                            .PROCESS_MULTIPLE_GROUPS_IN_SAME_BATCH))
                    .messageInterceptor(new MessageInterceptor<Object>() {
                        @Override
                        public java.util.Collection<Message<Object>> intercept(
                                java.util.Collection<Message<Object>> messages) {
                            for (Message<Object> m : messages) {
                                if (m.getHeaders().get("once-event-id") instanceof String id) {
                                    received.merge(id, 1, Integer::sum);
                                }
                            }
                            return messages;
                        }
                    })
                    .build();
        }
    }

    public static class Listeners {
        final JdbcTemplate jdbc;

        public Listeners(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @SqsListener("${once.test.sqs.fifo}")
        @IdempotentListener(consumer = "sqs-fifo")
        public void on(Message<String> message) throws InterruptedException {
            String id = (String) message.getHeaders().get("once-event-id");
            if (calls.merge(id, 1, Integer::sum) == 1 && id.equals("h-1")) {
                // A: held in its body past h-1's visibility timeout, until B's call of h-2 waits for it
                holdingBody.countDown();
                await(releasedBody);
            }
            jdbc.update("INSERT INTO ledger (event_id) VALUES (?)", id);
        }

        @SqsListener(value = "${once.test.sqs.fifo-batch}", factory = "mixedGroupsSqsListenerContainerFactory")
        @IdempotentListener(consumer = "sqs-fifo-batch")
        public void batch(List<Message<String>> messages) {
            batches.add(effects(messages));
        }

        /** Group x's calls fail after their effects while {@link #xFails}; every other call goes through. */
        @SqsListener(value = "${once.test.sqs.fifo-failing}", factory = "mixedGroupsSqsListenerContainerFactory")
        @IdempotentListener(consumer = "sqs-fifo-failing")
        public void failing(List<Message<String>> messages) {
            List<String> ids = effects(messages);
            failingCalls.add(ids);
            if (ids.get(0).startsWith("x-") && xCalls.incrementAndGet() > 0 && xFails) {
                throw new IllegalStateException("group x's call fails");
            }
        }

        /** Each message's effect, in order: their event ids. */
        private List<String> effects(List<Message<String>> messages) {
            List<String> ids = messages.stream()
                    .map(m -> (String) m.getHeaders().get("once-event-id"))
                    .toList();
            for (String id : ids) {
                jdbc.update("INSERT INTO ledger (event_id) VALUES (?)", id);
            }
            return ids;
        }
    }

    /** An application on the test's database, which its close leaves open for the other and the test. */
    static AnnotationConfigApplicationContext application() {
        return ElasticMqQueues.application(db, Config.class);
    }

    static void send(String eventId) {
        send(fifoUrl, "g", eventId);
    }

    static void send(String url, String group, String eventId) {
        mq.send(url, group, eventId, eventId);
    }

    static List<String> applied() {
        return applied("g-%");
    }

    static List<String> applied(String like) {
        try (var c = db.dataSource().getConnection();
                var s = c.prepareStatement("SELECT event_id FROM ledger WHERE event_id LIKE ? ORDER BY seq")) {
            s.setString(1, like);
            var rs = s.executeQuery();
            List<String> out = new java.util.ArrayList<>();
            while (rs.next()) {
                out.add(rs.getString(1));
            }
            return out;
        } catch (java.sql.SQLException e) {
            throw new IllegalStateException(e);
        }
    }

    static long messagesIn(String url) {
        return mq.held(url);
    }

    @Test
    void aListenerHeldPastItsVisibilityTimeoutDoesNotApplyAMessageAfterItsGroupWentOnWithoutIt() throws Exception {
        long deadLettered = messagesIn(dlqUrl);
        AnnotationConfigApplicationContext a = application();
        AnnotationConfigApplicationContext b = null;
        try {
            send("g-1");
            send("g-2");
            assertThat(holding.await(30, TimeUnit.SECONDS))
                    .as("A's call of g-1 is held before the listener")
                    .isTrue();
            b = application();
            Awaitility.await()
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> applied().contains("g-2"));
            released.countDown(); // A's call goes on
            a.close(); // the container stops after the calls in flight: A's call of g-1 has ended
            assertThat(applied())
                    .as("g-1, held by A past its visibility timeout while SQS moved it to the dead-letter queue, is"
                            + " not applied after g-2")
                    .containsExactly("g-2");
            assertThat(handedOver).as("g-1 handed to A's listener").containsEntry("g-1", 1);
            assertThat(calls)
                    .as("g-1's body never ran: refused before it; g-2's once, in B")
                    .doesNotContainKey("g-1")
                    .containsEntry("g-2", 1);
            assertThat(db.queryLong(
                            "SELECT count(*) FROM once_inbox WHERE consumer = 'sqs-fifo'" + " AND event_id = 'g-1'"))
                    .as("g-1 not claimed")
                    .isZero();
            assertThat(db.queryLong("SELECT count(*) FROM once_stream_position WHERE consumer = 'sqs-fifo' AND"
                            + " stream = '" + StreamPositions.sqsMessageGroup(fifoUrl, "g") + "'"))
                    .as("the group's position kept under the stream once-sqs's consumer names it by")
                    .isEqualTo(1);
            Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> messagesIn(dlqUrl) == deadLettered + 1);
        } finally {
            released.countDown();
            a.close();
            if (b != null) {
                b.close();
            }
        }
    }

    /**
     * A's call of h-1 held in its body past h-1's visibility timeout: its transaction took the group's row lock before
     * the body, so B's call of h-2 (the queue moved h-1 to the dead-letter queue) waits for A's commit before its own
     * body and follows it. The group goes on in the queue without h-1, never in the database.
     */
    @Test
    void aListenerHeldInItsBodyHoldsItsGroupBackUntilItCommits() throws Exception {
        AnnotationConfigApplicationContext a = application();
        AnnotationConfigApplicationContext b = null;
        try {
            send(fifoUrl, "h", "h-1");
            send(fifoUrl, "h", "h-2");
            assertThat(holdingBody.await(30, TimeUnit.SECONDS))
                    .as("A's call of h-1 is in its body")
                    .isTrue();
            b = application();
            Awaitility.await()
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> handedOver.containsKey("h-2")
                            && db.queryLong("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                            + " AND wait_event_type = 'Lock'")
                                    > 0);
            assertThat(calls).as("B's call of h-2 waits before its body").doesNotContainKey("h-2");
            releasedBody.countDown(); // A's body returns
            Awaitility.await()
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> applied("h-%").size() == 2);
            assertThat(applied("h-%"))
                    .as("h-2 after h-1, whose body held the group's row lock")
                    .containsExactly("h-1", "h-2");
        } finally {
            releasedBody.countDown();
            a.close();
            if (b != null) {
                b.close();
            }
        }
    }

    private static void await(CountDownLatch latch) {
        try {
            assertThat(latch.await(60, TimeUnit.SECONDS)).isTrue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /**
     * A batch listener on a FIFO queue, fed batches that mix message groups: each group's messages in one call of
     * the body, in order (one ordered run per group, each moving its group's position); before, the whole batch was
     * one call through the unordered batch path, with no position kept.
     */
    @Test
    void aBatchListenerRunsEachMessageGroupInOrderAsARunOfItsOwn() {
        List<String> sent = List.of("a-1", "b-1", "a-2", "b-2", "a-3");
        for (String id : sent) {
            send(batchUrl, id.substring(0, 1), id);
        }
        try (AnnotationConfigApplicationContext c = application()) {
            Awaitility.await()
                    .atMost(Duration.ofSeconds(30))
                    .until(() ->
                            applied("a-%").size() + applied("b-%").size() == sent.size() && messagesIn(batchUrl) == 0);
        }
        assertThat(applied("a-%")).as("group a in order").containsExactly("a-1", "a-2", "a-3");
        assertThat(applied("b-%")).as("group b in order").containsExactly("b-1", "b-2");
        assertThat(batches)
                .as("each call of the body one message group's messages, in order")
                .allSatisfy(ids -> assertThat(
                                ids.stream().map(id -> id.substring(0, 1)).distinct())
                        .hasSize(1))
                .allSatisfy(ids -> assertThat(ids).isSorted());
        for (String group : List.of("a", "b")) {
            assertThat(db.queryLong("SELECT count(*) FROM once_stream_position WHERE consumer = 'sqs-fifo-batch'"
                            + " AND stream = '" + StreamPositions.sqsMessageGroup(batchUrl, group) + "'"))
                    .as("group %s's position kept", group)
                    .isEqualTo(1);
        }
    }

    /**
     * A FIFO batch whose group x fails while groups p and q apply: p's and q's runs commit, each in its order, x's
     * rolls back alone, and the call throws, so that the container deletes none of the batch: it comes back (its
     * visibility timeout) whole, p's and q's messages as duplicates, and fails again while x does. Once x goes
     * through, x's are applied in order and all are deleted.
     */
    @Test
    void aFifoBatchWhoseGroupFailsAppliesTheOtherGroupsAndDeletesNothing() {
        List<String> sent = List.of("x-1", "p-1", "q-1", "p-2", "x-2", "q-2");
        for (String id : sent) {
            send(failingUrl, id.substring(0, 1), id);
        }
        try (AnnotationConfigApplicationContext c = application()) {
            Awaitility.await()
                    .atMost(Duration.ofSeconds(60))
                    .until(() -> xCalls.get() >= 2
                            && applied("p-%").size() == 2
                            && applied("q-%").size() == 2);
            // Not a count of the queue's messages: a failed batch comes back in pieces (a long poll returns the
            // messages whose visibility ran out first), and a piece of p's and q's alone, duplicates, is a call
            // that fails nothing and deletes them.
            Awaitility.await()
                    .atMost(Duration.ofSeconds(60))
                    .untilAsserted(() -> assertThat(List.of("p-1", "p-2", "q-1", "q-2"))
                            .as(
                                    "the calls threw: the container deleted none of the batch, p's and q's applied"
                                            + " included, so they came back (handed over: %s; the body's calls: %s)",
                                    received, failingCalls)
                            .allSatisfy(id -> assertThat(received.getOrDefault(id, 0))
                                    .as(id)
                                    .isGreaterThanOrEqualTo(2)));
            assertThat(applied("x-%")).as("group x's run rolled back alone").isEmpty();
            assertThat(db.queryLong("SELECT count(*) FROM once_stream_position WHERE consumer = 'sqs-fifo-failing'"
                            + " AND stream = '" + StreamPositions.sqsMessageGroup(failingUrl, "x") + "'"))
                    .as("group x's position not moved")
                    .isZero();
            xFails = false;
            Awaitility.await()
                    .atMost(Duration.ofSeconds(30))
                    .until(() -> applied("x-%").size() == 2 && messagesIn(failingUrl) == 0);
        }
        assertThat(applied("p-%")).as("group p in order, once").containsExactly("p-1", "p-2");
        assertThat(applied("q-%")).as("group q in order, once").containsExactly("q-1", "q-2");
        assertThat(applied("x-%"))
                .as("group x in order, once, when the batch came back")
                .containsExactly("x-1", "x-2");
        assertThat(failingCalls)
                .as("the body called for fresh messages only: p's and q's came back as duplicates, skipped")
                .filteredOn(ids -> !ids.get(0).startsWith("x-"))
                .flatExtracting(ids -> ids)
                .containsExactlyInAnyOrder("p-1", "p-2", "q-1", "q-2");
        for (String group : List.of("p", "q", "x")) {
            assertThat(db.queryLong("SELECT position FROM once_stream_position WHERE consumer = 'sqs-fifo-failing'"
                            + " AND stream = '" + StreamPositions.sqsMessageGroup(failingUrl, group) + "'"))
                    .as("group %s's position at its last message", group)
                    .isPositive();
        }
    }

    /** A FIFO queue's factory that fetches the message group but not the sequence number. */
    @Configuration(proxyBeanMethods = false)
    @Import(SqsBootstrapConfiguration.class)
    static class NoSequenceNumbers {
        @Bean
        SqsMessageListenerContainerFactory<Object> defaultSqsListenerContainerFactory() {
            return SqsMessageListenerContainerFactory.builder()
                    .sqsAsyncClient(sqs)
                    .configure(o -> o.messageSystemAttributeNames(List.of(
                            MessageSystemAttributeName.MESSAGE_GROUP_ID,
                            MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT)))
                    .build();
        }
    }

    static class FifoListener {
        @SqsListener("once-spring-sqs-never-started.fifo")
        @IdempotentListener(consumer = "sqs-fifo-unfenced")
        public void on(Message<String> message) {}
    }

    /** Its event id from the payload: it never sees the message's group and sequence number. */
    static class FifoPayloadListener {
        @SqsListener("once-spring-sqs-never-started.fifo")
        @IdempotentListener(consumer = "sqs-fifo-payload", eventId = "#p0")
        public void on(String payload) {}
    }

    /** Default factory: every system attribute. */
    @Configuration(proxyBeanMethods = false)
    @Import(SqsBootstrapConfiguration.class)
    static class AllAttributes {
        @Bean
        SqsMessageListenerContainerFactory<Object> defaultSqsListenerContainerFactory() {
            return SqsMessageListenerContainerFactory.builder()
                    .sqsAsyncClient(sqs)
                    .build();
        }
    }

    /**
     * What once needs to keep a FIFO queue's group positions, checked before the containers start: the container
     * must fetch each message's SequenceNumber (Spring Cloud AWS requires MessageGroupId itself), and the method must
     * take the message.
     */
    @Test
    void aFifoContainerWithoutSequenceNumbersOrAMethodWithoutTheMessageFailsTheStart() {
        Map<List<Class<?>>, List<String>> expected = Map.of(
                List.of(NoSequenceNumbers.class, FifoListener.class),
                List.of("FifoListener.on", "leave out SequenceNumber", "SEQUENCE_NUMBER"),
                List.of(AllAttributes.class, FifoPayloadListener.class),
                List.of("FifoPayloadListener.on", "takes no Message", "MessageGroupId and SequenceNumber"));
        expected.forEach((beans, says) -> assertThatThrownBy(() -> {
                    try (var c = new AnnotationConfigApplicationContext()) {
                        c.register(IdempotentListenerConfiguration.class);
                        beans.forEach(c::register);
                        c.refresh();
                    }
                })
                .as(beans.toString())
                .hasRootCauseInstanceOf(InvalidConfigurationException.class)
                .rootCause()
                .hasMessageContainingAll(says.toArray(String[]::new)));
    }
}
