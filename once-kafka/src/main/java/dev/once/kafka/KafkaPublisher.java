package dev.once.kafka;

import dev.once.InvalidConfigurationException;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The {@link Publisher} for Kafka, driven by the {@link dev.once.outbox.OutboxRelay}: topic =
 * {@link OutboxMessage#destination()}, record key = {@link OutboxMessage#key()} (one key stays in
 * one partition, in order), value = the payload, every header of the message, the message's own
 * event id as {@value OutboxMessage#EVENT_ID_HEADER} (what a {@link KafkaConsumerRunner} reads by
 * default) and its idempotency key as {@value #IDEMPOTENCY_KEY_HEADER}. A re-send after a relay
 * crash carries the same event id, and the receiving inbox absorbs it.
 *
 * <p>The producer is idempotent with {@code acks=all}: a broker-level retry never writes a record
 * twice, and an acknowledged record survives the loss of the leader. It has one request in flight
 * per broker ({@code max.in.flight.requests.per.connection=1}): when Kafka refuses a batch (a record
 * too large for the topic), the producer splits it and sends its records again with the same
 * sequence numbers, and a batch pipelined behind it must not reach the broker first. A broker that
 * holds no state yet for the producer on that partition accepts the later batch's higher sequence,
 * and then refuses the split records as out of sequence until {@code delivery.timeout.ms}: valid
 * records, and every later send to the partition, would time out because of one refused record.
 * A relay waits for each batch before it sends the next, so only relays sharing one publisher give
 * up pipelining. Setting any of the three otherwise is rejected.
 *
 * <p>Thread-safe: one instance may serve many relay threads. Close it to flush and release the producer.
 */
public final class KafkaPublisher implements Publisher, AutoCloseable {

    /** Header carrying {@link OutboxMessage#idempotencyKey()}. */
    public static final String IDEMPOTENCY_KEY_HEADER = "once-idempotency-key";
    /** How long {@link #send} waits for the broker's acknowledgement when not configured. */
    public static final Duration DEFAULT_SEND_TIMEOUT = Duration.ofSeconds(30);

    private final KafkaProducer<byte[], byte[]> producer;
    private final Duration sendTimeout;

    private KafkaPublisher(KafkaProducer<byte[], byte[]> producer, Duration sendTimeout) {
        this.producer = producer;
        this.sendTimeout = sendTimeout;
    }

    /** A publisher on a new producer with these settings ({@code bootstrap.servers} required) and the default send timeout. */
    public static KafkaPublisher create(Map<String, ?> producerProperties) {
        return create(producerProperties, DEFAULT_SEND_TIMEOUT);
    }

    /**
     * A publisher on a new producer. {@code acks} defaults to {@code all},
     * {@code enable.idempotence} to true and {@code max.in.flight.requests.per.connection} to 1;
     * serializers are byte arrays.
     *
     * @throws InvalidConfigurationException if {@code bootstrap.servers} is missing, acks or idempotence are
     *                                       weakened, or more requests in flight are asked for
     */
    public static KafkaPublisher create(Map<String, ?> producerProperties, Duration sendTimeout) {
        Objects.requireNonNull(producerProperties, "producerProperties");
        Objects.requireNonNull(sendTimeout, "sendTimeout");
        if (sendTimeout.isZero() || sendTimeout.isNegative()) {
            throw new InvalidConfigurationException("sendTimeout must be positive, but was " + sendTimeout);
        }
        Map<String, Object> p = new HashMap<>(producerProperties);
        if (!p.containsKey(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG)) {
            throw new InvalidConfigurationException("producerProperties need bootstrap.servers, but it was not set");
        }
        Object acks = p.getOrDefault(ProducerConfig.ACKS_CONFIG, "all");
        if (!acks.toString().equals("all") && !acks.toString().equals("-1")) {
            throw new InvalidConfigurationException("acks must be 'all' for an outbox publisher, but was '" + acks
                    + "': with fewer acks an acknowledged record can be lost with its leader, after the outbox row "
                    + "was marked sent");
        }
        Object idempotence = p.getOrDefault(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        if (!Boolean.parseBoolean(idempotence.toString().strip().toLowerCase(Locale.ROOT))) {
            throw new InvalidConfigurationException("enable.idempotence must be true for an outbox publisher, but was '"
                    + idempotence + "': without it a producer retry can write a record twice");
        }
        Object inFlight = p.getOrDefault(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        if (!inFlight.toString().strip().equals("1")) {
            throw new InvalidConfigurationException("max.in.flight.requests.per.connection must be 1 for an outbox "
                    + "publisher, but was '" + inFlight + "': with more, a batch sent behind one that Kafka refuses "
                    + "(a record too large) can be written first, and the refused batch's valid records are then "
                    + "refused as out of sequence until delivery.timeout.ms, with every later send to their partition");
        }
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        p.remove(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG);
        p.remove(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG);
        return new KafkaPublisher(
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer()), sendTimeout);
    }

    /**
     * Sends {@code message} and blocks until the broker acknowledged it.
     *
     * @return where it was written
     * @throws PublishFailure permanent if Kafka rejected it for good (record too large for the
     *                        producer or the topic, an invalid record), with Kafka's error code and
     *                        name as its receipt: sending again cannot help, dead-letter the row; retryable for a timeout, a broker that is unreachable,
     *                        any retriable Kafka error, a failed authentication or a denied topic or
     *                        cluster (credentials and ACLs can be fixed without changing the record,
     *                        as on every publisher), and on interruption: send it again later.
     *                        A topic that does not exist is retryable too: the producer waits
     *                        {@code max.block.ms} for its metadata and then fails exactly as when no
     *                        broker answers, so it cannot be told from an outage. A valid record
     *                        that Kafka refused only because it shared a batch with an invalid one
     *                        is sent again, once, and is retryable if that happens again
     */
    public RecordMetadata send(OutboxMessage message) {
        CompletableFuture<RecordMetadata> sent = start(Objects.requireNonNull(message, "message"));
        try {
            return sent.get(sendTimeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw PublishFailure.retryable(
                    "interrupted while sending outbox message " + message.id() + " to " + message.destination()
                            + "; it may or may not have been written",
                    Receipt.NONE,
                    e);
        } catch (TimeoutException e) {
            throw timedOut(message, e);
        } catch (ExecutionException e) {
            throw (PublishFailure) e.getCause();
        }
    }

    /**
     * {@link #send} for the relay; the receipt records where the record was written
     * ({@code topic-partition@offset}).
     */
    @Override
    public Receipt publish(OutboxMessage message) {
        return receipt(send(message));
    }

    /**
     * Hands every message to the producer at once, without waiting in between (the producer
     * batches them into few requests), and returns one stage per message: acknowledged within the
     * send timeout, or failed as {@link #send} fails.
     */
    @Override
    public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
        List<CompletionStage<Receipt>> results = new ArrayList<>(messages.size());
        for (OutboxMessage m : messages) {
            results.add(start(m).orTimeout(sendTimeout.toMillis(), TimeUnit.MILLISECONDS)
                    .handle((md, failure) -> {
                        if (failure == null) {
                            return receipt(md);
                        }
                        Throwable cause = failure instanceof CompletionException && failure.getCause() != null
                                ? failure.getCause()
                                : failure;
                        throw cause instanceof TimeoutException t ? timedOut(m, t) : (PublishFailure) cause;
                    }));
        }
        return results;
    }

    // The producer's send, its outcome classified: the stage fails with a PublishFailure only.
    private CompletableFuture<RecordMetadata> start(OutboxMessage message) {
        RecordHeaders headers = new RecordHeaders();
        message.headers().forEach((k, v) -> {
            if (!k.equals(OutboxMessage.EVENT_ID_HEADER) && !k.equals(IDEMPOTENCY_KEY_HEADER)) {
                headers.add(k, utf8(v));
            }
        });
        headers.add(OutboxMessage.EVENT_ID_HEADER, utf8(message.eventId()));
        headers.add(IDEMPOTENCY_KEY_HEADER, utf8(message.idempotencyKey()));
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                message.destination(),
                null,
                message.key() == null ? null : utf8(message.key()),
                message.payload(),
                headers);
        CompletableFuture<RecordMetadata> result = new CompletableFuture<>();
        send(message, record, result, true);
        return result;
    }

    private void send(
            OutboxMessage message,
            ProducerRecord<byte[], byte[]> record,
            CompletableFuture<RecordMetadata> result,
            boolean mayResend) {
        try {
            producer.send(record, (md, e) -> {
                if (e == null) {
                    result.complete(md);
                } else if (mayResend && e.getClass() == KafkaException.class) {
                    // Kafka fails the valid records of a batch that holds an invalid one (a null key on a
                    // compacted topic) with a plain KafkaException: the broker wrote none of the batch, and
                    // the record was refused for another's sake, so it is sent again, once. Not from this
                    // callback: it runs on the producer's I/O thread, which send() may wait on.
                    CompletableFuture.runAsync(() -> send(message, record, result, false))
                            .whenComplete((ignored, failure) -> {
                                if (failure != null) { // the producer was closed meanwhile
                                    result.completeExceptionally(PublishFailure.retryable(
                                            "outbox message " + message.id() + " to " + message.destination()
                                                    + " was not sent again: " + failure,
                                            Receipt.NONE,
                                            failure));
                                }
                            });
                } else {
                    result.completeExceptionally(refused(message, e));
                }
            });
        } catch (KafkaException e) {
            // send() itself throws when interrupted while it waits for metadata or buffer space
            // (InterruptException, which keeps the thread's interrupt): no answer about the record.
            result.completeExceptionally(refused(message, e));
        }
    }

    // Package-private for KafkaPublisherFailureTest: a denial needs ACLs the test broker does not have.
    static PublishFailure refused(OutboxMessage message, Exception e) {
        // Not one of Kafka's errors (a plain KafkaException): no answer about this record, which
        // shared a batch with an invalid one again after its re-send.
        if (!(e instanceof ApiException)
                || e instanceof RetriableException
                || e instanceof org.apache.kafka.common.errors.TimeoutException
                || e instanceof AuthorizationException
                || e instanceof AuthenticationException) {
            return PublishFailure.retryable(
                    "Kafka refused outbox message " + message.id() + " to " + message.destination() + " for now: " + e,
                    Receipt.NONE,
                    e);
        }
        // What Kafka answered: its error code and name (10 MESSAGE_TOO_LARGE).
        Receipt answer = new Receipt(
                Errors.forException(e).code(), Errors.forException(e).name() + ": " + e.getMessage());
        return PublishFailure.permanent(
                "Kafka rejected outbox message " + message.id() + " to " + message.destination() + ": " + e, answer, e);
    }

    private PublishFailure timedOut(OutboxMessage message, TimeoutException e) {
        return PublishFailure.retryable(
                "outbox message " + message.id() + " to " + message.destination() + " was not acknowledged within "
                        + sendTimeout + "; it may or may not have been written",
                Receipt.NONE,
                e);
    }

    private static Receipt receipt(RecordMetadata md) {
        return new Receipt(0, md.topic() + "-" + md.partition() + "@" + md.offset());
    }

    /** Flushes what is in flight and closes the producer. */
    @Override
    public void close() {
        producer.close();
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
