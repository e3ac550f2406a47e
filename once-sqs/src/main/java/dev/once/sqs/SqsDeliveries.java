package dev.once.sqs;

import dev.once.Delivery;
import dev.once.InvalidDeliveryException;
import dev.once.StreamPositions;
import dev.once.outbox.OutboxMessage;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.Objects;

/** Turns SQS messages (from the API or a Lambda event) into deliveries. */
final class SqsDeliveries {

    /** Default message attribute that carries the producer's event id. */
    static final String DEFAULT_EVENT_ID_ATTRIBUTE = OutboxMessage.EVENT_ID_HEADER;

    private SqsDeliveries() {}

    /**
     * @param attributes     string message attributes
     * @param receiveCount   {@code ApproximateReceiveCount}, null when absent
     * @throws InvalidDeliveryException when the event id attribute is missing or invalid
     */
    static Delivery delivery(
            String eventIdAttribute,
            String sqsMessageId,
            String body,
            Map<String, String> attributes,
            String receiveCount,
            String source) {
        String eventId = attributes.get(eventIdAttribute);
        if (eventId == null) {
            throw new InvalidDeliveryException("SQS message " + sqsMessageId + " from " + source
                    + " has no message attribute '" + eventIdAttribute + "' with the producer's event id; "
                    + "publish with SqsPublisher or set that attribute");
        }
        int attempt = parseAttempt(receiveCount);
        Map<String, String> headers = new HashMap<>(attributes);
        headers.put("sqs-message-id", sqsMessageId);
        return Delivery.builder(eventId)
                .payload(body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8))
                .headers(headers)
                .attempt(attempt)
                .redelivered(attempt > 1)
                .source(source)
                .build();
    }

    static int parseAttempt(String receiveCount) {
        if (receiveCount == null) {
            return 1;
        }
        try {
            return Math.max(1, Integer.parseInt(receiveCount));
        } catch (NumberFormatException e) {
            return 1;
        }
    }

    static boolean isFifo(String queueUrlOrArn) {
        return queueUrlOrArn != null && queueUrlOrArn.endsWith(".fifo");
    }

    static String queueName(String queueUrlOrArn) {
        int cut = Math.max(queueUrlOrArn.lastIndexOf('/'), queueUrlOrArn.lastIndexOf(':'));
        return queueUrlOrArn.substring(cut + 1);
    }

    /**
     * The stream of a FIFO queue's message group whose position the engine keeps
     * ({@link dev.once.StreamPositions}): the queue as the consumer names it (URL or ARN) and the group, hashed
     * when longer than the column.
     */
    static String stream(String queueUrlOrArn, String group) {
        String stream = "sqs:" + queueUrlOrArn + "#" + group;
        if (stream.length() <= StreamPositions.MAX_STREAM_LENGTH) {
            return stream;
        }
        try {
            return "sqs-sha256:"
                    + HexFormat.of()
                            .formatHex(MessageDigest.getInstance("SHA-256")
                                    .digest(stream.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-256", e);
        }
    }

    /**
     * A FIFO message's {@code SequenceNumber}, its position in its group.
     *
     * @throws InvalidDeliveryException when it is missing or not a number (not a FIFO queue's message)
     */
    static BigInteger sequenceNumber(String sqsMessageId, String sequenceNumber) {
        try {
            return new BigInteger(Objects.requireNonNull(sequenceNumber));
        } catch (NullPointerException | NumberFormatException e) {
            throw new InvalidDeliveryException("SQS message " + sqsMessageId + " has SequenceNumber '" + sequenceNumber
                    + "': a FIFO queue's message has a decimal sequence number");
        }
    }
}
