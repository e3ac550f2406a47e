package dev.once.sqs;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.ChangeMessageVisibilityBatchRequestEntry;
import software.amazon.awssdk.services.sqs.model.DeleteMessageBatchRequestEntry;
import software.amazon.awssdk.services.sqs.model.DeleteMessageBatchResponse;
import software.amazon.awssdk.services.sqs.model.Message;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeName;
import software.amazon.awssdk.services.sqs.model.ReceiveMessageRequest;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Receives from one SQS queue and runs every message through an {@link IdempotentConsumer}:
 * long-poll receives of up to {@link Builder#maxMessages(int) maxMessages}, several in flight,
 * one database transaction per receive batch, and {@code DeleteMessageBatch} only after the
 * commit, for applied and duplicate messages alike. While a batch is still working, a heartbeat
 * pushes its visibility timeout out ({@code ChangeMessageVisibilityBatch}), so a slow batch does
 * not become a redelivery; a redelivery that happens anyway (crash before delete, expired
 * visibility, a delete that failed) is absorbed by the inbox as a duplicate.
 *
 * <p>The event id is read from a string message attribute ({@value SqsDeliveries#DEFAULT_EVENT_ID_ATTRIBUTE}
 * by default, as {@link SqsPublisher} writes it), {@code ApproximateReceiveCount} is reported as
 * the attempt. Retryable failures are left in the queue: the visibility timeout is the backoff
 * and the queue's redrive policy the limit. Permanent failures go to the
 * {@linkplain Builder#deadLetterQueueUrl(String) dead-letter queue} when one is set, and are
 * then deleted; without one they are left to the queue's redrive policy.
 *
 * <p>FIFO queues ({@code .fifo}): messages of one message group are processed in order, one
 * transaction each; the first that does not succeed stops its group, and the later ones of that
 * group are released for redelivery behind it.
 *
 * <p>Thread-safe; {@link #start()} once, {@link #close()} stops receiving, lets batches in
 * flight finish and delete, and returns.
 */
public final class SqsConsumer implements AutoCloseable {

    /** Messages per receive, SQS's maximum. */
    public static final int DEFAULT_MAX_MESSAGES = 10;
    /** Receives in flight at once. */
    public static final int DEFAULT_CONCURRENCY = 2;
    /** Long-poll wait per receive, SQS's maximum. */
    public static final Duration DEFAULT_WAIT_TIME = Duration.ofSeconds(20);
    /** Visibility timeout asked for on receive and renewed by the heartbeat. */
    public static final Duration DEFAULT_VISIBILITY_TIMEOUT = Duration.ofSeconds(30);

    private static final Logger log = LoggerFactory.getLogger(SqsConsumer.class);
    private static final AtomicInteger INSTANCES = new AtomicInteger();

    private final SqsClient client;
    private final String queueUrl;
    private final IdempotentConsumer consumer;
    private final String eventIdAttribute;
    private final int maxMessages;
    private final int concurrency;
    private final Duration waitTime;
    private final Duration visibilityTimeout;
    private final boolean heartbeat;
    private final String deadLetterQueueUrl;
    private final boolean fifo;
    private final String source;
    private final ExecutorService receivers;
    private final ScheduledExecutorService heartbeats;
    private final CountDownLatch stopped = new CountDownLatch(1);
    private volatile boolean running;

    private SqsConsumer(Builder b) {
        this.client = b.client;
        this.queueUrl = b.queueUrl;
        this.consumer = b.consumer;
        this.eventIdAttribute = b.eventIdAttribute;
        this.maxMessages = b.maxMessages;
        this.concurrency = b.concurrency;
        this.waitTime = b.waitTime;
        this.visibilityTimeout = b.visibilityTimeout;
        this.heartbeat = b.heartbeat;
        this.deadLetterQueueUrl = b.deadLetterQueueUrl;
        this.fifo = SqsDeliveries.isFifo(queueUrl);
        this.source = "sqs:" + SqsDeliveries.queueName(queueUrl);
        int n = INSTANCES.incrementAndGet();
        AtomicInteger threads = new AtomicInteger();
        this.receivers = Executors.newFixedThreadPool(concurrency, r -> {
            Thread t = new Thread(r, "once-sqs-" + n + "-receive-" + threads.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        this.heartbeats = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "once-sqs-" + n + "-heartbeat");
            t.setDaemon(true);
            return t;
        });
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Starts the receive loops; returns this. */
    public synchronized SqsConsumer start() {
        if (running) {
            throw new IllegalStateException("SqsConsumer on " + queueUrl + " is already started");
        }
        running = true;
        for (int i = 0; i < concurrency; i++) {
            receivers.execute(this::receiveLoop);
        }
        return this;
    }

    private void receiveLoop() {
        ReceiveMessageRequest request = ReceiveMessageRequest.builder().queueUrl(queueUrl)
                .maxNumberOfMessages(maxMessages).waitTimeSeconds((int) waitTime.toSeconds())
                .visibilityTimeout((int) visibilityTimeout.toSeconds())
                .messageSystemAttributeNames(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT,
                        MessageSystemAttributeName.MESSAGE_GROUP_ID)
                .messageAttributeNames("All").build();
        int failures = 0;
        while (running) {
            try {
                List<Message> messages = client.receiveMessage(request).messages();
                failures = 0;
                if (!messages.isEmpty()) {
                    handle(messages);
                }
            } catch (RuntimeException e) {
                // an SdkException, or the client closed under us: back off, and stop at once on close()
                if (!running) {
                    return;
                }
                failures++;
                log.warn("receive from {} failed ({} in a row), retrying: {}", queueUrl, failures, e.toString());
                if (!pause(Duration.ofMillis(Math.min(10_000, 200L << Math.min(failures, 6))))) {
                    return;
                }
            }
        }
    }

    private void handle(List<Message> messages) {
        ScheduledFuture<?> beat = null;
        if (heartbeat) {
            long every = Math.max(1, visibilityTimeout.toMillis() / 3);
            beat = heartbeats.scheduleAtFixedRate(() -> extend(messages), every, every, TimeUnit.MILLISECONDS);
        }
        Map<Message, Outcome> outcomes;
        try {
            outcomes = fifo ? processInGroupOrder(messages) : processBatch(messages);
        } finally {
            if (beat != null) {
                beat.cancel(false);
            }
        }
        settle(outcomes);
    }

    /** One transaction for the whole receive batch; messages without a valid event id fail alone. */
    private Map<Message, Outcome> processBatch(List<Message> messages) {
        Map<Message, Outcome> outcomes = new LinkedHashMap<>();
        List<Message> valid = new ArrayList<>();
        List<Delivery> deliveries = new ArrayList<>();
        for (Message m : messages) {
            try {
                deliveries.add(delivery(m));
                valid.add(m);
            } catch (InvalidDeliveryException e) {
                outcomes.put(m, new Outcome(m.messageId(), Status.FAILED_PERMANENT, e));
            }
        }
        if (!deliveries.isEmpty()) {
            List<Outcome> results = consumer.processBatch(deliveries);
            for (int i = 0; i < valid.size(); i++) {
                outcomes.put(valid.get(i), results.get(i));
            }
        }
        return outcomes;
    }

    /**
     * FIFO: each group in order, one transaction per message. The first message of a group that
     * is not acknowledged stops the group; its successors get no outcome and are released.
     */
    private Map<Message, Outcome> processInGroupOrder(List<Message> messages) {
        Map<String, List<Message>> groups = new LinkedHashMap<>();
        for (Message m : messages) {
            groups.computeIfAbsent(m.attributes().getOrDefault(MessageSystemAttributeName.MESSAGE_GROUP_ID, ""),
                    g -> new ArrayList<>()).add(m);
        }
        Map<Message, Outcome> outcomes = new LinkedHashMap<>();
        List<Message> released = new ArrayList<>();
        for (List<Message> group : groups.values()) {
            boolean stopped = false;
            for (Message m : group) {
                if (stopped) {
                    released.add(m);
                    continue;
                }
                Outcome o;
                try {
                    o = consumer.process(delivery(m));
                } catch (InvalidDeliveryException e) {
                    o = new Outcome(m.messageId(), Status.FAILED_PERMANENT, e);
                }
                outcomes.put(m, o);
                boolean deadLettered = o.status() == Status.FAILED_PERMANENT && deadLetterQueueUrl != null;
                stopped = !o.shouldAcknowledge() && !deadLettered;
            }
        }
        changeVisibility(released, 0);
        return outcomes;
    }

    private Delivery delivery(Message m) {
        Map<String, String> attributes = new HashMap<>();
        m.messageAttributes().forEach((k, v) -> {
            if (v.stringValue() != null) {
                attributes.put(k, v.stringValue());
            }
        });
        return SqsDeliveries.delivery(eventIdAttribute, m.messageId(), m.body(), attributes,
                m.attributes().get(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT), source);
    }

    private void settle(Map<Message, Outcome> outcomes) {
        List<Message> delete = new ArrayList<>();
        for (Map.Entry<Message, Outcome> e : outcomes.entrySet()) {
            Outcome o = e.getValue();
            if (o.shouldAcknowledge()) {
                delete.add(e.getKey());
            } else if (o.status() == Status.FAILED_PERMANENT) {
                if (deadLetterQueueUrl != null && deadLetter(e.getKey(), o)) {
                    delete.add(e.getKey());
                } else {
                    log.warn("message {} ({}) failed permanently and is left to the redrive policy of {}: {}",
                            e.getKey().messageId(), o.eventId(), queueUrl, String.valueOf(o.failure()));
                }
            }
            // retryable and in progress: left alone; the visibility timeout is the backoff
        }
        delete(delete);
    }

    private boolean deadLetter(Message m, Outcome o) {
        try {
            Map<String, MessageAttributeValue> attributes = new HashMap<>(m.messageAttributes());
            client.sendMessage(r -> r.queueUrl(deadLetterQueueUrl).messageBody(m.body())
                    .messageAttributes(attributes));
            log.warn("message {} ({}) failed permanently, moved to {}: {}", m.messageId(), o.eventId(),
                    deadLetterQueueUrl, String.valueOf(o.failure()));
            return true;
        } catch (RuntimeException e) {
            log.warn("could not dead-letter message {} to {}, leaving it in {}: {}", m.messageId(),
                    deadLetterQueueUrl, queueUrl, e.toString());
            return false;
        }
    }

    private void delete(List<Message> messages) {
        if (messages.isEmpty()) {
            return;
        }
        List<DeleteMessageBatchRequestEntry> entries = new ArrayList<>();
        for (int i = 0; i < messages.size(); i++) {
            entries.add(DeleteMessageBatchRequestEntry.builder().id(Integer.toString(i))
                    .receiptHandle(messages.get(i).receiptHandle()).build());
        }
        try {
            for (int from = 0; from < entries.size(); from += 10) {
                List<DeleteMessageBatchRequestEntry> chunk = entries.subList(from, Math.min(from + 10, entries.size()));
                DeleteMessageBatchResponse response = client.deleteMessageBatch(r -> r.queueUrl(queueUrl).entries(chunk));
                // A failed delete (for example a receipt handle from before a redelivery) is not an
                // error of ours: the message comes back and the inbox absorbs it as a duplicate.
                response.failed().forEach(f -> log.info("delete of a processed message from {} failed ({}: {});"
                        + " it will be redelivered and absorbed", queueUrl, f.code(), f.message()));
            }
        } catch (RuntimeException e) {
            log.warn("delete of {} processed messages from {} failed; they will be redelivered and absorbed: {}",
                    messages.size(), queueUrl, e.toString());
        }
    }

    private void extend(List<Message> messages) {
        changeVisibility(messages, (int) visibilityTimeout.toSeconds());
    }

    private void changeVisibility(List<Message> messages, int seconds) {
        for (int from = 0; from < messages.size(); from += 10) {
            List<ChangeMessageVisibilityBatchRequestEntry> entries = new ArrayList<>();
            for (int i = from; i < Math.min(from + 10, messages.size()); i++) {
                entries.add(ChangeMessageVisibilityBatchRequestEntry.builder().id(Integer.toString(i))
                        .receiptHandle(messages.get(i).receiptHandle()).visibilityTimeout(seconds).build());
            }
            try {
                client.changeMessageVisibilityBatch(r -> r.queueUrl(queueUrl).entries(entries));
            } catch (RuntimeException e) {
                log.warn("could not change the visibility of {} messages in {} to {}s: {}", entries.size(),
                        queueUrl, seconds, e.toString());
            }
        }
    }

    /** Waits out a backoff; returns false when {@link #close()} was called meanwhile. */
    private boolean pause(Duration d) {
        try {
            return !stopped.await(d.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Stops receiving, waits for batches in flight to finish and delete (at most the wait time plus a minute). */
    @Override
    public void close() {
        running = false;
        stopped.countDown();
        receivers.shutdown();
        try {
            if (!receivers.awaitTermination(waitTime.toSeconds() + 60, TimeUnit.SECONDS)) {
                receivers.shutdownNow();
            }
        } catch (InterruptedException e) {
            receivers.shutdownNow();
            Thread.currentThread().interrupt();
        } finally {
            heartbeats.shutdownNow();
        }
    }

    /**
     * Configures an {@link SqsConsumer}. {@code client}, {@code queueUrl} and {@code consumer}
     * are required; setters check their argument at once. Not thread-safe.
     */
    public static final class Builder {
        private SqsClient client;
        private String queueUrl;
        private IdempotentConsumer consumer;
        private String eventIdAttribute = SqsDeliveries.DEFAULT_EVENT_ID_ATTRIBUTE;
        private int maxMessages = DEFAULT_MAX_MESSAGES;
        private int concurrency = DEFAULT_CONCURRENCY;
        private Duration waitTime = DEFAULT_WAIT_TIME;
        private Duration visibilityTimeout = DEFAULT_VISIBILITY_TIMEOUT;
        private boolean heartbeat = true;
        private String deadLetterQueueUrl;

        private Builder() {
        }

        public Builder client(SqsClient client) {
            this.client = Objects.requireNonNull(client, "client");
            return this;
        }

        public Builder queueUrl(String queueUrl) {
            this.queueUrl = Objects.requireNonNull(queueUrl, "queueUrl");
            return this;
        }

        /** The engine each message runs through. */
        public Builder consumer(IdempotentConsumer consumer) {
            this.consumer = Objects.requireNonNull(consumer, "consumer");
            return this;
        }

        /** The string message attribute with the producer's event id; default {@value SqsDeliveries#DEFAULT_EVENT_ID_ATTRIBUTE}. */
        public Builder eventIdAttribute(String eventIdAttribute) {
            Objects.requireNonNull(eventIdAttribute, "eventIdAttribute");
            if (eventIdAttribute.isBlank()) {
                throw new InvalidConfigurationException("eventIdAttribute must not be blank");
            }
            this.eventIdAttribute = eventIdAttribute;
            return this;
        }

        /** Messages per receive and per transaction, 1 to 10; default {@value #DEFAULT_MAX_MESSAGES}. */
        public Builder maxMessages(int maxMessages) {
            if (maxMessages < 1 || maxMessages > 10) {
                throw new InvalidConfigurationException("maxMessages must be between 1 and 10 (SQS's limit per receive),"
                        + " but was " + maxMessages);
            }
            this.maxMessages = maxMessages;
            return this;
        }

        /** Receives in flight at once, 1 to 100; default {@value #DEFAULT_CONCURRENCY}. */
        public Builder concurrency(int concurrency) {
            if (concurrency < 1 || concurrency > 100) {
                throw new InvalidConfigurationException("concurrency must be between 1 and 100, but was " + concurrency);
            }
            this.concurrency = concurrency;
            return this;
        }

        /** Long-poll wait, 0 to 20 whole seconds; default 20 s. */
        public Builder waitTime(Duration waitTime) {
            Objects.requireNonNull(waitTime, "waitTime");
            if (waitTime.isNegative() || waitTime.toSeconds() > 20 || waitTime.toMillis() % 1000 != 0) {
                throw new InvalidConfigurationException("waitTime must be 0 to 20 whole seconds (SQS's long-poll"
                        + " limit), but was " + waitTime);
            }
            this.waitTime = waitTime;
            return this;
        }

        /**
         * Visibility timeout asked for on receive, and the extension each heartbeat gives
         * (every third of it); 1 s to 12 h in whole seconds; default 30 s.
         */
        public Builder visibilityTimeout(Duration visibilityTimeout) {
            Objects.requireNonNull(visibilityTimeout, "visibilityTimeout");
            if (visibilityTimeout.toSeconds() < 1 || visibilityTimeout.toHours() >= 12
                    || visibilityTimeout.toMillis() % 1000 != 0) {
                throw new InvalidConfigurationException("visibilityTimeout must be 1 s to 12 h in whole seconds,"
                        + " but was " + visibilityTimeout);
            }
            this.visibilityTimeout = visibilityTimeout;
            return this;
        }

        /**
         * Whether a batch still working has its visibility extended; default true. Turning it off
         * makes a batch slower than the visibility timeout come back while it runs (absorbed,
         * but wasted work).
         */
        public Builder heartbeat(boolean heartbeat) {
            this.heartbeat = heartbeat;
            return this;
        }

        /** Queue that permanently failed messages are moved to before they are deleted; default none. */
        public Builder deadLetterQueueUrl(String deadLetterQueueUrl) {
            this.deadLetterQueueUrl = Objects.requireNonNull(deadLetterQueueUrl, "deadLetterQueueUrl");
            return this;
        }

        /**
         * @throws InvalidConfigurationException naming what is missing
         */
        public SqsConsumer build() {
            if (client == null || queueUrl == null || consumer == null) {
                throw new InvalidConfigurationException("client, queueUrl and consumer are required, but "
                        + (client == null ? "client " : "") + (queueUrl == null ? "queueUrl " : "")
                        + (consumer == null ? "consumer " : "") + "was not set");
            }
            return new SqsConsumer(this);
        }
    }
}
