package dev.once.sqs;

import dev.once.Delivery;
import dev.once.InvalidDeliveryException;
import dev.once.outbox.OutboxMessage;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

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
}
