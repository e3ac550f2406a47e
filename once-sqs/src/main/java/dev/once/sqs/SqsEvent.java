package dev.once.sqs;

import java.util.List;
import java.util.Map;

/**
 * An SQS event as AWS Lambda hands it to a function, reduced to what {@link SqsLambdaHandler}
 * reads. Field names follow the event's JSON ({@code Records}, {@code messageId},
 * {@code receiptHandle}, {@code body}, {@code attributes}, {@code messageAttributes},
 * {@code eventSourceARN}); map the {@code aws-lambda-java-events} {@code SQSEvent} onto it in
 * one line per field when you use that library. Immutable.
 *
 * @param records the messages of this invocation, in the order SQS gave them
 */
public record SqsEvent(List<Message> records) {

    public SqsEvent {
        records = records == null ? List.of() : List.copyOf(records);
    }

    /**
     * One SQS message of the event.
     *
     * @param attributes        system attributes: {@code ApproximateReceiveCount}, {@code MessageGroupId}, …
     * @param messageAttributes string message attributes by name (their {@code stringValue})
     * @param eventSourceArn    the queue's ARN; a FIFO queue's ends in {@code .fifo}
     */
    public record Message(
            String messageId,
            String receiptHandle,
            String body,
            Map<String, String> attributes,
            Map<String, String> messageAttributes,
            String eventSourceArn) {

        public Message {
            attributes = attributes == null ? Map.of() : Map.copyOf(attributes);
            messageAttributes = messageAttributes == null ? Map.of() : Map.copyOf(messageAttributes);
            eventSourceArn = eventSourceArn == null ? "" : eventSourceArn;
        }
    }
}
