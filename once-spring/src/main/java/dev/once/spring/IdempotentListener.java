package dev.once.spring;

import dev.once.ClaimTiming;
import dev.once.outbox.OutboxMessage;
import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Makes a {@code @KafkaListener}, {@code @RabbitListener}, Pub/Sub or {@code @SqsListener} method idempotent: each event's effect is
 * applied once, however often the broker delivers it.
 *
 * <pre>{@code
 * @KafkaListener(topics = "payments")
 * @IdempotentListener(consumer = "billing")
 * void on(ConsumerRecord<String, String> record) {
 *     jdbc.update("UPDATE account SET balance = balance + ? WHERE id = ?", amount(record), account(record));
 *     outbox.add("https://psp.example/charges", record.key(), record.value().getBytes(UTF_8), Map.of(),
 *             "charge:" + record.key());
 * }
 * }</pre>
 *
 * <p>Each call runs in one transaction of the application's transaction manager: the event id is
 * claimed first; a <b>duplicate</b> (claimed by an earlier, committed delivery) skips the method body and
 * returns normally, so the container acknowledges it; otherwise the body, its {@code JdbcTemplate},
 * {@code JdbcClient} and JPA repository writes and its {@link OnceOutbox} rows commit together with the
 * claim. The method returns only after that commit, so the container acknowledges (commits the offset,
 * {@code basicAck}s) after it. A body that throws rolls everything back and its exception reaches the
 * container's error handler unchanged ({@code DefaultErrorHandler} with its {@code BackOff}, a
 * {@code DeadLetterPublishingRecoverer}); an {@code Acknowledgment} argument
 * ({@code AckMode.MANUAL}/{@code MANUAL_IMMEDIATE}) is handed to the body deferred: its
 * {@code acknowledge()} takes effect after the commit, never before.
 *
 * <p><b>Event id</b>: the {@value OutboxMessage#EVENT_ID_HEADER} header ({@link #header}) of the method's
 * {@code ConsumerRecord}, Spring {@code Message} or AMQP {@code Message} argument, or the SpEL expression
 * {@link #eventId} over the method's arguments. A missing event id fails the delivery with
 * {@link dev.once.InvalidDeliveryException} (permanent: dead-letter it). A method with neither a message
 * argument nor {@link #eventId} is refused when the context starts.
 *
 * <p><b>Batch listeners</b> ({@code List<ConsumerRecord<K, V>>}, {@code List<Message<?>>}, or a list of
 * converted payloads such as {@code List<Payment>} with {@link #eventId} evaluated per element): the batch is
 * claimed in one statement and the body receives only the records claimed for the first time, all in one
 * transaction. If it throws, the batch is rolled back and retried one record per transaction; the first
 * record that fails again is reported as a {@code BatchListenerFailedException} at its index, after every
 * record before it committed, so the error handler commits only offsets of records that were applied (in a
 * transaction open before the call, a container's or a caller's, the records before it are applied in that
 * transaction and commit only with it; the exception's message says which).
 *
 * <p><b>Spring Cloud GCP Pub/Sub</b>: a method taking a {@code BasicAcknowledgeablePubsubMessage}
 * ({@code PubSubTemplate.subscribe(subscription, bean::on)}) or a {@code Message<?>} from a
 * {@code PubSubInboundChannelAdapter}; the event id is the message attribute {@link #header}. once acks
 * the message after the commit and nacks it after a rollback; the body's {@code ack()} waits for the
 * commit, its {@code nack()} rolls back.
 *
 * <p><b>Spring Cloud AWS SQS</b> ({@code @SqsListener}): a method taking a {@code Message<?>}; the event id is the
 * message attribute {@link #header} (the producer's event id, as {@code once-sqs} reads it), never the SQS message id,
 * which a producer's retried send changes. In {@code acknowledgementMode = MANUAL} the body's {@code Acknowledgement}
 * ({@code acknowledge()}, {@code acknowledgeAsync()}, or {@code Acknowledgement.acknowledge(message)}) deletes the
 * message only after the commit, and once deletes a duplicate, whose body is skipped. In {@code ON_SUCCESS} (the
 * default) the container deletes when the method returns, after once's own transaction committed; a call made in a
 * transaction that is still open then is refused before its body (the delete would precede that commit): use MANUAL
 * there. once reads the mode from the annotation (an empty one counts as MANUAL when the method takes an
 * {@code Acknowledgement}); {@code ALWAYS}, and a batch listener in MANUAL mode or taking a
 * {@code BatchAcknowledgement}, are refused when the context starts.
 *
 * <p><b>An event another transaction holds</b> (its claim's lock wait ended by a lock timeout: {@code IN_PROGRESS}):
 * a {@code @KafkaListener} or {@code @RabbitListener} call in a transaction of its own (a Kafka one also in a
 * container's transaction) waits for that transaction, trying the claim again in a new transaction each time, with
 * the record unacknowledged: failing it would let Kafka's error handler skip it, or make RabbitMQ requeue it, each
 * requeue counting toward a quorum queue's {@code x-delivery-limit}, at which the broker drops or dead-letters it,
 * while the holder may still roll back. The wait ends when the thread is interrupted or its listener container is
 * stopping: then {@link HolderWaitAbandonedException}, and the broker redelivers the record. A claim the thread's
 * own suspended transaction holds ({@link dev.once.ClaimHeldOnThreadException}) fails at once. Pub/Sub and
 * {@code @SqsListener} calls, and a RabbitMQ method taking a {@code Channel}, fail with {@code IN_PROGRESS} as a
 * retryable failure.
 *
 * <p>Enable with {@link EnableIdempotentListeners} (the Boot starter does it).
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface IdempotentListener {

    /** The consumer name that scopes the claims, matching {@code [a-z0-9._-]{1,100}}. */
    String consumer();

    /** The header that carries the producer's event id; default {@value OutboxMessage#EVENT_ID_HEADER}. */
    String header() default OutboxMessage.EVENT_ID_HEADER;

    /**
     * A SpEL expression for the event id over the method's arguments ({@code #record.key()},
     * {@code #p0.payload.id}, {@code @ids.of(#p0)}), used instead of {@link #header} when set. For a
     * batch listener it is evaluated per element, as {@code #root}.
     */
    String eventId() default "";

    /**
     * When the event id is claimed: before the body (the default), or {@link ClaimTiming#AT_COMMIT}, the body
     * first and the claim in the COMMIT's own round trip, one round trip fewer per call. A copy then runs
     * the body too, and its transaction rolls back with everything the body wrote when the claim finds
     * the id taken; once reads the inbox after every rollback and acknowledges a copy it finds applied,
     * whatever the body asked. So with {@code AT_COMMIT} <b>every effect of the body must be a write in the
     * listener's transaction</b> ({@code JdbcTemplate}, {@code JdbcClient} or JPA on the transaction
     * manager's {@code DataSource}) or an {@link OnceOutbox} row: a {@code KafkaTemplate} send, an HTTP
     * call or a {@code REQUIRES_NEW} step is made again for every copy, and the body must not end the
     * transaction itself.
     *
     * <p>Kept only where it holds: a call made inside a transaction the caller already began claims first
     * (a duplicate found at that commit would roll back the caller's work); refused when the context starts
     * for a batch listener (its batch is claimed in one statement before the body), for a method taking a
     * RabbitMQ {@code Channel} (its acks are settled when the transaction ends, before once can tell a copy
     * from a failure) and on MariaDB (a deadlock the body caught goes on in a new transaction that the claim
     * would commit as if whole).
     */
    ClaimTiming claimTiming() default ClaimTiming.BEFORE_HANDLER;
}
