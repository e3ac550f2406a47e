package dev.once.sqs;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.StreamPositions;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs the messages of a Lambda SQS invocation through an {@link IdempotentConsumer} and
 * answers with a partial batch response, so a failure redelivers only the failed messages; the
 * ones that succeeded and come back anyway (a whole-batch retry, a timeout after commit) are
 * absorbed as duplicates. Enable {@code ReportBatchItemFailures} on the event source mapping.
 *
 * <p>Standard queues: one transaction for the batch (the engine falls back to one per message
 * when one fails). FIFO queues: messages in order, one transaction each; at the first failure
 * that message and every later one are reported, as Lambda requires for FIFO.
 *
 * <p>Permanent failures are reported as failures too, so the queue's redrive policy moves them
 * to its dead-letter queue after {@code maxReceiveCount}. Messages without an event id are
 * permanent failures.
 *
 * <p>Call {@link #handle} from your {@code RequestHandler}. Thread-safe.
 */
public final class SqsLambdaHandler {

    private static final Logger log = LoggerFactory.getLogger(SqsLambdaHandler.class);

    private final IdempotentConsumer consumer;
    private final String eventIdAttribute;

    /** Reads the event id from the message attribute {@value SqsDeliveries#DEFAULT_EVENT_ID_ATTRIBUTE}. */
    public SqsLambdaHandler(IdempotentConsumer consumer) {
        this(consumer, SqsDeliveries.DEFAULT_EVENT_ID_ATTRIBUTE);
    }

    public SqsLambdaHandler(IdempotentConsumer consumer, String eventIdAttribute) {
        this.consumer = Objects.requireNonNull(consumer, "consumer");
        this.eventIdAttribute = Objects.requireNonNull(eventIdAttribute, "eventIdAttribute");
    }

    /** Processes the batch; never throws for a failed message (it is in the response instead). */
    public SqsBatchResponse handle(SqsEvent event) {
        List<SqsEvent.Message> records = event.records();
        List<SqsBatchResponse.BatchItemFailure> failures = new ArrayList<>();
        boolean fifo = !records.isEmpty() && SqsDeliveries.isFifo(records.get(0).eventSourceArn());
        if (fifo) {
            for (int i = 0; i < records.size(); i++) {
                SqsEvent.Message m = records.get(i);
                Outcome o = process(m);
                if (!o.shouldAcknowledge()) {
                    report(m, o);
                    for (int j = i; j < records.size(); j++) {
                        failures.add(new SqsBatchResponse.BatchItemFailure(
                                records.get(j).messageId()));
                    }
                    break;
                }
            }
            return new SqsBatchResponse(failures);
        }
        List<SqsEvent.Message> valid = new ArrayList<>();
        List<Delivery> deliveries = new ArrayList<>();
        for (SqsEvent.Message m : records) {
            try {
                deliveries.add(delivery(m));
                valid.add(m);
            } catch (InvalidDeliveryException e) {
                report(m, new Outcome(m.messageId(), Outcome.Status.FAILED_PERMANENT, e));
                failures.add(new SqsBatchResponse.BatchItemFailure(m.messageId()));
            }
        }
        List<Outcome> outcomes = consumer.processBatch(deliveries);
        for (int i = 0; i < valid.size(); i++) {
            if (!outcomes.get(i).shouldAcknowledge()) {
                report(valid.get(i), outcomes.get(i));
                failures.add(new SqsBatchResponse.BatchItemFailure(valid.get(i).messageId()));
            }
        }
        return new SqsBatchResponse(failures);
    }

    /**
     * One FIFO message, with its group's position kept in the database (see {@link dev.once.StreamPositions}): a
     * message its group went on without is refused rather than applied after its successors.
     */
    private Outcome process(SqsEvent.Message m) {
        try {
            String group = m.attributes().get("MessageGroupId");
            String sequence = m.attributes().get("SequenceNumber");
            if (group == null || sequence == null) {
                return consumer.process(delivery(m)); // not as SQS sends a FIFO record: no position to keep
            }
            StreamPositions at = new StreamPositions(
                    StreamPositions.sqsMessageGroup(m.eventSourceArn(), group),
                    List.of(StreamPositions.sqsSequenceNumber(m.messageId(), sequence)));
            return consumer.processInOrder(List.of(delivery(m)), at).get(0);
        } catch (InvalidDeliveryException e) {
            return new Outcome(m.messageId(), Outcome.Status.FAILED_PERMANENT, e);
        }
    }

    private Delivery delivery(SqsEvent.Message m) {
        return SqsDeliveries.delivery(
                eventIdAttribute,
                m.messageId(),
                m.body(),
                m.messageAttributes(),
                m.attributes().get("ApproximateReceiveCount"),
                "sqs:" + SqsDeliveries.queueName(m.eventSourceArn()));
    }

    private static void report(SqsEvent.Message m, Outcome o) {
        log.warn(
                "SQS message {} (event {}) not processed ({}), reported for redelivery: {}",
                m.messageId(),
                o.eventId(),
                o.tag(),
                String.valueOf(o.failure()));
    }
}
