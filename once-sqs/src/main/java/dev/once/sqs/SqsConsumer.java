package dev.once.sqs;

import dev.once.ClaimHeldOnThreadException;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.Outcome;
import dev.once.RetryPolicy;
import dev.once.StreamPositions;
import dev.once.adapter.AdapterDriver;
import dev.once.adapter.Broker;
import dev.once.adapter.ConsumerSettings;
import dev.once.adapter.Processed;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.services.sqs.SqsClient;
import software.amazon.awssdk.services.sqs.model.BatchResultErrorEntry;
import software.amazon.awssdk.services.sqs.model.ChangeMessageVisibilityBatchRequestEntry;
import software.amazon.awssdk.services.sqs.model.DeleteMessageBatchRequestEntry;
import software.amazon.awssdk.services.sqs.model.DeleteMessageBatchResponse;
import software.amazon.awssdk.services.sqs.model.Message;
import software.amazon.awssdk.services.sqs.model.MessageAttributeValue;
import software.amazon.awssdk.services.sqs.model.MessageSystemAttributeName;
import software.amazon.awssdk.services.sqs.model.ReceiveMessageRequest;

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
 * <p>A message whose claim another delivery holds ({@code IN_PROGRESS}: a redelivery while a slow holder
 * still works, its visibility lapsed, in this process or another) is not left to the visibility timeout:
 * each receive counts toward the redrive policy's {@code maxReceiveCount}, and at the limit SQS moves the
 * message to the dead-letter queue while the holder may still roll back, the event then never applied. It is
 * kept in hand instead, its visibility extended every third of the visibility timeout (also with
 * {@code heartbeat(false)}), and processed again, spaced by the {@linkplain Builder#receiveRetries receive
 * retries}, until the holder has ended; then settled by what that try finds: deleted (the holder committed:
 * duplicate; or it rolled back: applied now), or as any other outcome. The wait holds up its receive thread
 * (the others go on receiving), and in a FIFO receive the groups after it; {@code IN_PROGRESS} is rare (a
 * redelivery while the holder still works) and ends with the holder's one transaction. It ends early when the
 * consumer closes or stops: the message is then released (visibility 0) for another consumer, which spends
 * one of its receives (on its last one SQS moves it to the dead-letter queue instead). A claim held by a
 * suspended transaction of the receive thread's own ({@link ClaimHeldOnThreadException}), which cannot end
 * while it waits, is left to the visibility timeout.
 *
 * <p>FIFO queues ({@code .fifo}): the messages of one message group in a receive are processed in
 * order as one batch ({@link IdempotentConsumer#processInOrder}: one transaction when all go
 * through, nothing applied after the first that does not); the first that is not deleted (a retryable
 * failure, or a permanent one whose dead-letter send failed, that has no dead-letter queue, or whose
 * delete after the dead-letter send failed) stops its group, and the later ones of that group are
 * released for redelivery behind it: a dead-lettered message that stays in the queue comes back after
 * the visibility timeout and its handler runs again, so nothing of its group may be applied before
 * that. A message kept for its claim's holder stops its group the same way, whatever its last try
 * finds, and its tries keep the group's position as its first did. A FIFO dead-letter queue gets the
 * message's group and its message id as deduplication id (a second send of the message within SQS's
 * five-minute window is dropped as a duplicate). FIFO order holds only while each message is settled
 * within its visibility timeout, so a FIFO queue needs the {@linkplain Builder#heartbeat(boolean) heartbeat}.
 *
 * <p>Runs on the {@link AdapterDriver}: a batch whose processing fails outside the handler is left
 * for redelivery and the receive loop backs off; an unexpected failure stops the consumer, and
 * {@link #isRunning()} and {@link #failure()} report it.
 *
 * <p>Thread-safe; {@link #start()} once, {@link #close()} stops receiving, lets batches in
 * flight finish and delete, releases messages kept for their claims' holders, and returns.
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
    private final RetryPolicy receiveRetries;
    private final String eventIdAttribute;
    private final int maxMessages;
    private final int concurrency;
    private final Duration waitTime;
    private final Duration visibilityTimeout;
    private final boolean heartbeat;
    private final String deadLetterQueueUrl;
    private final boolean fifo;
    private final String source;
    private final boolean fifoDeadLetters;
    private final ReceiveMessageRequest request;
    private final AdapterDriver<Message> driver;
    private final ExecutorService receivers;
    private final String name;
    /** How often a message kept for its claim's holder has its visibility extended; the longest pause between tries. */
    private final Duration keepAliveEvery;
    /** Open until {@link #close()}: ends the waits for claims' holders. */
    private final CountDownLatch closing = new CountDownLatch(1);
    /** Extends the visibility of messages kept for their claims' holders; made on the first such wait. */
    private ScheduledExecutorService keepAlive;

    private volatile boolean running;

    private SqsConsumer(Builder b) {
        this.client = b.client;
        this.queueUrl = b.queueUrl;
        this.consumer = b.consumer;
        this.receiveRetries = b.settings.receiveRetries();
        this.eventIdAttribute = b.settings.eventId();
        this.maxMessages = b.maxMessages;
        this.concurrency = b.concurrency;
        this.waitTime = b.waitTime;
        this.visibilityTimeout = b.visibilityTimeout;
        this.heartbeat = b.settings.heartbeat();
        this.deadLetterQueueUrl = b.deadLetterQueueUrl;
        this.fifo = SqsDeliveries.isFifo(queueUrl);
        this.source = "sqs:" + SqsDeliveries.queueName(queueUrl);
        int n = INSTANCES.incrementAndGet();
        this.name = "once-sqs-" + n;
        this.keepAliveEvery = Duration.ofMillis(Math.max(1, visibilityTimeout.toMillis() / 3));
        AtomicInteger threads = new AtomicInteger();
        this.receivers = Executors.newFixedThreadPool(concurrency, r -> {
            Thread t = new Thread(r, name + "-receive-" + threads.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        this.fifoDeadLetters = deadLetterQueueUrl != null && SqsDeliveries.isFifo(deadLetterQueueUrl);
        this.request = ReceiveMessageRequest.builder()
                .queueUrl(queueUrl)
                .maxNumberOfMessages(maxMessages)
                .waitTimeSeconds((int) waitTime.toSeconds())
                .visibilityTimeout((int) visibilityTimeout.toSeconds())
                .messageSystemAttributeNames(
                        MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT,
                        MessageSystemAttributeName.MESSAGE_GROUP_ID,
                        MessageSystemAttributeName.SEQUENCE_NUMBER)
                .messageAttributeNames("All")
                .build();
        AdapterDriver.Builder<Message> loop =
                AdapterDriver.builder(name, consumer, new Sqs()).receiveRetries(receiveRetries);
        if (heartbeat) {
            loop.heartbeat(keepAliveEvery);
        }
        if (fifo) {
            // FIFO: each group's run in order, as one batch, nothing applied past a message not settled
            loop.inGroupOrder(m -> m.attributes().get(MessageSystemAttributeName.MESSAGE_GROUP_ID))
                    // the group's position in the database: nothing applied after a successor the queue handed
                    // out while this process still held the message (past its visibility timeout, cut off from SQS)
                    .groupPositions(
                            group -> StreamPositions.sqsMessageGroup(queueUrl, group),
                            m -> StreamPositions.sqsSequenceNumber(
                                    m.messageId(), m.attributes().get(MessageSystemAttributeName.SEQUENCE_NUMBER)));
        }
        this.driver = loop.build();
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
            receivers.execute(() -> driver.run(this::receive));
        }
        return this;
    }

    private List<Message> receive() {
        return client.receiveMessage(request).messages();
    }

    /** What SQS makes different: message attributes, receipt handles, visibility, a dead-letter queue of ours. */
    private final class Sqs implements Broker<Message> {

        @Override
        public Delivery delivery(Message m) {
            return SqsConsumer.this.delivery(m);
        }

        @Override
        public String describe(Message m) {
            return m.messageId();
        }

        /**
         * Settles every message of the batch, then waits for the claims held by others ({@code IN_PROGRESS}) one
         * after the other and settles each by the try that found its holder ended. All of them are kept in hand
         * from the start: their visibility is extended until each is settled, also while an earlier one is waited
         * for. In group order a held message comes alone (the first of its group not acknowledged): its group
         * stops behind it whatever that try finds, and its successors are released.
         */
        @Override
        public void settle(List<Processed<Message>> processed) {
            List<Processed<Message>> rest = new ArrayList<>();
            List<Processed<Message>> held = new ArrayList<>();
            for (Processed<Message> p : processed) {
                (heldByAnother(p.delivery(), p.outcome()) ? held : rest).add(p);
            }
            Set<Message> kept = ConcurrentHashMap.newKeySet();
            held.forEach(p -> kept.add(p.message()));
            ScheduledFuture<?> beat = held.isEmpty() ? null : keepAlive(kept);
            RuntimeException failed = null;
            try {
                try {
                    SqsConsumer.this.settle(rest);
                } catch (RuntimeException e) {
                    failed = e;
                }
                for (Processed<Message> p : held) {
                    Message m = p.message();
                    Outcome o = beat == null ? p.outcome() : waitForHolder(m, p.delivery(), p.outcome());
                    kept.remove(m);
                    if (heldByAnother(p.delivery(), o)) {
                        // stopped waiting: another consumer takes it over (an extension in flight may delay that)
                        log.info(
                                "message {} ({}) of {} is still in progress in another delivery as this consumer"
                                        + " stops; released for another consumer, which spends one of its receives",
                                m.messageId(),
                                o.eventId(),
                                queueUrl);
                        changeVisibility(List.of(m), 0);
                        continue;
                    }
                    try {
                        SqsConsumer.this.settle(List.of(new Processed<>(m, p.delivery(), o)));
                    } catch (RuntimeException e) {
                        if (failed == null) {
                            failed = e;
                        } else {
                            failed.addSuppressed(e);
                        }
                    }
                }
            } finally {
                if (beat != null) {
                    beat.cancel(false);
                }
            }
            if (failed != null) {
                throw failed;
            }
        }

        @Override
        public void extend(List<Message> messages) {
            changeVisibility(messages, (int) visibilityTimeout.toSeconds());
        }

        @Override
        public void release(List<Message> messages) {
            changeVisibility(messages, 0);
        }
    }

    private Delivery delivery(Message m) {
        Map<String, String> attributes = new HashMap<>();
        m.messageAttributes().forEach((k, v) -> {
            if (v.stringValue() != null) {
                attributes.put(k, v.stringValue());
            }
        });
        return SqsDeliveries.delivery(
                eventIdAttribute,
                m.messageId(),
                m.body(),
                attributes,
                m.attributes().get(MessageSystemAttributeName.APPROXIMATE_RECEIVE_COUNT),
                source);
    }

    /** A claim held by another delivery that can end while this one waits ({@link AdapterDriver#heldElsewhere}). */
    private static boolean heldByAnother(Delivery d, Outcome o) {
        return d != null && AdapterDriver.heldElsewhere(o);
    }

    /**
     * Processes {@code d} of {@code m}, whose claim another delivery holds, again, spaced by the
     * {@linkplain Builder#receiveRetries receive retries} (at most a third of the visibility timeout apart), until
     * the holder has ended; returns the outcome of the try that found it ended, or {@code IN_PROGRESS} when the
     * consumer closes or stops meanwhile.
     */
    private Outcome waitForHolder(Message m, Delivery d, Outcome o) {
        log.info(
                "message {} ({}, receive {}) of {} is in progress in another delivery; kept in hand and tried again"
                        + " until that one ends",
                m.messageId(),
                o.eventId(),
                d.attempt(),
                queueUrl);
        try {
            for (int tries = 1; heldByAnother(d, o); tries++) {
                long pause = Math.min(receiveRetries.delay(tries).toMillis(), keepAliveEvery.toMillis());
                if (closing.await(pause, TimeUnit.MILLISECONDS) || !driver.isRunning()) {
                    return o;
                }
                o = driver.processAgain(m, d);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return o;
    }

    /**
     * Extends the visibility of the messages in {@code kept} (as they are at each beat) now and every
     * {@link #keepAliveEvery}: left to the visibility timeout, each receive of a message whose claim another
     * delivery holds would count toward the redrive policy's {@code maxReceiveCount}. Null when the consumer is
     * closing.
     */
    private synchronized ScheduledFuture<?> keepAlive(Set<Message> kept) {
        if (closing.getCount() == 0) {
            return null;
        }
        if (keepAlive == null) {
            keepAlive = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, name + "-in-progress");
                t.setDaemon(true);
                return t;
            });
        }
        int seconds = (int) visibilityTimeout.toSeconds();
        return keepAlive.scheduleAtFixedRate(
                () -> changeVisibility(List.copyOf(kept), seconds),
                0,
                keepAliveEvery.toMillis(),
                TimeUnit.MILLISECONDS);
    }

    /**
     * Deletes the acknowledged messages and those moved to the dead-letter queue; throws when a
     * permanently failed one stays in the queue (no dead-letter queue, its send failed, or its
     * delete did), so in group order its successors wait behind it: it comes back and its handler
     * runs again. An acknowledged message whose delete fails does not throw: its effect is applied,
     * the redelivery is absorbed as a duplicate.
     */
    private void settle(List<Processed<Message>> processed) {
        List<Message> delete = new ArrayList<>();
        List<Message> deadLettered = new ArrayList<>();
        List<String> kept = new ArrayList<>();
        for (Processed<Message> p : processed) {
            Message m = p.message();
            Outcome o = p.outcome();
            switch (p.verdict()) {
                case ACKNOWLEDGE -> delete.add(m);
                case DEAD_LETTER -> {
                    if (deadLetterQueueUrl != null && deadLetter(m, o)) {
                        delete.add(m); // counted dead-lettered only now that the send succeeded
                        deadLettered.add(m);
                    } else {
                        kept.add(m.messageId());
                        if (deadLetterQueueUrl == null) {
                            log.warn(
                                    "message {} ({}) failed permanently and is left to the redrive policy of {}: {}",
                                    m.messageId(),
                                    o.eventId(),
                                    queueUrl,
                                    String.valueOf(o.failure()));
                        }
                    }
                }
                case REDELIVER -> {
                    // left alone; the visibility timeout is the backoff (an IN_PROGRESS one here was released
                    // when this consumer stopped waiting for its holder, or its holder is this thread's own)
                }
            }
        }
        List<Message> notDeleted = delete(delete);
        if (!kept.isEmpty()) {
            throw new IllegalStateException("permanently failed messages " + kept + " stay in " + queueUrl
                    + (deadLetterQueueUrl == null ? " (no dead-letter queue)" : " (the dead-letter send failed)"));
        }
        List<String> undeleted = deadLettered.stream()
                .filter(notDeleted::contains)
                .map(Message::messageId)
                .toList();
        if (!undeleted.isEmpty()) {
            throw new IllegalStateException("messages " + undeleted + " were sent to " + deadLetterQueueUrl
                    + " but their delete from " + queueUrl + " failed: they come back after the visibility timeout");
        }
    }

    private boolean deadLetter(Message m, Outcome o) {
        try {
            Map<String, MessageAttributeValue> attributes = new HashMap<>(m.messageAttributes());
            client.sendMessage(r -> {
                r.queueUrl(deadLetterQueueUrl).messageBody(m.body()).messageAttributes(attributes);
                if (fifoDeadLetters) {
                    // A FIFO queue refuses a send without a group; the source's message id makes a
                    // re-send after a crash (same message, redelivered) a deduplicated no-op.
                    r.messageGroupId(m.attributes()
                                    .getOrDefault(MessageSystemAttributeName.MESSAGE_GROUP_ID, m.messageId()))
                            .messageDeduplicationId(m.messageId());
                }
            });
            log.warn(
                    "message {} ({}) failed permanently, moved to {}: {}",
                    m.messageId(),
                    o.eventId(),
                    deadLetterQueueUrl,
                    String.valueOf(o.failure()));
            return true;
        } catch (RuntimeException e) {
            log.warn(
                    "could not dead-letter message {} to {}, leaving it in {}: {}",
                    m.messageId(),
                    deadLetterQueueUrl,
                    queueUrl,
                    e.toString());
            return false;
        }
    }

    /**
     * Deletes {@code messages} ({@code DeleteMessageBatch}, ten at a time); returns those whose
     * delete SQS did not confirm (refused, or the call failed).
     */
    private List<Message> delete(List<Message> messages) {
        List<Message> notDeleted = new ArrayList<>();
        for (int from = 0; from < messages.size(); from += 10) {
            List<Message> chunk = messages.subList(from, Math.min(from + 10, messages.size()));
            List<DeleteMessageBatchRequestEntry> entries = new ArrayList<>();
            for (int i = 0; i < chunk.size(); i++) {
                entries.add(DeleteMessageBatchRequestEntry.builder()
                        .id(Integer.toString(i))
                        .receiptHandle(chunk.get(i).receiptHandle())
                        .build());
            }
            try {
                DeleteMessageBatchResponse response =
                        client.deleteMessageBatch(r -> r.queueUrl(queueUrl).entries(entries));
                // A failed delete (for example a receipt handle from before a redelivery) is not an
                // error of ours: the message comes back and the inbox absorbs it as a duplicate.
                for (BatchResultErrorEntry f : response.failed()) {
                    notDeleted.add(chunk.get(Integer.parseInt(f.id())));
                    log.info(
                            "delete of a processed message from {} failed ({}: {}); it will be redelivered",
                            queueUrl,
                            f.code(),
                            f.message());
                }
            } catch (RuntimeException e) {
                notDeleted.addAll(chunk);
                log.warn(
                        "delete of {} processed messages from {} failed; they will be redelivered: {}",
                        chunk.size(),
                        queueUrl,
                        e.toString());
            }
        }
        return notDeleted;
    }

    /**
     * Sets the visibility of {@code messages} ({@code ChangeMessageVisibilityBatch}, ten at a time): the
     * heartbeat's extension, or 0 to release them. SQS answers per message; one it refused (a receipt handle
     * that is no longer valid: the message was deleted, or handed out again) is logged with its id and SQS's
     * error code: an extension that failed lets the message come back while its batch still works (the inbox
     * absorbs the copy), a release that failed leaves it hidden until its visibility timeout.
     */
    private void changeVisibility(List<Message> messages, int seconds) {
        for (int from = 0; from < messages.size(); from += 10) {
            List<ChangeMessageVisibilityBatchRequestEntry> entries = new ArrayList<>();
            for (int i = from; i < Math.min(from + 10, messages.size()); i++) {
                entries.add(ChangeMessageVisibilityBatchRequestEntry.builder()
                        .id(Integer.toString(i))
                        .receiptHandle(messages.get(i).receiptHandle())
                        .visibilityTimeout(seconds)
                        .build());
            }
            try {
                for (BatchResultErrorEntry f : client.changeMessageVisibilityBatch(
                                r -> r.queueUrl(queueUrl).entries(entries))
                        .failed()) {
                    log.warn(
                            "could not change the visibility of message {} in {} to {}s ({}: {})",
                            messages.get(Integer.parseInt(f.id())).messageId(),
                            queueUrl,
                            seconds,
                            f.code(),
                            f.message());
                }
            } catch (RuntimeException e) {
                log.warn(
                        "could not change the visibility of {} messages in {} to {}s: {}",
                        entries.size(),
                        queueUrl,
                        seconds,
                        e.toString());
            }
        }
    }

    /** True from {@link #start()} until {@link #close()} or a fatal failure ({@link #failure()}). */
    public boolean isRunning() {
        return running && driver.isRunning();
    }

    /** What stopped the consumer when it was not closed. */
    public Optional<Throwable> failure() {
        return driver.failure();
    }

    /**
     * Stops receiving, waits for batches in flight to finish and delete (at most the wait time plus a minute). A
     * message kept for its claim's holder is released (visibility 0) for another consumer: one more receive of it.
     */
    @Override
    public void close() {
        running = false;
        synchronized (this) {
            closing.countDown(); // no new keep-alive after this
        }
        driver.stop();
        receivers.shutdown();
        try {
            if (!receivers.awaitTermination(waitTime.toSeconds() + 60, TimeUnit.SECONDS)) {
                receivers.shutdownNow();
            }
        } catch (InterruptedException e) {
            receivers.shutdownNow();
            Thread.currentThread().interrupt();
        } finally {
            driver.close();
            synchronized (this) {
                if (keepAlive != null) {
                    keepAlive.shutdownNow();
                }
            }
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
        private ConsumerSettings settings =
                ConsumerSettings.defaults("eventIdAttribute", SqsDeliveries.DEFAULT_EVENT_ID_ATTRIBUTE);
        private int maxMessages = DEFAULT_MAX_MESSAGES;
        private int concurrency = DEFAULT_CONCURRENCY;
        private Duration waitTime = DEFAULT_WAIT_TIME;
        private Duration visibilityTimeout = DEFAULT_VISIBILITY_TIMEOUT;
        private String deadLetterQueueUrl;

        private Builder() {}

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
            this.settings = settings.withEventId(eventIdAttribute);
            return this;
        }

        /** Messages per receive and per transaction, 1 to 10; default {@value #DEFAULT_MAX_MESSAGES}. */
        public Builder maxMessages(int maxMessages) {
            if (maxMessages < 1 || maxMessages > 10) {
                throw new InvalidConfigurationException(
                        "maxMessages must be between 1 and 10 (SQS's limit per receive)," + " but was " + maxMessages);
            }
            this.maxMessages = maxMessages;
            return this;
        }

        /** Receives in flight at once, 1 to 100; default {@value #DEFAULT_CONCURRENCY}. */
        public Builder concurrency(int concurrency) {
            this.concurrency = ConsumerSettings.between("concurrency", concurrency, 1, 100);
            return this;
        }

        /** Long-poll wait, 0 to 20 whole seconds; default 20 s. */
        public Builder waitTime(Duration waitTime) {
            Objects.requireNonNull(waitTime, "waitTime");
            if (waitTime.isNegative() || waitTime.toSeconds() > 20 || waitTime.toMillis() % 1000 != 0) {
                throw new InvalidConfigurationException(
                        "waitTime must be 0 to 20 whole seconds (SQS's long-poll" + " limit), but was " + waitTime);
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
            if (visibilityTimeout.toSeconds() < 1
                    || visibilityTimeout.toHours() >= 12
                    || visibilityTimeout.toMillis() % 1000 != 0) {
                throw new InvalidConfigurationException(
                        "visibilityTimeout must be 1 s to 12 h in whole seconds," + " but was " + visibilityTimeout);
            }
            this.visibilityTimeout = visibilityTimeout;
            return this;
        }

        /**
         * Whether a batch still working has its visibility extended; default true. Turning it off
         * makes a batch slower than the visibility timeout come back while it runs (absorbed,
         * but wasted work). Not on a FIFO queue ({@link #build()} refuses it): FIFO order holds only
         * while each message is settled within its visibility timeout. Past it SQS no longer holds the
         * message's group: it hands the message out again, or, at the redrive policy's
         * {@code maxReceiveCount}, moves it to the dead-letter queue and hands out its successor, which
         * another receive applies while this one is still working on the message and applies it after. A
         * message kept for its claim's holder ({@code IN_PROGRESS}) has its visibility extended either way.
         */
        public Builder heartbeat(boolean heartbeat) {
            this.settings = settings.withHeartbeat(heartbeat);
            return this;
        }

        /** Queue that permanently failed messages are moved to before they are deleted; default none. */
        public Builder deadLetterQueueUrl(String deadLetterQueueUrl) {
            this.deadLetterQueueUrl = Objects.requireNonNull(deadLetterQueueUrl, "deadLetterQueueUrl");
            return this;
        }

        /**
         * Pause after failed receives (and batches that failed outside the handler) in a row, and
         * between the tries of a message kept for its claim's holder (at most a third of the
         * visibility timeout); default {@link AdapterDriver#DEFAULT_RECEIVE_RETRIES}; the loop never
         * gives up, past the last retry it waits the cap.
         */
        public Builder receiveRetries(RetryPolicy policy) {
            this.settings = settings.withReceiveRetries(policy);
            return this;
        }

        /**
         * @throws InvalidConfigurationException naming what is missing, or {@code heartbeat(false)} on a
         *     FIFO queue
         */
        public SqsConsumer build() {
            if (client == null || queueUrl == null || consumer == null) {
                throw new InvalidConfigurationException("client, queueUrl and consumer are required, but "
                        + (client == null ? "client " : "") + (queueUrl == null ? "queueUrl " : "")
                        + (consumer == null ? "consumer " : "") + "was not set");
            }
            if (!settings.heartbeat() && SqsDeliveries.isFifo(queueUrl)) {
                throw new InvalidConfigurationException("heartbeat(false) on the FIFO queue " + queueUrl
                        + ": its message group order holds only while each message is settled within its visibility"
                        + " timeout (past it SQS hands out the message's successors once the redrive policy has"
                        + " moved it); keep heartbeat(true), the default");
            }
            return new SqsConsumer(this);
        }
    }
}
