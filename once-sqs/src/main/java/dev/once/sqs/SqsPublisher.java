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
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
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
 * {@code  sequenceNumber=<n>} on a FIFO queue (where SQS answers with one: ElasticMQ's answer to
 * {@code SendMessageBatch} has none).
 *
 * <p><b>Failure contract</b> (a {@link PublishFailure}, with SQS's status and error code where SQS
 * answered). Permanent: the queue does not
 * exist, the body is not UTF-8 text (SQS bodies are text), more than ten headers (SQS allows ten
 * message attributes), and any other 4xx SQS answers, such as a body over the queue's maximum
 * message size or characters SQS refuses. Retryable: a timeout, a connection failure, throttling,
 * a 5xx, and 401/403 (credentials and permissions can be fixed without changing the message).
 *
 * <p>Thread-safe when the client is (the AWS SDK clients are). {@link #publishAll} sends its
 * requests on up to {@value #CONCURRENT_REQUESTS} daemon threads of its own (unless configured),
 * which end when idle.
 */
public final class SqsPublisher implements Publisher {

    /** Message attributes SQS accepts per message, the event id included. */
    public static final int MAX_ATTRIBUTES = 10;

    /** Entries SQS takes in one {@code SendMessageBatch}. */
    public static final int MAX_BATCH = 10;
    /** Bytes SQS takes in one {@code SendMessageBatch}: bodies and attributes (names, types, values) together. */
    public static final int MAX_BATCH_BYTES = 256 * 1024;
    /**
     * {@code SendMessageBatch} requests one publisher keeps in flight, over all the relays it serves,
     * unless configured. A request carries at most {@value #MAX_BATCH} messages, so a publisher
     * sends at most this many times ten messages per request latency: at SQS's 10-30 ms, 16 (the
     * earlier default) capped it at 5,000-16,000 messages/s, below the relay's 20,000. 40 is the
     * relay suite's fastest bare loop on a quiet machine (29,812 messages/s against ElasticMQ,
     * 2026-12-04); the threads block on the network, so more of them cost memory, not CPU.
     */
    public static final int CONCURRENT_REQUESTS = 40;

    private static final Pattern SQS_ID = Pattern.compile("[\\p{Alnum}\\p{Punct}]{1,128}");

    private final SqsClient client;
    private final Map<String, String> queueUrls = new ConcurrentHashMap<>();
    // Sends publishAll's requests: SqsClient blocks per request, and one at a time a relay batch of
    // a thousand rows would wait for a hundred round trips in a row. Daemon threads that end when
    // idle, so the publisher needs no closing.
    private final ThreadPoolExecutor requests;

    public SqsPublisher(SqsClient client) {
        this(client, CONCURRENT_REQUESTS);
    }

    /**
     * @param concurrentRequests {@code SendMessageBatch} requests {@link #publishAll} keeps in flight
     *                           over all the relays sharing this publisher (its threads), at least 1
     * @throws IllegalArgumentException if {@code concurrentRequests} is below 1
     */
    public SqsPublisher(SqsClient client, int concurrentRequests) {
        this.client = Objects.requireNonNull(client, "client");
        if (concurrentRequests < 1) {
            throw new IllegalArgumentException("concurrentRequests must be at least 1 (SendMessageBatch requests in"
                    + " flight), but was " + concurrentRequests);
        }
        AtomicInteger threads = new AtomicInteger();
        this.requests = new ThreadPoolExecutor(
                concurrentRequests, concurrentRequests, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
                    Thread t = new Thread(r, "once-sqs-publisher-" + threads.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                });
        requests.allowCoreThreadTimeOut(true);
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
        Map<String, MessageAttributeValue> attributes = attributes(message);
        String body = utf8(message, message.payload());
        try {
            String url = queueUrl(message.destination());
            SendMessageRequest.Builder request =
                    SendMessageRequest.builder().queueUrl(url).messageBody(body).messageAttributes(attributes);
            if (SqsDeliveries.isFifo(url)) {
                request.messageDeduplicationId(deduplicationId(message)).messageGroupId(groupId(message));
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
     * Sends the rows with {@code SendMessageBatch}, up to {@value #MAX_BATCH} of one queue and at most
     * {@value #MAX_BATCH_BYTES} bytes per request (SQS's limits; a row larger than that goes alone
     * with {@code SendMessage}), up to the publisher's concurrent requests in flight, and returns
     * each row's stage. On a FIFO queue each entry carries the deduplication and group ids
     * {@link #publish} sets. SQS answers per entry, so one refused entry fails alone (permanent when
     * SQS blames the message, retryable otherwise). A request SQS refuses as a whole (the queue
     * missing, unreachable) fails its entries as {@link #publish} would fail each; one SQS finds too
     * long is sent message by message.
     */
    @Override
    public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
        List<CompletionStage<Receipt>> results = new ArrayList<>(messages.size());
        Map<String, List<Entry>> byQueue = new LinkedHashMap<>();
        for (int i = 0; i < messages.size(); i++) {
            OutboxMessage m = messages.get(i);
            CompletableFuture<Receipt> result = new CompletableFuture<>();
            results.add(result);
            try {
                Entry e = entry(m, result);
                byQueue.computeIfAbsent(m.destination(), q -> new ArrayList<>()).add(e);
            } catch (PublishFailure f) {
                result.completeExceptionally(f);
            }
        }
        List<Runnable> sends = new ArrayList<>();
        byQueue.forEach((queue, entries) -> {
            List<Entry> request = new ArrayList<>(Math.min(MAX_BATCH, entries.size()));
            long bytes = 0;
            for (Entry e : entries) {
                if (e.size() > MAX_BATCH_BYTES) {
                    sends.add(() -> one(e));
                    continue;
                }
                if (request.size() == MAX_BATCH || bytes + e.size() > MAX_BATCH_BYTES) {
                    List<Entry> full = request;
                    sends.add(() -> sendBatch(queue, full));
                    request = new ArrayList<>(MAX_BATCH);
                    bytes = 0;
                }
                request.add(e);
                bytes += e.size();
            }
            if (!request.isEmpty()) {
                List<Entry> last = request;
                sends.add(() -> sendBatch(queue, last));
            }
        });
        // The caller sends the first request itself: it would only wait otherwise, and a batch of
        // one request (the steady trickle of a relay woken by each commit) needs no thread handoff.
        for (int i = 1; i < sends.size(); i++) {
            requests.execute(sends.get(i));
        }
        if (!sends.isEmpty()) {
            sends.get(0).run();
        }
        return results;
    }

    /**
     * A row in a batch: the message, its body and attributes as SQS gets them, what SQS counts of them
     * against a request's bytes, and the stage the relay waits on.
     */
    private record Entry(
            OutboxMessage row,
            String body,
            Map<String, MessageAttributeValue> attributes,
            long size,
            CompletableFuture<Receipt> result) {}

    /**
     * The row as SendMessage would send it (same body and attributes): what can never be an SQS message
     * fails here, before any request. What SQS counts against a request's size: the body and each
     * attribute's name, type and value, in UTF-8 bytes (the body's are the payload's, which it decodes).
     */
    private static Entry entry(OutboxMessage m, CompletableFuture<Receipt> result) {
        byte[] payload = m.payload();
        String body = utf8(m, payload);
        Map<String, MessageAttributeValue> attributes = attributes(m);
        long size = payload.length;
        for (Map.Entry<String, MessageAttributeValue> a : attributes.entrySet()) {
            size += utf8Length(a.getKey())
                    + utf8Length(a.getValue().dataType())
                    + utf8Length(a.getValue().stringValue());
        }
        return new Entry(m, body, attributes, size, result);
    }

    /**
     * The UTF-8 length of {@code s}, counted rather than encoded (this ran four encodings per row). A
     * lone surrogate counts 2 where the encoder writes one '?': never less than SQS counts.
     */
    static long utf8Length(String s) {
        if (s == null) {
            return 0;
        }
        long n = s.length();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c >= 0x80) {
                n += c < 0x800 || Character.isSurrogate(c) ? 1 : 2;
            }
        }
        return n;
    }

    // An entry's id is its place in its request: the same ten strings for every request, and SQS's answer
    // per entry found by that place instead of through a map of the request's ids.
    private static final String[] PLACES = new String[MAX_BATCH];

    static {
        for (int i = 0; i < MAX_BATCH; i++) {
            PLACES[i] = Integer.toString(i);
        }
    }

    private static SendMessageBatchRequestEntry requestEntry(Entry x, int place) {
        SendMessageBatchRequestEntry.Builder e = SendMessageBatchRequestEntry.builder()
                .id(PLACES[place])
                .messageBody(x.body())
                .messageAttributes(x.attributes());
        if (SqsDeliveries.isFifo(x.row().destination())) {
            e.messageDeduplicationId(deduplicationId(x.row())).messageGroupId(groupId(x.row()));
        }
        return e.build();
    }

    /** The place an entry id of this publisher's names, or -1 for an id it never sent. */
    private static int place(String id) {
        return id != null && id.length() == 1 && id.charAt(0) >= '0' && id.charAt(0) < '0' + MAX_BATCH
                ? id.charAt(0) - '0'
                : -1;
    }

    private void sendBatch(String queue, List<Entry> request) {
        String url;
        try {
            url = queueUrl(queue);
        } catch (AwsServiceException e) {
            request.forEach(x -> x.result().completeExceptionally(failure(x.row(), e)));
            return;
        } catch (SdkClientException e) {
            request.forEach(x -> x.result().completeExceptionally(unanswered(x.row(), e)));
            return;
        } catch (RuntimeException e) {
            request.forEach(x -> x.result().completeExceptionally(e));
            return;
        }
        List<SendMessageBatchRequestEntry> entries = new ArrayList<>(request.size());
        for (int i = 0; i < request.size(); i++) {
            entries.add(requestEntry(request.get(i), i));
        }
        SendMessageBatchResponse response;
        try {
            response = client.sendMessageBatch(r -> r.queueUrl(url).entries(entries));
        } catch (BatchRequestTooLongException e) {
            request.forEach(this::one);
            return;
        } catch (AwsServiceException e) {
            request.forEach(x -> x.result().completeExceptionally(failure(x.row(), e)));
            return;
        } catch (SdkClientException e) {
            request.forEach(x -> x.result().completeExceptionally(unanswered(x.row(), e)));
            return;
        } catch (RuntimeException e) {
            request.forEach(x -> x.result().completeExceptionally(e));
            return;
        }
        // Each entry settled once, by the first answer naming its place
        Entry[] open = request.toArray(new Entry[0]);
        int status = response.sdkHttpResponse().statusCode();
        for (SendMessageBatchResultEntry ok : response.successful()) {
            Entry x = settle(open, ok.id());
            if (x != null) {
                x.result().complete(receipt(status, ok.messageId(), ok.sequenceNumber()));
            }
        }
        for (BatchResultErrorEntry failed : response.failed()) {
            Entry x = settle(open, failed.id());
            if (x == null) {
                continue;
            }
            OutboxMessage m = x.row();
            boolean retryable = !Boolean.TRUE.equals(failed.senderFault())
                    || (failed.code() != null && failed.code().contains("Throttl"));
            x.result()
                    .completeExceptionally(new PublishFailure(
                            "SQS refused row " + m.id() + " (event " + m.eventId() + ") for queue '" + m.destination()
                                    + "' with " + failed.code() + ": " + failed.message()
                                    + (retryable ? "; the relay tries again" : "; sending it again cannot succeed"),
                            retryable,
                            new Receipt(status, failed.code() + ": " + failed.message())));
        }
        for (Entry x : open) {
            if (x != null) {
                x.result()
                        .completeExceptionally(PublishFailure.retryable(
                                "SQS's batch answer named no outcome for row "
                                        + x.row().id() + " (event " + x.row().eventId() + "); the relay tries again",
                                Receipt.NONE,
                                null));
            }
        }
    }

    /** The entry of {@code open} at the place {@code id} names, taken out of it; null if none is open there. */
    private static Entry settle(Entry[] open, String id) {
        int place = place(id);
        if (place < 0 || place >= open.length) {
            return null;
        }
        Entry x = open[place];
        open[place] = null;
        return x;
    }

    private void one(Entry e) {
        try {
            e.result().complete(publish(e.row()));
        } catch (RuntimeException f) {
            e.result().completeExceptionally(f);
        }
    }

    private static Receipt receipt(int status, String messageId, String sequenceNumber) {
        return new Receipt(
                status, "messageId=" + messageId + (sequenceNumber == null ? "" : " sequenceNumber=" + sequenceNumber));
    }

    private static Map<String, MessageAttributeValue> attributes(OutboxMessage message) {
        if (message.headers().isEmpty()) {
            return Map.of(OutboxMessage.EVENT_ID_HEADER, text(message.eventId())); // the SDK copies it anyway
        }
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

    // SQS bodies are text: decoding strictly refuses a binary payload instead of sending a mangled copy. An
    // ASCII payload (most JSON) is text as it is: no decoder made for it.
    private static String utf8(OutboxMessage message, byte[] payload) {
        boolean ascii = true;
        for (byte b : payload) {
            if (b < 0) {
                ascii = false;
                break;
            }
        }
        if (ascii) {
            return new String(payload, StandardCharsets.US_ASCII);
        }
        try {
            return StandardCharsets.UTF_8
                    .newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(payload))
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

    private static String deduplicationId(OutboxMessage m) {
        return sqsId(m.idempotencyKey());
    }

    // The row's key keeps its rows in order; a row without one is a group of its own.
    private static String groupId(OutboxMessage m) {
        return sqsId(m.key() != null ? m.key() : m.eventId());
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
