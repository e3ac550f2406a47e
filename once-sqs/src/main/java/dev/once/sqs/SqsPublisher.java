package dev.once.sqs;

import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;
import software.amazon.awssdk.awscore.exception.AwsServiceException;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.BatchRequestTooLongException;
import software.amazon.awssdk.services.sqs.model.BatchResultErrorEntry;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.QueueDoesNotExistException;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchRequestEntry;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchResponse;
import software.amazon.awssdk.services.sqs.model.SendMessageBatchResultEntry;
import software.amazon.awssdk.services.sqs.model.SendMessageRequest;
import software.amazon.awssdk.services.sqs.model.SendMessageResponse;

/**
 * The outbox {@link Publisher} for SQS: sends a row to the queue named by its destination (a queue
 * URL, or a queue name resolved once with {@code GetQueueUrl}), with every row header as a string
 * message attribute, so the event id arrives where {@link SqsConsumer} reads it
 * ({@value OutboxMessage#EVENT_ID_HEADER}).
 *
 * <pre>{@code
 * OutboxRelay relay = OutboxRelay.builder().dataSource(ds).publisher(new SqsPublisher(sqs)).build();
 * }</pre>
 *
 * <p><b>Deduplication.</b> On a FIFO queue ({@code .fifo}) the {@code MessageDeduplicationId} is
 * the row's idempotency key (the event id unless the handler gave one), so a relay that re-sends
 * after a crash within SQS's five-minute deduplication interval produces no second message; the
 * {@code MessageGroupId} is the row's ordering key, or its event id when it has none. Outside the
 * interval, or on a standard queue, a re-send is a second message that the consumer's inbox absorbs.
 *
 * <p><b>Receipt.</b> Status: SQS's HTTP status (200). Body: {@code messageId=<id>}, followed by
 * {@code  sequenceNumber=<n>} on a FIFO queue.
 *
 * <p><b>Failure contract</b> (a {@link PublishFailure}, with SQS's status and error code where SQS
 * answered). Permanent: the queue does not
 * exist, the body is not UTF-8 text (SQS bodies are text), more than ten headers (SQS allows ten
 * message attributes), and any other 4xx SQS answers, such as a body over the queue's maximum
 * message size or characters SQS refuses. Retryable: a timeout, a connection failure, throttling,
 * a 5xx, and 401/403 (credentials and permissions can be fixed without changing the message).
 *
 * <p>Thread-safe when the client is (the AWS SDK clients are).
 */
public final class SqsPublisher implements Publisher {

    /** Message attributes SQS accepts per message, the event id included. */
    public static final int MAX_ATTRIBUTES = 10;

    private static final Pattern SQS_ID = Pattern.compile("[\\p{Alnum}\\p{Punct}]{1,128}");

    private final SqsClient client;
    private final Map<String, String> queueUrls = new ConcurrentHashMap<>();

    public SqsPublisher(SqsClient client) {
        this.client = Objects.requireNonNull(client, "client");
    }

    /**
     * Sends one outbox row and returns once SQS has stored it.
     *
     * @return SQS's status and {@code messageId=… [sequenceNumber=…]}
     * @throws PublishFailure SQS refused it: permanent for a missing queue or an invalid message,
     *                        and when the row cannot be an SQS message (body not UTF-8, too many
     *                        headers); retryable for throttling, 5xx and 401/403, and when SQS could
     *                        not be reached or did not answer in time
     */
    @Override
    public Receipt publish(OutboxMessage message) {
        String eventId = message.eventId();
        Map<String, MessageAttributeValue> attributes = attributes(message);
        String body = utf8(message);
        try {
            String url = queueUrl(message.destination());
            SendMessageRequest.Builder request =
                    SendMessageRequest.builder().queueUrl(url).messageBody(body).messageAttributes(attributes);
            if (SqsDeliveries.isFifo(url)) {
                request.messageDeduplicationId(sqsId(message.idempotencyKey()))
                        .messageGroupId(sqsId(message.key() != null ? message.key() : eventId));
            }
            SendMessageResponse response = client.sendMessage(request.build());
            return receipt(response.sdkHttpResponse().statusCode(), response.messageId(), response.sequenceNumber());
        } catch (AwsServiceException e) {
            throw failure(message, e);
        } catch (SdkClientException e) {
            throw unanswered(message, e);
        }
    }

