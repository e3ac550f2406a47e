package dev.once.pubsub;

import com.google.api.core.ApiFuture;
import com.google.api.core.ApiFutureCallback;
import com.google.api.core.ApiFutures;
import com.google.api.gax.batching.FlowControlSettings;
import com.google.api.gax.batching.FlowController.LimitExceededBehavior;
import com.google.api.gax.core.CredentialsProvider;
import com.google.api.gax.rpc.TransportChannelProvider;
import com.google.cloud.pubsub.v1.AckReplyConsumerWithResponse;
import com.google.cloud.pubsub.v1.AckResponse;
import com.google.cloud.pubsub.v1.MessageReceiverWithAckResponse;
import com.google.cloud.pubsub.v1.Subscriber;
import com.google.cloud.pubsub.v1.SubscriberShutdownSettings;
import com.google.common.util.concurrent.MoreExecutors;
import com.google.pubsub.v1.ProjectSubscriptionName;
import com.google.pubsub.v1.PubsubMessage;
import dev.once.ClaimHeldOnThreadException;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.RetryPolicy;
import dev.once.adapter.AdapterDriver;
import dev.once.adapter.Broker;
import dev.once.adapter.ConsumerSettings;
import dev.once.adapter.Processed;
import dev.once.adapter.Verdict;
import dev.once.outbox.OutboxMessage;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.DelayQueue;
import java.util.concurrent.Delayed;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Receives from a Pub/Sub subscription with the client's {@link Subscriber} (streaming pull) and
 * runs every message through an {@link IdempotentConsumer}: messages are gathered into batches,
 * each batch processed in one database transaction ({@link IdempotentConsumer#processBatch}, so a
 * {@link dev.once.BatchHandler} sees them set-wise), and only after the commit {@code ack}ed. A
 * retryable failure is {@code nack}ed (the subscription's retry policy decides when it comes
 * again); a permanent one is published to the {@linkplain Builder#deadLetters dead-letter topic}
 * and then acked, or, without one, {@code nack}ed for the subscription's own dead-letter policy
 * to forward after its maximum delivery attempts.
 *
 * <p><b>Event id.</b> Read from the attribute {@value OutboxMessage#EVENT_ID_HEADER}
 * (configurable; {@link PubSubPublisher} and {@link PubSubMessages} set it). Never the server's
 * message id: a producer that publishes again gets a new one, so it cannot deduplicate. A message
 * without the attribute fails permanently (dead-lettered), as on the other adapters. The delivery
 * attempt is what the client reports ({@link Subscriber#getDeliveryAttempt}); Pub/Sub counts it only
 * on subscriptions with a dead-letter policy, elsewhere every delivery reports attempt 1.
 *
 * <p><b>Lease.</b> The client extends each outstanding message's ack deadline while it waits in
 * this consumer and while its batch runs, up to the {@linkplain Builder#lease lease} (the client's
 * {@code maxAckExtensionPeriod}); flow control admits at most {@code batchSize × threads}
 * messages, so none waits for more than the batch ahead of it. Work that outlives the lease loses the
 * message: Pub/Sub hands it to another subscriber, whose claim waits for this transaction and
 * then finds the event applied (a duplicate), or applies it if this one rolled back. With
 * {@link Builder#orderedByKey()} there is no lease: the client extends the deadline for as long as the
 * work runs (see below).
 *
 * <p><b>A claim another delivery holds.</b> A message whose claim another delivery holds
 * ({@code IN_PROGRESS}: a redelivery or a producer's second copy while a slow holder, in this process
 * or another, still has its transaction open) is not nacked: each nack is a delivery attempt, and
 * past the dead-letter policy's {@code maxDeliveryAttempts} Pub/Sub forwards the message to the
 * dead-letter topic unapplied (or, with no subscription on that topic, loses it) while the holder may
 * still roll back. It is kept in hand instead (the client extends its deadline, as for a message in
 * work: up to the lease, in ordered mode for as long as it is kept) and processed again, spaced by
 * the {@linkplain Builder#receiveRetries receive retry policy}'s delays, until the holder has ended,
 * then settled by what that try finds: acked (the holder committed: a duplicate; or it rolled back:
 * applied now), or as any other outcome. It keeps its flow-control slot meanwhile. A claim a
 * suspended transaction of the processing thread itself holds ({@link ClaimHeldOnThreadException}),
 * which cannot end while the thread waits, is nacked as before. {@link #close()} nacks what is kept:
 * one delivery attempt each.
 *
 * <p><b>Exactly-once delivery subscriptions.</b> Acks go through the ack-with-response API. On a
 * subscription with exactly-once delivery a failed ack (the receipt expired, the stream broke)
 * means the message comes again; the inbox absorbs that copy. Such acks are counted
 * ({@link #failedAcks()}) and logged, never retried by hand.
 *
 * <p><b>Ordering keys.</b> With {@link Builder#orderedByKey()} the messages of one ordering key in a
 * batch run in order ({@link IdempotentConsumer#processInOrder}); after one of them failed (a
 * retryable failure, a permanent one that could not be dead-lettered) the rest of its key is nacked,
 * and so is every later message of that key this consumer receives until Pub/Sub delivers the failed
 * one again. A message kept because another delivery holds its claim (see above) holds its key the
 * same way, but in hand: the rest of its key, and what comes of the key meanwhile, waits unprocessed
 * and unsettled behind it (nothing nacked, no attempt spent), and runs in order once it is acked or
 * dead-lettered; if its try fails, it is nacked and so is what waited behind it. Pub/Sub's ordering
 * alone redelivers the failed message and its successors in order, but its client hands successors
 * already received to the receiver regardless: this consumer is what keeps them from being applied
 * ahead of the failed one. Ordered mode uses one processing thread.
 * A key's order also holds only while each of its messages is settled before its ack deadline lapses:
 * every lapse counts as a delivery attempt, and once the subscription's dead-letter policy has
 * forwarded the message ({@code maxDeliveryAttempts}) Pub/Sub hands the key's next message to a
 * subscriber, which applies it while this one still works on the forwarded message and commits it
 * after. So ordered mode has no lease: the client extends the deadline for as long as the work runs
 * ({@link Builder#build()} refuses {@link Builder#lease}). What it cannot cover: the extensions failing
 * until the deadline lapses (a link down that long, a process paused that long), and {@link #close()}
 * while a batch has worked for longer than the minute it waits for it: the subscriber then stops and
 * nacks what it holds, that batch's messages too, while their work goes on.
 *
 * <p>Runs on the {@link AdapterDriver}: the client pushes messages into a local buffer and the
 * driver's loop takes batches from it, the way it receives from brokers with a pull API. No driver
 * heartbeat: the client's own lease management extends the deadlines.
 *
 * <p>Thread-safe; {@link #start()} once; {@link #close()} stops taking batches, lets the batches in
 * hand finish and ack, nacks what is still buffered or kept, and stops the subscriber.
 */
public final class PubSubConsumer implements AutoCloseable {

    /** Messages per batch and per transaction. */
    public static final int DEFAULT_BATCH_SIZE = 50;
    /** How long a batch waits to fill up once its first message is there. */
    public static final Duration DEFAULT_BATCH_WAIT = Duration.ofMillis(50);
    /** The longest a message may stay with this consumer (buffered and in work) before Pub/Sub gives it to another. */
    public static final Duration DEFAULT_LEASE = Duration.ofMinutes(5);
    /**
     * The client's {@code maxAckExtensionPeriod} in ordered mode, where the deadline is extended for as long as
     * the work runs: Pub/Sub's longest message retention, after which the message is gone anyway.
     */
    private static final Duration WHILE_WORKING = Duration.ofDays(31);
    /** Processing threads. */
    public static final int DEFAULT_THREADS = 1;
    /** Attribute of a dead-lettered copy: why it failed. */
    public static final String FAILURE_ATTRIBUTE = "once-failure";
    /** Attribute of a dead-lettered copy: the subscription it came from. */
    public static final String SOURCE_ATTRIBUTE = "once-source-subscription";

    private static final Logger log = LoggerFactory.getLogger(PubSubConsumer.class);
    private static final AtomicInteger INSTANCES = new AtomicInteger();
    private static final Pattern ID = Pattern.compile("[A-Za-z][A-Za-z0-9._~+%-]{2,254}");
    private static final Duration POLL = Duration.ofMillis(200);

    /** A message and the reply the client gave with it. */
    record Received(PubsubMessage message, AckReplyConsumerWithResponse reply) {}

    /**
     * A message whose claim another delivery held, kept in hand: its delivery, the tries so far, and when the next
     * is due ({@link System#nanoTime()}).
     */
    private record Kept(Received message, Delivery delivery, int tries, long due) implements Delayed {
        @Override
        public long getDelay(TimeUnit unit) {
            return unit.convert(due - System.nanoTime(), TimeUnit.NANOSECONDS);
        }

        @Override
        public int compareTo(Delayed other) {
            return Long.compare(due, ((Kept) other).due);
        }
    }

    private final ProjectSubscriptionName subscription;
    private final IdempotentConsumer consumer;
    private final int batchSize;
    private final Duration batchWait;
    private final Duration lease;
    private final Duration ackDeadline;
    private final int threads;
    private final boolean ordered;
    private final String eventIdAttribute;
    /** Spaces the tries of a message kept because another delivery held its claim, as the driver's receive retries. */
    private final RetryPolicy receiveRetries;

    private final com.google.cloud.pubsub.v1.Publisher deadLetters;
    private final TransportChannelProvider channelProvider;
    private final CredentialsProvider credentialsProvider;
    private final String name;
    private final AdapterDriver<Received> driver;
    private final BlockingQueue<Received> buffer = new LinkedBlockingQueue<>();
    /** Ordering key → message id of its message that was nacked and must come back before the key goes on. */
    private final Map<String, String> blockedKeys = new ConcurrentHashMap<>();
    /** Messages whose claim another delivery held, each due for its next try at its {@link Kept#due}. */
    private final DelayQueue<Kept> kept = new DelayQueue<>();
    /**
     * Ordered mode, guarded by itself: ordering key of a kept message → the key's later messages, in order,
     * waiting unprocessed behind it.
     */
    private final Map<String, List<Received>> behindKept = new HashMap<>();
    /** Ordered mode, guarded by {@link #behindKept}: messages of a key whose kept message was settled, to run next. */
    private final Deque<Received> released = new ArrayDeque<>();

    private final AtomicLong failedAcks = new AtomicLong();
    private final List<Thread> workers = new ArrayList<>();
    private volatile Subscriber subscriber;
    private volatile boolean running;

    private PubSubConsumer(Builder b) {
        this.subscription = b.subscription;
        this.consumer = b.consumer;
        this.batchSize = b.batchSize;
        this.batchWait = b.batchWait;
        this.lease = b.ordered ? WHILE_WORKING : b.lease == null ? DEFAULT_LEASE : b.lease;
        this.ackDeadline = b.ackDeadline;
        this.threads = b.threads;
        this.ordered = b.ordered;
        this.eventIdAttribute = b.settings.eventId();
        this.receiveRetries = b.settings.receiveRetries();
        this.deadLetters = b.deadLetters;
        this.channelProvider = b.channelProvider;
        this.credentialsProvider = b.credentialsProvider;
        this.name = "once-pubsub-" + INSTANCES.incrementAndGet() + "-" + subscription.getSubscription();
        AdapterDriver.Builder<Received> loop =
                AdapterDriver.builder(name, consumer, new PubSub()).receiveRetries(b.settings.receiveRetries());
        if (ordered) {
            loop.inGroupOrder(r -> r.message().getOrderingKey().isEmpty()
                    ? "\0" + r.message().getMessageId() // no key: no order to keep
                    : r.message().getOrderingKey());
        }
        this.driver = loop.build();
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Starts the subscriber (its streaming pulls) and the processing threads; returns this. */
    public synchronized PubSubConsumer start() {
        if (running) {
            throw new IllegalStateException("PubSubConsumer on " + subscription + " is already started");
        }
        MessageReceiverWithAckResponse receiver = this::receive;
        Subscriber.Builder s = Subscriber.newBuilder(subscription, receiver)
                .setParallelPullCount(1)
                .setMaxAckExtensionPeriodDuration(lease)
                .setFlowControlSettings(FlowControlSettings.newBuilder()
                        .setMaxOutstandingElementCount((long) batchSize * threads)
                        .setLimitExceededBehavior(LimitExceededBehavior.Block)
                        .build())
                // close() settles what it holds itself; anything left is nacked, not waited for
                .setSubscriberShutdownSettings(SubscriberShutdownSettings.newBuilder()
                        .setMode(SubscriberShutdownSettings.ShutdownMode.NACK_IMMEDIATELY)
                        .build());
        if (ackDeadline != null) {
            s.setMaxDurationPerAckExtensionDuration(ackDeadline);
        }
        if (channelProvider != null) {
            s.setChannelProvider(channelProvider);
        }
        if (credentialsProvider != null) {
            s.setCredentialsProvider(credentialsProvider);
        }
        Subscriber started = s.build();
        started.addListener(
                new com.google.api.core.ApiService.Listener() {
                    @Override
                    public void failed(com.google.api.core.ApiService.State from, Throwable failure) {
                        if (running) {
                            driver.fail(failure);
                        }
                    }
                },
                MoreExecutors.directExecutor());
        started.startAsync().awaitRunning();
        subscriber = started;
        running = true;
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(() -> driver.run(this::take), name + "-" + i);
            t.setDaemon(true);
            workers.add(t);
            t.start();
        }
        return this;
    }

    /**
     * What the client calls with each message and its reply: buffers it for the processing threads.
     * Package-private for the tests that play delivery sequences Pub/Sub produces and the emulator does
     * not (a key's successors handed out before its failed message settles; acks that exactly-once
     * delivery refuses).
     */
    void receive(PubsubMessage message, AckReplyConsumerWithResponse reply) {
        log.debug("{}: received {}", name, message.getMessageId());
        buffer.add(new Received(message, reply));
    }

    /**
     * Tries the kept messages that are due, then takes a batch: in ordered mode first what waited behind a
     * kept message that was since settled, else from the buffer, waiting up to {@link #POLL} for a first
     * message, then up to the batch wait for more. In ordered mode a message of a blocked key is nacked
     * here, unprocessed, unless it is the one its key waits for, and one of a key whose message is kept
     * waits behind it.
     */
    private List<Received> take() throws InterruptedException {
        tryKept();
        List<Received> batch = new ArrayList<>(batchSize);
        synchronized (behindKept) {
            while (!released.isEmpty() && batch.size() < batchSize) {
                Received r = released.poll();
                if (admitted(r)) {
                    batch.add(r);
                }
            }
        }
        if (!batch.isEmpty()) {
            return batch;
        }
        Received first = buffer.poll(POLL.toMillis(), TimeUnit.MILLISECONDS);
        if (first == null) {
            return batch;
        }
        long until = System.nanoTime() + batchWait.toNanos();
        Received next = first;
        while (next != null) {
            if (admitted(next)) {
                batch.add(next);
            }
            if (batch.size() >= batchSize) {
                break;
            }
            long left = until - System.nanoTime();
            next = left <= 0 ? buffer.poll() : buffer.poll(left, TimeUnit.NANOSECONDS);
        }
        return batch;
    }

    private boolean admitted(Received r) {
        if (!ordered) {
            return true;
        }
        if (waitsBehindKept(r)) {
            return false;
        }
        String key = r.message().getOrderingKey();
        String waitingFor = key.isEmpty() ? null : blockedKeys.get(key);
        if (waitingFor == null) {
            return true;
        }
        if (waitingFor.equals(r.message().getMessageId())) {
            blockedKeys.remove(key, waitingFor);
            return true;
        }
        r.reply().nack();
        return false;
    }

    /** Ordered mode: true when a message of {@code r}'s key is kept, and then {@code r} waits behind it, in hand. */
    private boolean waitsBehindKept(Received r) {
        String key = r.message().getOrderingKey();
        if (!ordered || key.isEmpty()) {
            return false;
        }
        synchronized (behindKept) {
            List<Received> behind = behindKept.get(key);
            if (behind == null) {
                return false;
            }
            behind.add(r);
            return true;
        }
    }

    /**
     * Keeps {@code r}, whose claim another delivery holds, in hand until its next try, due after the receive retry
     * policy's delay for {@code tries + 1}; the first time, in ordered mode, its key waits behind it.
     */
    private void keep(Received r, Delivery d, int tries) {
        if (tries == 0) {
            log.info(
                    "message {} ({}) on {} (delivery attempt {}) is in progress in another delivery; kept in hand and"
                            + " tried again until that one ends",
                    r.message().getMessageId(),
                    d.eventId(),
                    subscription,
                    d.attempt());
            String key = r.message().getOrderingKey();
            if (ordered && !key.isEmpty()) {
                synchronized (behindKept) {
                    behindKept.putIfAbsent(key, new ArrayList<>());
                }
            }
        }
        kept.add(new Kept(
                r, d, tries, System.nanoTime() + receiveRetries.delay(tries + 1).toNanos()));
    }

    /**
     * Processes the kept messages that are due again; settles each whose holder has ended by what its try found
     * and, in ordered mode, lets its key go on (what waited behind it runs next) when it is acked or dead-lettered,
     * or nacks what waited behind it, with it.
     */
    private void tryKept() {
        Kept k;
        while (driver.isRunning() && (k = kept.poll()) != null) {
            Outcome o = driver.processAgain(k.delivery());
            if (AdapterDriver.heldElsewhere(o)) {
                keep(k.message(), k.delivery(), k.tries() + 1);
                continue;
            }
            boolean goOn = settle(k.message(), o) && Verdict.of(o) != Verdict.REDELIVER;
            String key = k.message().message().getOrderingKey();
            if (!ordered || key.isEmpty()) {
                continue;
            }
            synchronized (behindKept) {
                List<Received> behind = behindKept.remove(key);
                if (behind == null) {
                    continue; // nacked with the kept ones: the consumer stopped meanwhile
                }
                if (goOn) {
                    released.addAll(behind);
                } else {
                    behind.forEach(r -> r.reply().nack()); // Pub/Sub redelivers them after the kept one, in order
                }
            }
        }
    }

    /** Nacks what is kept and what waits behind it: each is one more delivery attempt. */
    private void nackKept() {
        for (Iterator<Kept> it = kept.iterator(); it.hasNext(); ) {
            Kept k = it.next();
            it.remove();
            k.message().reply().nack();
        }
        synchronized (behindKept) {
            behindKept.values().forEach(behind -> behind.forEach(r -> r.reply().nack()));
            behindKept.clear();
            released.forEach(r -> r.reply().nack());
            released.clear();
        }
    }

    /** Blocks {@code r}'s key until {@code r} comes again (ordered mode; the first block of a key wins). */
    private void block(Received r) {
        String key = r.message().getOrderingKey();
        if (ordered && !key.isEmpty()) {
            blockedKeys.putIfAbsent(key, r.message().getMessageId());
        }
    }

    /** What Pub/Sub makes different: attributes, the client's delivery attempt, ack / nack / our dead-letter topic. */
    private final class PubSub implements Broker<Received> {

        @Override
        public Delivery delivery(Received r) {
            return PubSubConsumer.this.delivery(r.message());
        }

        @Override
        public String describe(Received r) {
            return subscription.getSubscription() + "#" + r.message().getMessageId();
        }

        /** Settles each message by its outcome, except one whose claim another delivery holds: that one is kept. */
        @Override
        public void settle(List<Processed<Received>> processed) {
            List<String> nacked = new ArrayList<>();
            for (Processed<Received> p : processed) {
                if (AdapterDriver.heldElsewhere(p.outcome())) {
                    keep(p.message(), p.delivery(), 0);
                } else if (!PubSubConsumer.this.settle(p.message(), p.outcome())) {
                    nacked.add(p.outcome().eventId());
                }
            }
            if (!nacked.isEmpty()) {
                // in ordered mode this stops the message's key: nothing behind it is applied
                throw new IllegalStateException("permanently failed messages " + nacked
                        + " could not be dead-lettered and were nacked on " + subscription);
            }
        }

        /** What an ordered run left behind its first message not acked: waits behind it if it is kept, else nacked. */
        @Override
        public void release(List<Received> messages) {
            for (Received r : messages) {
                if (!waitsBehindKept(r)) {
                    block(r);
                    r.reply().nack();
                }
            }
        }

        @Override
        public void abandon(Throwable cause) {
            buffer.forEach(r -> r.reply().nack());
            buffer.clear();
            nackKept();
            Subscriber s = subscriber;
            if (s != null) {
                s.stopAsync();
            }
        }
    }

    /** Settles one message; false when a permanent failure could not be dead-lettered (it was nacked). */
    private boolean settle(Received r, Outcome o) {
        switch (Verdict.of(o)) {
            case ACKNOWLEDGE -> {
                ack(r, o);
                return true;
            }
            case REDELIVER -> {
                block(r);
                r.reply().nack();
                return true;
            }
            default -> {
                if (deadLetters == null) {
                    log.warn(
                            "message {} ({}) on {} failed permanently; nacked for the subscription's dead-letter"
                                    + " policy (none set on this consumer): {}",
                            r.message().getMessageId(),
                            o.eventId(),
                            subscription,
                            String.valueOf(o.failure()));
                    block(r);
                    r.reply().nack();
                    return true;
                }
                if (deadLetter(r, o)) {
                    ack(r, o);
                    return true;
                }
                block(r);
                r.reply().nack();
                return false;
            }
        }
    }

    private void ack(Received r, Outcome o) {
        ApiFuture<AckResponse> response = r.reply().ack();
        ApiFutures.addCallback(
                response,
                new ApiFutureCallback<>() {
                    @Override
                    public void onSuccess(AckResponse result) {
                        if (result != AckResponse.SUCCESSFUL) {
                            ackFailed(r, o, result.toString());
                        }
                    }

                    @Override
                    public void onFailure(Throwable t) {
                        ackFailed(r, o, t.toString());
                    }
                },
                MoreExecutors.directExecutor());
    }

    private void ackFailed(Received r, Outcome o, String why) {
        failedAcks.incrementAndGet();
        // the effect is committed: the copy Pub/Sub sends again is absorbed by the inbox
        log.info(
                "ack of {} ({}) on {} failed ({}); its redelivery is absorbed as a duplicate",
                r.message().getMessageId(),
                o.eventId(),
                subscription,
                why);
    }

    private boolean deadLetter(Received r, Outcome o) {
        PubsubMessage m = r.message();
        PubsubMessage copy = PubsubMessage.newBuilder()
                .setData(m.getData())
                .putAllAttributes(m.getAttributesMap())
                .putAttributes(FAILURE_ATTRIBUTE, truncate(String.valueOf(o.failure())))
                .putAttributes(SOURCE_ATTRIBUTE, subscription.toString())
                .build();
        try {
            String id = deadLetters.publish(copy).get(30, TimeUnit.SECONDS);
            log.warn(
                    "message {} ({}) on {} failed permanently, published to {} as {}: {}",
                    m.getMessageId(),
                    o.eventId(),
                    subscription,
                    deadLetters.getTopicNameString(),
                    id,
                    String.valueOf(o.failure()));
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } catch (ExecutionException | TimeoutException | RuntimeException e) {
            log.warn(
                    "could not dead-letter message {} to {}, nacked on {}: {}",
                    m.getMessageId(),
                    deadLetters.getTopicNameString(),
                    subscription,
                    e.toString());
            return false;
        }
    }

    private static String truncate(String s) {
        return s.length() <= 1024 ? s : s.substring(0, 1024);
    }

    private Delivery delivery(PubsubMessage m) {
        String eventId = m.getAttributesOrDefault(eventIdAttribute, null);
        if (eventId == null || eventId.isEmpty()) {
            throw new InvalidDeliveryException("message " + m.getMessageId() + " on " + subscription
                    + " has no '" + eventIdAttribute + "' attribute with the producer's event id; publish with"
                    + " PubSubPublisher or PubSubMessages, or set the attribute");
        }
        Integer counted = Subscriber.getDeliveryAttempt(m);
        int attempt = counted == null ? 1 : Math.max(1, counted);
        Map<String, String> headers = new HashMap<>(m.getAttributesMap());
        return Delivery.builder(eventId)
                .payload(m.getData().toByteArray())
                .headers(headers)
                .attempt(attempt)
                .redelivered(attempt > 1)
                .source("pubsub:" + subscription)
                .build();
    }

    /** Acks that Pub/Sub did not confirm (exactly-once delivery subscriptions); each such message comes again and is absorbed. */
    public long failedAcks() {
        return failedAcks.get();
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
     * Stops taking batches, waits for those in hand to finish and ack, nacks the buffer and what is kept because
     * another delivery held its claim (one more delivery attempt each: Pub/Sub hands it out again, and a
     * subscriber that finds the holder still working keeps it in turn), stops the subscriber.
     */
    @Override
    public void close() {
        running = false;
        driver.stop();
        for (Thread t : workers) {
            try {
                t.join(POLL.toMillis()
                        + batchWait.toMillis()
                        + Duration.ofMinutes(1).toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        driver.close();
        Subscriber s = subscriber;
        if (s != null) {
            s.stopAsync();
        }
        Received r;
        while ((r = buffer.poll()) != null) {
            r.reply().nack();
        }
        nackKept();
        if (s != null) {
            try {
                s.awaitTerminated(30, TimeUnit.SECONDS);
            } catch (TimeoutException | IllegalStateException e) {
                log.debug("subscriber on {} did not stop cleanly: {}", subscription, e.toString());
            }
        }
    }

    /**
     * Configures a {@link PubSubConsumer}. {@code subscription} and {@code consumer} are required;
     * setters check their argument at once, {@link #build()} checks combinations. Not thread-safe.
     */
    public static final class Builder {
        private ProjectSubscriptionName subscription;
        private IdempotentConsumer consumer;
        private int batchSize = DEFAULT_BATCH_SIZE;
        private Duration batchWait = DEFAULT_BATCH_WAIT;
        private Duration lease;
        private Duration ackDeadline;
        private int threads = DEFAULT_THREADS;
        private boolean ordered;
        private ConsumerSettings settings =
                ConsumerSettings.defaults("eventIdAttribute", OutboxMessage.EVENT_ID_HEADER);
        private com.google.cloud.pubsub.v1.Publisher deadLetters;
        private TransportChannelProvider channelProvider;
        private CredentialsProvider credentialsProvider;

        private Builder() {}

        /** The subscription: project id and subscription id (3 to 255 characters, starting with a letter). */
        public Builder subscription(String project, String subscription) {
            Objects.requireNonNull(project, "project");
            Objects.requireNonNull(subscription, "subscription");
            if (project.isBlank()) {
                throw new InvalidConfigurationException("project must not be blank");
            }
            if (!ID.matcher(subscription).matches()) {
                throw new InvalidConfigurationException(
                        "subscription must match " + ID.pattern() + ", but was '" + subscription + "'");
            }
            this.subscription = ProjectSubscriptionName.of(project, subscription);
            return this;
        }

        public Builder consumer(IdempotentConsumer consumer) {
            this.consumer = Objects.requireNonNull(consumer, "consumer");
            return this;
        }

        /** Messages per batch and per transaction, 1 to 10000; default {@value #DEFAULT_BATCH_SIZE}. */
        public Builder batchSize(int batchSize) {
            this.batchSize = ConsumerSettings.between("batchSize", batchSize, 1, 10_000);
            return this;
        }

        /** How long a batch waits to fill up after its first message; default 50 ms; zero takes what is there. */
        public Builder batchWait(Duration batchWait) {
            Objects.requireNonNull(batchWait, "batchWait");
            if (batchWait.isNegative()) {
                throw new InvalidConfigurationException("batchWait must not be negative, but was " + batchWait);
            }
            this.batchWait = batchWait;
            return this;
        }

        /**
         * The longest the work on one message may take, buffered and in its batch's transaction:
         * the client extends the ack deadline that long ({@code maxAckExtensionPeriod}); default
         * 5 min. Past it Pub/Sub redelivers, to this or another subscriber, and the claim absorbs
         * the copy. Not with {@link #orderedByKey()} ({@link #build()} refuses it): past the lease a
         * key's order no longer holds (see the class comment), so ordered mode extends the deadline for
         * as long as the work runs.
         */
        public Builder lease(Duration lease) {
            this.lease = ConsumerSettings.positive("lease", lease);
            return this;
        }

        /**
         * The longest ack deadline the client asks for on each extension (its max duration per ack
         * extension, which also sets the stream's deadline), 10 s to 600 s; default the client's (it
         * adapts the deadline to observed processing times, up to 10 min). A shorter one makes a
         * consumer that died without closing hand its messages on sooner.
         */
        public Builder ackDeadline(Duration ackDeadline) {
            ConsumerSettings.positive("ackDeadline", ackDeadline);
            if (ackDeadline.compareTo(Duration.ofSeconds(10)) < 0
                    || ackDeadline.compareTo(Duration.ofSeconds(600)) > 0) {
                throw new InvalidConfigurationException(
                        "ackDeadline must be between 10 s and 600 s (Pub/Sub's limits), but was " + ackDeadline);
            }
            this.ackDeadline = ackDeadline;
            return this;
        }

        /** Processing threads, each with its own batch and transaction, 1 to 64; default 1. */
        public Builder threads(int threads) {
            this.threads = ConsumerSettings.between("threads", threads, 1, 64);
            return this;
        }

        /**
         * Keeps each ordering key's order, also after a failure (see the class comment). Requires a
         * subscription with message ordering enabled and one thread; extends each message's ack
         * deadline for as long as its work runs, so no {@link #lease}.
         */
        public Builder orderedByKey() {
            this.ordered = true;
            return this;
        }

        /** Attribute with the producer's event id; default {@value OutboxMessage#EVENT_ID_HEADER}. */
        public Builder eventIdAttribute(String eventIdAttribute) {
            this.settings = settings.withEventId(eventIdAttribute);
            return this;
        }

        /**
         * A client publisher to the dead-letter topic: a permanently failed message is published
         * there (with {@value #FAILURE_ATTRIBUTE} and {@value #SOURCE_ATTRIBUTE}) and then acked.
         * Without one it is nacked, for the subscription's dead-letter policy to forward. The
         * caller owns (and shuts down) the publisher.
         */
        public Builder deadLetters(com.google.cloud.pubsub.v1.Publisher deadLetters) {
            this.deadLetters = Objects.requireNonNull(deadLetters, "deadLetters");
            return this;
        }

        /** The client's channel provider (an emulator: plaintext to {@code host:port}); default Google's endpoint. */
        public Builder channelProvider(TransportChannelProvider channelProvider) {
            this.channelProvider = Objects.requireNonNull(channelProvider, "channelProvider");
            return this;
        }

        /** The client's credentials (an emulator: {@code NoCredentialsProvider}); default application default credentials. */
        public Builder credentialsProvider(CredentialsProvider credentialsProvider) {
            this.credentialsProvider = Objects.requireNonNull(credentialsProvider, "credentialsProvider");
            return this;
        }

        /**
         * Pause after batches that failed outside the handler in a row, and between the tries of a message kept
         * because another delivery held its claim ({@code delay(n)} before the n-th, past {@code maxRetries} at the
         * cap: it is tried until the holder ends); default {@link AdapterDriver#DEFAULT_RECEIVE_RETRIES}.
         */
        public Builder receiveRetries(RetryPolicy policy) {
            this.settings = settings.withReceiveRetries(policy);
            return this;
        }

        /**
         * @throws InvalidConfigurationException naming what is missing or conflicting, or a
         *     {@link #lease} with {@link #orderedByKey()}
         */
        public PubSubConsumer build() {
            if (subscription == null || consumer == null) {
                throw new InvalidConfigurationException("subscription and consumer are required, but "
                        + (subscription == null ? "subscription " : "") + (consumer == null ? "consumer " : "")
                        + "was not set");
            }
            if (ordered && threads > 1) {
                // two threads could take two messages of one key in two batches and commit them out of order
                throw new InvalidConfigurationException(
                        "orderedByKey() runs on one thread, but threads was " + threads + "; drop threads(…)");
            }
            if (ordered && lease != null) {
                throw new InvalidConfigurationException("lease(" + lease + ") with orderedByKey() on " + subscription
                        + ": a key's order holds only while each message is settled before its ack deadline lapses"
                        + " (each lapse is a delivery attempt; once the subscription's dead-letter policy has forwarded"
                        + " the message, Pub/Sub hands the key's next message to a subscriber that applies it before"
                        + " this one commits the stale message); orderedByKey() extends the deadline for as long as"
                        + " the work runs: drop lease(…)");
            }
            return new PubSubConsumer(this);
        }
    }
}
