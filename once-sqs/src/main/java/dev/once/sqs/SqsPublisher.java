package dev.once.sqs;

import dev.once.outbox.OutboxMessage;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.SendMessageRequest;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

/**
 * Sends messages to SQS with the event id where {@link SqsConsumer} reads it: the string
 * message attribute {@value OutboxMessage#EVENT_ID_HEADER}. For a FIFO queue ({@code .fifo})
 * it sets {@code MessageDeduplicationId} from the event id (an outbox row's idempotency key), so a relay that re-sends after a
 * crash within SQS's five-minute dedup window produces no second message, and
 * {@code MessageGroupId} from the ordering key (the event id when there is none). Outside the
 * window, or on a standard queue, a re-send is a second message that the consumer's inbox absorbs.
 *
 * <p>Bodies are UTF-8 text, as SQS requires. Headers travel as string message attributes; SQS
 * allows ten per message, the event id included.
 *
 * <p>Thread-safe when the client is (the AWS SDK clients are).
 */
public final class SqsPublisher {

    private static final Pattern SQS_ID = Pattern.compile("[\\p{Alnum}\\p{Punct}]{1,128}");

    private final SqsClient client;
    private final Map<String, String> queueUrls = new ConcurrentHashMap<>();

    public SqsPublisher(SqsClient client) {
        this.client = Objects.requireNonNull(client, "client");
    }

    /**
     * Sends one outbox row; its destination is a queue URL or a queue name. On a FIFO queue the
     * deduplication id is the row's idempotency key, which is the event id unless the handler
     * gave one: two different messages one handler wrote for one event must not dedupe each other.
     *
     * @return the SQS message id
     * @throws software.amazon.awssdk.core.exception.SdkException when SQS refuses or cannot be reached;
     *         the relay retries and the consumer absorbs the resulting copy
     */
    public String send(OutboxMessage message) {
        return send(message.destination(), message.eventId(), message.idempotencyKey(), message.key(),
                message.payload(), message.headers());
    }

    /**
     * Sends one message.
     *
     * @param queue   queue URL ({@code https://…}) or name
     * @param eventId the producer-assigned event id
     * @param key     ordering key, the message group of a FIFO queue; may be null
     * @return the SQS message id
     */
    public String publish(String queue, String eventId, String key, byte[] payload, Map<String, String> headers) {
        return send(queue, eventId, eventId, key, payload, headers);
    }

    private String send(String queue, String eventId, String deduplicationKey, String key, byte[] payload,
                        Map<String, String> headers) {
        Objects.requireNonNull(eventId, "eventId");
        String url = queueUrl(queue);
        Map<String, MessageAttributeValue> attributes = new LinkedHashMap<>();
        attributes.put(OutboxMessage.EVENT_ID_HEADER, text(eventId));
        if (headers != null) {
            headers.forEach((k, v) -> attributes.putIfAbsent(k, text(v)));
        }
        if (attributes.size() > 10) {
            throw new IllegalArgumentException("SQS allows 10 message attributes, but event " + eventId + " has "
                    + attributes.size() + " (headers " + attributes.keySet() + "); drop some headers");
        }
        SendMessageRequest.Builder request = SendMessageRequest.builder().queueUrl(url)
                .messageBody(new String(payload, StandardCharsets.UTF_8)).messageAttributes(attributes);
        if (SqsDeliveries.isFifo(url)) {
            request.messageDeduplicationId(sqsId(deduplicationKey)).messageGroupId(sqsId(key != null ? key : eventId));
        }
        return client.sendMessage(request.build()).messageId();
    }

    /**
     * An event id as a FIFO deduplication or group id: itself when SQS accepts it (1 to 128
     * alphanumeric or punctuation characters), otherwise its SHA-256 in hex, so the mapping
     * stays stable across re-sends.
     */
    static String sqsId(String value) {
        if (SQS_ID.matcher(value).matches()) {
            return value;
        }
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
                    .digest(value.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every JVM", e);
        }
    }

    private String queueUrl(String queue) {
        Objects.requireNonNull(queue, "queue");
        if (queue.startsWith("https://") || queue.startsWith("http://")) {
            return queue;
        }
        return queueUrls.computeIfAbsent(queue, q -> client.getQueueUrl(r -> r.queueName(q)).queueUrl());
    }

    private static MessageAttributeValue text(String value) {
        return MessageAttributeValue.builder().dataType("String").stringValue(value).build();
    }
}