    /**
     * Sends the rows with {@code SendMessageBatch}, up to ten of one standard queue per request
     * (rows for a FIFO queue go one {@code SendMessage} each, as {@link #publish}), and returns
     * each row's outcome: SQS answers per entry, so one refused entry fails alone (permanent when SQS
     * blames the message, retryable otherwise). A request SQS refuses as a whole (too long, the
     * queue missing) is failed for its entries as {@link #publish} would fail each; a request too
     * long for one batch is sent message by message.
     */
    @Override
    public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
        List<CompletionStage<Receipt>> results = new ArrayList<>(messages.size());
        Map<String, List<Integer>> byQueue = new LinkedHashMap<>();
        for (int i = 0; i < messages.size(); i++) {
            results.add(null);
            byQueue.computeIfAbsent(messages.get(i).destination(), q -> new ArrayList<>())
                    .add(i);
        }
        for (List<Integer> queue : byQueue.values()) {
            for (int from = 0; from < queue.size(); from += MAX_BATCH) {
                List<Integer> chunk = queue.subList(from, Math.min(queue.size(), from + MAX_BATCH));
                sendBatch(messages, chunk, results);
            }
        }
        return results;
    }

    /** Entries SQS takes in one {@code SendMessageBatch}. */
    static final int MAX_BATCH = 10;

    private void sendBatch(List<OutboxMessage> messages, List<Integer> chunk, List<CompletionStage<Receipt>> results) {
        List<SendMessageBatchRequestEntry> entries = new ArrayList<>(chunk.size());
        String url;
        try {
            url = queueUrl(messages.get(chunk.get(0)).destination());
        } catch (AwsServiceException e) {
            chunk.forEach(i -> results.set(i, CompletableFuture.failedFuture(failure(messages.get(i), e))));
            return;
        } catch (SdkClientException e) {
            chunk.forEach(i -> results.set(i, CompletableFuture.failedFuture(unanswered(messages.get(i), e))));
            return;
        }
        if (SqsDeliveries.isFifo(url)) {
            // One SendMessage per row on a FIFO queue: its answer carries the sequence number the
            // receipt records, which a batch answer may lack (ElasticMQ's does).
            chunk.forEach(i -> results.set(i, one(messages.get(i))));
            return;
        }
        for (int i : chunk) {
            OutboxMessage m = messages.get(i);
            try {
                SendMessageBatchRequestEntry.Builder e = SendMessageBatchRequestEntry.builder()
                        .id(Integer.toString(i))
                        .messageBody(utf8(m))
                        .messageAttributes(attributes(m));
                entries.add(e.build());
            } catch (PublishFailure f) {
                results.set(i, CompletableFuture.failedFuture(f));
            }
        }
        if (entries.isEmpty()) {
            return;
        }
        SendMessageBatchResponse response;
        try {
            response = client.sendMessageBatch(r -> r.queueUrl(url).entries(entries));
        } catch (BatchRequestTooLongException e) {
            for (SendMessageBatchRequestEntry entry : entries) {
                int i = Integer.parseInt(entry.id());
                results.set(i, one(messages.get(i)));
            }
            return;
        } catch (AwsServiceException e) {
            entries.forEach(entry -> {
                int i = Integer.parseInt(entry.id());
                results.set(i, CompletableFuture.failedFuture(failure(messages.get(i), e)));
            });
            return;
        } catch (SdkClientException e) {
            entries.forEach(entry -> {
                int i = Integer.parseInt(entry.id());
                results.set(i, CompletableFuture.failedFuture(unanswered(messages.get(i), e)));
            });
            return;
        }
        int status = response.sdkHttpResponse().statusCode();
        for (SendMessageBatchResultEntry ok : response.successful()) {
            results.set(
                    Integer.parseInt(ok.id()),
                    CompletableFuture.completedFuture(receipt(status, ok.messageId(), ok.sequenceNumber())));
        }
        for (BatchResultErrorEntry failed : response.failed()) {
            int i = Integer.parseInt(failed.id());
            OutboxMessage m = messages.get(i);
            boolean retryable = !Boolean.TRUE.equals(failed.senderFault())
                    || (failed.code() != null && failed.code().contains("Throttl"));
            results.set(
                    i,
                    CompletableFuture.failedFuture(new PublishFailure(
                            "SQS refused row " + m.id() + " (event " + m.eventId() + ") for queue '" + m.destination()
                                    + "' with " + failed.code() + ": " + failed.message()
                                    + (retryable ? "; the relay tries again" : "; sending it again cannot succeed"),
                            retryable,
                            new Receipt(status, failed.code() + ": " + failed.message()))));
        }
        for (SendMessageBatchRequestEntry entry : entries) {
            int i = Integer.parseInt(entry.id());
            if (results.get(i) == null) {
                results.set(
                        i,
                        CompletableFuture.failedFuture(PublishFailure.retryable(
                                "SQS's batch answer named no outcome for row "
                                        + messages.get(i).id(),
                                Receipt.NONE,
                                null)));
            }
        }
    }

    private CompletionStage<Receipt> one(OutboxMessage m) {
        try {
            return CompletableFuture.completedFuture(publish(m));
        } catch (PublishFailure f) {
            return CompletableFuture.failedFuture(f);
        }
    }

    private static Receipt receipt(int status, String messageId, String sequenceNumber) {
        return new Receipt(
                status, "messageId=" + messageId + (sequenceNumber == null ? "" : " sequenceNumber=" + sequenceNumber));
    }

    private static Map<String, MessageAttributeValue> attributes(OutboxMessage message) {
        Map<String, MessageAttributeValue> attributes = new LinkedHashMap<>();
        attributes.put(OutboxMessage.EVENT_ID_HEADER, text(message.eventId()));
        message.headers().forEach((k, v) -> attributes.putIfAbsent(k, text(v)));
        if (attributes.size() > MAX_ATTRIBUTES) {
            throw PublishFailure.permanent(
                    "SQS allows " + MAX_ATTRIBUTES + " message attributes, but row " + message.id() + " (event "
                            + message.eventId() + ") has " + attributes.size() + " (headers " + attributes.keySet()
                            + "); enqueue it with fewer headers",
                    Receipt.NONE,
                    null);
        }
        return attributes;
    }

    private static PublishFailure unanswered(OutboxMessage message, SdkClientException e) {
        return PublishFailure.retryable(
                "sending row " + message.id() + " (event " + message.eventId() + ") to SQS queue '"
                        + message.destination() + "' failed without an answer from SQS: " + e.getMessage(),
                Receipt.NONE,
                e);
    }

    private static PublishFailure failure(OutboxMessage message, AwsServiceException e) {
        int status = e.statusCode();
        String code = e.awsErrorDetails() == null ? null : e.awsErrorDetails().errorCode();
        String detail = e.awsErrorDetails() == null
                ? e.getMessage()
                : e.awsErrorDetails().errorMessage();
        boolean retryable = !(e instanceof QueueDoesNotExistException)
                && (status >= 500
                        || status == 401
                        || status == 403
                        || e.isThrottlingException()
                        || e.isClockSkewException()
                        || e.retryable()
                        || (code != null && code.contains("Throttl")));
        return new PublishFailure(
                "SQS refused row " + message.id() + " (event " + message.eventId()
                        + ") for queue '" + message.destination() + "' with " + status + " " + code + ": " + detail
                        + (retryable ? "; the relay tries again" : "; sending it again cannot succeed"),
                retryable,
                new Receipt(status, code + ": " + detail),
                e);
    }

    // SQS bodies are text: decoding strictly refuses a binary payload instead of sending a mangled copy.
    private static String utf8(OutboxMessage message) {
        try {
            return StandardCharsets.UTF_8
                    .newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(message.payload()))
                    .toString();
        } catch (CharacterCodingException e) {
            throw PublishFailure.permanent(
                    "SQS message bodies are text, but the payload of row " + message.id()
                            + " (event " + message.eventId()
                            + ") is not valid UTF-8; encode binary payloads (Base64) before"
                            + " enqueueing them",
                    Receipt.NONE,
                    e);
        }
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
            return HexFormat.of()
                    .formatHex(MessageDigest.getInstance("SHA-256").digest(value.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every JVM", e);
        }
    }

    private String queueUrl(String queue) {
        if (queue.startsWith("https://") || queue.startsWith("http://")) {
            return queue;
        }
        return queueUrls.computeIfAbsent(
                queue, q -> client.getQueueUrl(r -> r.queueName(q)).queueUrl());
    }

    private static MessageAttributeValue text(String value) {
        return MessageAttributeValue.builder()
                .dataType("String")
                .stringValue(value)
                .build();
    }
}
