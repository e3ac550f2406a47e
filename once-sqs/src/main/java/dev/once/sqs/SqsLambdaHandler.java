package dev.once.sqs;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.RetryPolicy;
import dev.once.StreamPositions;
import dev.once.adapter.AdapterDriver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
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
 * <p>A message whose claim another delivery holds ({@code IN_PROGRESS}: a redelivery while a slow holder, in
 * another invocation or process, still works) is not reported at once: each report is a receive toward the
 * redrive policy's {@code maxReceiveCount}, and at the limit SQS moves the message to the dead-letter queue
 * while the holder may still roll back, the event then never applied. With
 * {@link #handle(SqsEvent, LongSupplier)} it is tried again, spaced 100 ms doubling to 2 s, while the
 * invocation has more than {@link #TIME_RESERVE} left, and settled by the try that found the holder ended
 * (applied, or a duplicate). An invocation cannot keep a message past its own time: a holder that outlives it
 * still costs the message a receive, so a holder that outlives {@code maxReceiveCount} invocations (a
 * transaction open for minutes) still lets SQS move it unapplied; {@code maxReceiveCount} bounds how long a
 * holder may work. A claim held by a suspended transaction of the calling thread
 * ({@link dev.once.ClaimHeldOnThreadException}) is reported at once: waiting for it would never end.
 *
 * <p>Call {@link #handle(SqsEvent, LongSupplier)} from your {@code RequestHandler}, with
 * {@code context::getRemainingTimeInMillis}. Thread-safe.
 */
public final class SqsLambdaHandler {

    /**
     * Time a try of a message whose claim another delivery holds leaves the invocation: the last try's lock wait and,
     * once the holder has ended, its handler, and the response, must fit in it. A try is started only while more is
     * left; a handler that may take longer risks the invocation's timeout in the last try (Lambda then retries the
     * whole batch: each of its messages one receive more, the applied ones absorbed as duplicates).
     */
    public static final Duration TIME_RESERVE = Duration.ofSeconds(5);

    /** Spacing of the tries of a message whose claim another delivery holds: 100 ms doubling to 2 s, equal jitter. */
    private static final RetryPolicy HOLDER_RETRIES = RetryPolicy.builder()
            .initialDelay(Duration.ofMillis(100))
            .maxDelay(Duration.ofSeconds(2))
            .jitter(RetryPolicy.Jitter.EQUAL)
            .maxRetries(RetryPolicy.MAX_RETRIES_LIMIT)
            .build();

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

    /**
     * Processes the batch without knowing the invocation's time: a message whose claim another delivery holds is
     * reported at once (one receive spent); prefer {@link #handle(SqsEvent, LongSupplier)}. Never throws for a
     * failed message (it is in the response instead).
     */
    public SqsBatchResponse handle(SqsEvent event) {
        return handle(event, () -> 0);
    }

    /**
     * Processes the batch; a message whose claim another delivery holds is tried again while the invocation has
     * time left (more than {@link #TIME_RESERVE} after the pause), then reported. Never throws for a failed message
     * (it is in the response instead).
     *
     * @param remainingMillis the invocation's time left, in milliseconds: {@code context::getRemainingTimeInMillis}
     */
    public SqsBatchResponse handle(SqsEvent event, LongSupplier remainingMillis) {
        Objects.requireNonNull(remainingMillis, "remainingMillis");
        List<SqsEvent.Message> records = event.records();
        List<SqsBatchResponse.BatchItemFailure> failures = new ArrayList<>();
        boolean fifo = !records.isEmpty() && SqsDeliveries.isFifo(records.get(0).eventSourceArn());
        if (fifo) {
            for (int i = 0; i < records.size(); i++) {
                SqsEvent.Message m = records.get(i);
                Outcome o = untilHolderEnds(process(m), () -> process(m), remainingMillis);
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
        List<Outcome> outcomes = new ArrayList<>(consumer.processBatch(deliveries));
        for (int i = 0; i < valid.size(); i++) {
            Delivery d = deliveries.get(i);
            outcomes.set(i, untilHolderEnds(outcomes.get(i), () -> consumer.process(d), remainingMillis));
        }
        for (int i = 0; i < valid.size(); i++) {
            if (!outcomes.get(i).shouldAcknowledge()) {
                report(valid.get(i), outcomes.get(i));
                failures.add(new SqsBatchResponse.BatchItemFailure(valid.get(i).messageId()));
            }
        }
        return new SqsBatchResponse(failures);
    }

    /**
     * {@code o}, or, when its claim is held by another delivery ({@link AdapterDriver#heldElsewhere}), the outcome
     * of the first try {@code again} that found the holder ended, spaced by the holder retries; a try is started
     * only while more than {@link #TIME_RESERVE} will be left after its pause, else the last outcome is returned.
     */
    private static Outcome untilHolderEnds(Outcome o, Supplier<Outcome> again, LongSupplier remainingMillis) {
        for (int tries = 1; AdapterDriver.heldElsewhere(o); tries++) {
            long pause = HOLDER_RETRIES.delay(tries).toMillis();
            if (remainingMillis.getAsLong() - pause <= TIME_RESERVE.toMillis()) {
                return o;
            }
            try {
                Thread.sleep(pause);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return o;
            }
            o = again.get();
        }
        return o;
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
