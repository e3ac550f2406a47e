package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome.Status;
import dev.once.RetryableException;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The Lambda partial batch response: only failures come back, and what comes back anyway is absorbed. */
class SqsLambdaHandlerTest {

    private TestDatabase db;

    @BeforeEach
    void setUp() {
        db = TestPostgres.shared().freshDatabase();
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    @Test
    void onlyTheFailedMessageIsReportedAndTheWholeBatchRetryIsAbsorbed() {
        SqsLambdaHandler handler = new SqsLambdaHandler(new Recorder(db, d -> {}));
        String arn = "arn:aws:sqs:us-east-1:000000000000:payments";
        SqsEvent first = new SqsEvent(List.of(
                record("m1", "evt-1", "ok", 1, arn),
                record("m2", "evt-2", "fail-once", 1, arn),
                record("m3", "evt-3", "ok", 1, arn),
                new SqsEvent.Message("m4", "rh-m4", "no id", Map.of(), Map.of(), arn)));
        assertThat(handler.handle(first).batchItemFailures())
                .extracting(SqsBatchResponse.BatchItemFailure::itemIdentifier)
                .as("only the failed message and the one without an event id are redelivered")
                .containsExactly("m4", "m2");

        // Lambda retries the whole batch anyway (a timeout after commit): the first attempts are absorbed
        SqsEvent retry = new SqsEvent(List.of(
                record("m1", "evt-1", "ok", 2, arn),
                record("m2", "evt-2", "fail-once", 2, arn),
                record("m3", "evt-3", "ok", 2, arn)));
        assertThat(handler.handle(retry).batchItemFailures()).isEmpty();
        assertThat(db.queryLong("SELECT count(*) FROM effect"))
                .as("three events, each applied exactly once")
                .isEqualTo(3);
        assertThat(db.queryLong("SELECT count(DISTINCT event_id) FROM effect")).isEqualTo(3);
    }

    @Test
    void fifoReportsTheFailedMessageAndEverythingAfterIt() {
        SqsLambdaHandler handler = new SqsLambdaHandler(new Recorder(db, d -> {}));
        String arn = "arn:aws:sqs:us-east-1:000000000000:payments.fifo";
        SqsEvent event = new SqsEvent(List.of(
                record("m1", "evt-1", "ok", 1, arn),
                record("m2", "evt-2", "fail-once", 1, arn),
                record("m3", "evt-3", "ok", 1, arn)));
        assertThat(handler.handle(event).batchItemFailures())
                .extracting(SqsBatchResponse.BatchItemFailure::itemIdentifier)
                .containsExactly("m2", "m3");
        assertThat(db.queryLong("SELECT count(*) FROM effect WHERE event_id = 'evt-3'"))
                .as("nothing after the failure runs, so the group stays in order")
                .isZero();
    }

    @Test
    void fifoRefusesAMessageItsGroupWentOnWithout() {
        SqsLambdaHandler handler = new SqsLambdaHandler(new Recorder(db, d -> {}));
        String arn = "arn:aws:sqs:us-east-1:000000000000:payments.fifo";
        assertThat(handler.handle(new SqsEvent(List.of(fifo("m2", "evt-2", "20", arn), fifo("m3", "evt-3", "30", arn))))
                        .batchItemFailures())
                .isEmpty();
        // m1 comes late (an invocation that held it past its visibility timeout while SQS moved it on)
        assertThat(handler.handle(new SqsEvent(List.of(fifo("m1", "evt-1", "10", arn))))
                        .batchItemFailures())
                .extracting(SqsBatchResponse.BatchItemFailure::itemIdentifier)
                .containsExactly("m1");
        assertThat(db.queryLong("SELECT count(*) FROM effect WHERE event_id = 'evt-1'"))
                .as("not applied after evt-2 and evt-3")
                .isZero();
        assertThat(db.queryLong("SELECT count(*) FROM once_stream_position WHERE position = 30"))
                .isEqualTo(1);
    }

    /**
     * A message whose claim another delivery holds (a slow holder elsewhere) is not reported at once: each report
     * is a receive toward the redrive policy's {@code maxReceiveCount}, and the holder may still roll back. It is
     * tried again within the invocation's remaining time, and applied once the holder has rolled back.
     */
    @Test
    void aMessageWhoseClaimAnotherHoldsIsTriedAgainWithinTheInvocationAndAppliedOnceTheHolderRolledBack()
            throws Exception {
        Recorder recorder = new Recorder(db, Duration.ofMillis(100), d -> {});
        Holder holder = new Holder("evt-1");
        recorder.onDelivery(d -> {
            if (recorder.deliveries.size() >= 3) {
                holder.rollBack(); // after two tries found the claim held
            }
        });
        AtomicLong calls = new AtomicLong();
        LongSupplier remaining = () -> 60_000 - 1_000 * calls.incrementAndGet(); // the invocation's clock runs
        String arn = "arn:aws:sqs:us-east-1:000000000000:payments";
        try {
            SqsBatchResponse response = new SqsLambdaHandler(recorder)
                    .handle(new SqsEvent(List.of(record("m1", "evt-1", "ok", 1, arn))), remaining);
            assertThat(response.batchItemFailures())
                    .as("applied within the invocation; outcomes %s", recorder.outcomes)
                    .isEmpty();
        } finally {
            holder.rollBack();
            holder.join();
        }
        assertThat(recorder.count("evt-1", Status.IN_PROGRESS))
                .as("tries while held")
                .isGreaterThanOrEqualTo(2);
        assertThat(db.queryLong("SELECT count(*) FROM effect WHERE event_id = 'evt-1'"))
                .as("applied exactly once")
                .isEqualTo(1);
    }

    /**
     * The invocation cannot keep a message past its own time: when the time left runs short while the holder still
     * works, the message is reported for redelivery (one receive spent), before Lambda would time the whole
     * invocation out.
     */
    @Test
    void aMessageWhoseClaimIsStillHeldWhenTheInvocationRunsShortOfTimeIsReported() throws Exception {
        Recorder recorder = new Recorder(db, Duration.ofMillis(100), d -> {});
        Holder holder = new Holder("evt-1");
        AtomicLong calls = new AtomicLong();
        LongSupplier remaining = () -> 40_000 - 10_000 * calls.incrementAndGet();
        String arn = "arn:aws:sqs:us-east-1:000000000000:payments";
        SqsBatchResponse response;
        try {
            response = new SqsLambdaHandler(recorder)
                    .handle(
                            new SqsEvent(
                                    List.of(record("m1", "evt-1", "ok", 1, arn), record("m2", "evt-2", "ok", 1, arn))),
                            remaining);
        } finally {
            holder.rollBack();
            holder.join();
        }
        assertThat(response.batchItemFailures())
                .extracting(SqsBatchResponse.BatchItemFailure::itemIdentifier)
                .as("outcomes %s", recorder.outcomes)
                .containsExactly("m1");
        assertThat(recorder.count("evt-1", Status.IN_PROGRESS))
                .as("tried again while time was left")
                .isGreaterThanOrEqualTo(2);
        assertThat(db.queryLong("SELECT count(*) FROM effect")).as("evt-2 only").isEqualTo(1);
    }

    /** Another engine on the same database that claims an event and holds it in its open transaction, then fails. */
    private final class Holder {
        private final CountDownLatch release = new CountDownLatch(1);
        private final Thread thread;

        Holder(String eventId) throws InterruptedException {
            CountDownLatch holding = new CountDownLatch(1);
            IdempotentConsumer engine = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer(Recorder.CONSUMER)
                    .handler((d, tx) -> {
                        holding.countDown();
                        release.await();
                        throw new RetryableException("the holder fails after all: its transaction rolls back");
                    })
                    .build();
            thread = new Thread(
                    () -> engine.process(Delivery.builder(eventId).payload("ok").build()), "holder");
            thread.start();
            assertThat(holding.await(30, TimeUnit.SECONDS))
                    .as("the holder holds the claim")
                    .isTrue();
        }

        void rollBack() {
            release.countDown();
        }

        void join() throws InterruptedException {
            thread.join(Duration.ofSeconds(30).toMillis());
        }
    }

    private static SqsEvent.Message fifo(String messageId, String eventId, String sequenceNumber, String arn) {
        return new SqsEvent.Message(
                messageId,
                "rh-" + messageId,
                "ok",
                Map.of("ApproximateReceiveCount", "1", "MessageGroupId", "g", "SequenceNumber", sequenceNumber),
                Map.of("once-event-id", eventId),
                arn);
    }

    private static SqsEvent.Message record(
            String messageId, String eventId, String body, int receiveCount, String arn) {
        return new SqsEvent.Message(
                messageId,
                "rh-" + messageId,
                body,
                Map.of("ApproximateReceiveCount", Integer.toString(receiveCount)),
                Map.of("once-event-id", eventId),
                arn);
    }
}
