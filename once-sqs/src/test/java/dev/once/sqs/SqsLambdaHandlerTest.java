package dev.once.sqs;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.util.List;
import java.util.Map;
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
