package dev.once.rabbitmq;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.Recoverable;
import com.rabbitmq.client.RecoveryListener;
import com.rabbitmq.client.ShutdownListener;
import com.rabbitmq.client.ShutdownSignalException;
import dev.once.ClaimHeldOnThreadException;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryPolicy;
import dev.once.adapter.AdapterDriver;
import dev.once.adapter.Broker;
import dev.once.adapter.ConsumerSettings;
import dev.once.adapter.Processed;
import dev.once.adapter.Verdict;
import dev.once.outbox.OutboxMessage;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.PriorityQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Consumes one RabbitMQ queue with manual acknowledgements and runs every message through an
 * {@link IdempotentConsumer}. The prefetch is the batch window: whatever has arrived, up to the
 * prefetch count, is processed in one database transaction, and only after the commit is it
 * settled: {@code basicAck} ({@code multiple} over runs of consecutive successes) for applied
 * and duplicate messages, {@code basicReject} without requeue for permanent failures, which the
 * broker routes to the queue's dead-letter exchange ({@code x-dead-letter-exchange}) or drops
 * when it has none.
 *
 * <p>Retries are spaced by one {@link RetryPolicy} ({@link Builder#retries}, default
 * {@link #DEFAULT_RETRIES}): a retryable failure is held unacknowledged for
 * {@link RetryPolicy#delay delay(attempt)}, then requeued ({@code basicNack(requeue)}), so a quorum
 * queue's {@code x-delivery-limit} counts spaced tries, not a burst. After the policy's last retry
 * the message is tried again at the policy's longest delay, or, with
 * {@link Builder#deadLetterAfterRetries()} (for a queue with a dead-letter exchange), dead-lettered by
 * the consumer itself ({@code basicReject}), which also bounds retries on a classic queue, where the
 * broker counts nothing; a quorum queue's delivery limit, if lower, dead-letters it first. A held message keeps its prefetch slot: during an outage the consumer
 * slows down instead of spinning.
 *
 * <p>A message whose claim another delivery holds ({@code IN_PROGRESS}: a redelivery while a slow holder
 * still works, as after a network partition that closed the holder's channel but not its transaction) is
 * not requeued: on a quorum queue every requeue counts toward {@code x-delivery-limit}, and at the limit
 * the broker dead-letters the message, or drops it without a dead-letter exchange, while the holder may
 * still roll back. It is kept unacknowledged instead (no multiple ack covers it) and processed again,
 * spaced by the policy's delays, until the holder has ended, then settled by what that try finds: acked
 * (the holder committed: duplicate; or it rolled back: applied now), or as any other outcome. Keeping it
 * ends only with its channel (the broker then requeues it, which on a quorum queue counts one delivery),
 * when the connection is lost or the consumer closes. It keeps its prefetch slot meanwhile. A claim held by
 * a suspended transaction of the worker's own thread ({@link ClaimHeldOnThreadException}), which cannot end
 * while it waits, is requeued after the policy's first delay instead.
 *
 * <p>A connection lost between commit and ack makes the broker requeue the message; the
 * redelivery is absorbed by the inbox as a duplicate. The event id is read from the header
 * {@value OutboxMessage#EVENT_ID_HEADER} (configurable), falling back to the AMQP
 * {@code message-id} property; the attempt is {@code x-delivery-count + 1} on quorum queues,
 * 2 for a message flagged {@code redelivered} elsewhere, 1 otherwise.
 *
 * <p>With the client's automatic recovery (its default) a lost connection does not stop the
 * consumer, also when it is lost while the consumer settles a batch: the broker requeues what was
 * unacknowledged, the client restores the channel and the subscription, and the consumer goes on
 * with the redeliveries (absorbed by the inbox); if the subscription is not restored (topology
 * recovery off) the consumer stops. Without automatic recovery a lost connection stops it. The
 * broker cancelling the subscription (queue deleted) stops it too.
 *
 * <p>A batch whose processing failed outside the handler is requeued ({@code basicNack}) before
 * anything received after it is acknowledged. A worker that dies (an {@code Error}) or a channel
 * that shuts down stops the consumer visibly: {@link #isRunning()} turns false, {@link #failure()}
 * says why, and the channel is closed so the broker requeues whatever was unacknowledged; build a
 * new consumer to go on.
 *
 * <p>Runs on the {@link AdapterDriver}. Uses one channel of its own on the given connection and one worker thread. Thread-safe;
 * {@link #start()} once, {@link #close()} cancels, finishes the batch in hand and closes the channel
 * (the broker requeues what was delivered but not processed).
 */
public final class RabbitConsumer implements AutoCloseable {

    /** Unacknowledged messages the broker may push, and the largest batch per transaction. */
    public static final int DEFAULT_PREFETCH = 50;

    /**
     * Spacing of retryable failures: 1 s doubling to 1 min, equal jitter, 10 retries (about five
     * minutes before the consumer dead-letters a message that keeps failing).
     */
    public static final RetryPolicy DEFAULT_RETRIES = RetryPolicy.builder()
            .initialDelay(Duration.ofSeconds(1))
            .maxDelay(Duration.ofMinutes(1))
            .jitter(RetryPolicy.Jitter.EQUAL)
            .maxRetries(10)
            .build();

    /** Event ids whose failures this consumer counts, for queues without a delivery count. */
    private static final int COUNTED_FAILURES = 10_000;

    private static final Duration RESUBSCRIBE_GRACE = Duration.ofSeconds(10);

    /** How long a channel whose write failed may take to close with its connection. */
    private static final Duration CLOSE_GRACE = Duration.ofSeconds(5);

    private static final Logger log = LoggerFactory.getLogger(RabbitConsumer.class);
    private static final AtomicInteger INSTANCES = new AtomicInteger();

    private final Connection connection;
    private final String queue;
    private final IdempotentConsumer consumer;
    private final RetryPolicy receiveRetries;
    private final RetryPolicy retries;
    private final boolean deadLetterAfterRetries;
    private final int prefetch;
    private final String eventIdHeader;
    private final BlockingQueue<Received> arrived = new LinkedBlockingQueue<>();
    private final AdapterDriver<Received> driver;
    private final Thread worker;
    private volatile Channel channel;
    private volatile String consumerTag;
    private volatile boolean running;
    private volatile boolean subscribed;
    private volatile long recoveredAt;
    /** Shutdowns of the channel so far: a message held before one is no longer this consumer's to settle. */
    private final AtomicLong shutdowns = new AtomicLong();

    private RecoveryListener recovery;
    // Worker thread only: messages held for a delayed requeue, soonest first, and failures per event id.
    private final PriorityQueue<Held> held = new PriorityQueue<>(Comparator.comparingLong(Held::dueNanos));
    private final Map<String, Integer> failures = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Integer> eldest) {
            return size() > COUNTED_FAILURES;
        }
    };

    /** A message as it arrived; {@code epoch}: its channel's shutdowns then. */
    private record Received(Envelope envelope, AMQP.BasicProperties properties, byte[] body, long epoch) {}

    /**
     * A message held unacknowledged until {@code dueNanos}: then requeued, or, with a {@code delivery} (its
     * claim was held by another delivery), processed again; {@code epoch}: the channel's shutdowns when held.
     */
    private record Held(long tag, long dueNanos, Received message, Delivery delivery, int tries, long epoch) {
        // epoch: of the message's channel when it arrived

        Held(long tag, long dueNanos) {
            this(tag, dueNanos, null, null, 0, 0);
        }
    }

    private RabbitConsumer(Builder b) {
        this.connection = b.connection;
        this.queue = b.queue;
        this.consumer = b.consumer;
        this.receiveRetries = b.settings.receiveRetries();
        this.retries = b.retries;
        this.deadLetterAfterRetries = b.deadLetterAfterRetries;
        this.prefetch = b.prefetch;
        this.eventIdHeader = b.settings.eventId();
        String name = "once-rabbitmq-" + INSTANCES.incrementAndGet() + "-" + queue;
        this.driver = AdapterDriver.builder(name, consumer, new Rabbit())
                .receiveRetries(receiveRetries)
                .build();
        this.worker = new Thread(() -> driver.run(this::receive), name);
        this.worker.setDaemon(true);
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Opens the channel, sets the prefetch and starts consuming; returns this.
     *
     * @throws IOException if the channel cannot be opened or the queue does not exist
     */
    public synchronized RabbitConsumer start() throws IOException {
        if (running) {
            throw new IllegalStateException("RabbitConsumer on " + queue + " is already started");
        }
        Channel ch = connection.createChannel();
        // called in the shutdown, before isOpen() turns true again on recovery
        ch.addShutdownListener(cause -> shutdowns.incrementAndGet());
        ch.basicQos(prefetch);
        channel = ch;
        running = true;
        if (connection instanceof Recoverable r) {
            recovery = new RecoveryListener() {
                @Override
                public void handleRecovery(Recoverable recovered) {
                    recoveredAt = System.nanoTime();
                }

                @Override
                public void handleRecoveryStarted(Recoverable recovering) {}
            };
            r.addRecoveryListener(recovery);
        }
        worker.start();
        consumerTag = ch.basicConsume(queue, false, new DefaultConsumer(ch) {
            @Override
            public void handleConsumeOk(String tag) {
                consumerTag = tag; // also after the client restored the subscription on recovery
                subscribed = true;
            }

            @Override
            public void handleDelivery(String tag, Envelope envelope, AMQP.BasicProperties properties, byte[] body) {
                arrived.add(new Received(envelope, properties, body, shutdowns.get()));
            }

            @Override
            public void handleCancel(String tag) {
                subscribed = false;
                if (running && driver.isRunning()) {
                    driver.fail(new IllegalStateException("the broker cancelled the subscription of consumer on queue '"
                            + queue + "' (queue deleted, or its leader failed over); build a new consumer"));
                }
            }

            @Override
            public void handleShutdownSignal(String tag, ShutdownSignalException sig) {
                subscribed = false;
                if (!running || !driver.isRunning()) {
                    return;
                }
                if (connection instanceof Recoverable && lostWithItsConnection(sig)) {
                    // The client restores the connection, the channel and this subscription; the broker
                    // has requeued whatever was unacknowledged, so what arrived before is dropped and
                    // comes back as redeliveries. Settlements of old delivery tags are not sent by the
                    // client (they would close the new channel), and a held requeue of one is moot.
                    arrived.clear();
                    log.warn(
                            "connection of consumer on {} lost ({}); waiting for the client's automatic recovery",
                            queue,
                            sig.getMessage());
                    return;
                }
                // Unacknowledged messages are requeued by the broker and absorbed on redelivery;
                // without a channel this consumer is dead, and says so.
                driver.fail(new IllegalStateException(
                        "channel of consumer on " + queue + " shut down: " + sig.getMessage(), sig));
            }
        });
        return this;
    }

    /** What RabbitMQ makes different: headers, {@code x-delivery-count}, and settling by delivery tag. */
    private final class Rabbit implements Broker<Received> {

        @Override
        public Delivery delivery(Received r) {
            return RabbitConsumer.this.delivery(r);
        }

        @Override
        public String describe(Received r) {
            return "tag-" + r.envelope().getDeliveryTag();
        }

        @Override
        public void settle(List<Processed<Received>> processed) throws IOException {
            RabbitConsumer.this.settle(processed);
        }

        @Override
        public void abandon(Throwable cause) {
            // Closing the channel makes the broker requeue every unacknowledged message, so no
            // later cumulative ack can cover the batch that was in hand.
            abort(channel);
        }
    }

    private List<Received> receive() throws InterruptedException, IOException {
        checkResubscribed();
        requeueDue();
        long waitMillis = 200;
        Held next = held.peek();
        if (next != null) {
            waitMillis = Math.max(1, Math.min(waitMillis, (next.dueNanos() - System.nanoTime()) / 1_000_000));
        }
        Received first = arrived.poll(waitMillis, TimeUnit.MILLISECONDS);
        if (first == null || !driver.isRunning()) {
            return List.of();
        }
        List<Received> batch = new ArrayList<>(prefetch);
        batch.add(first);
        arrived.drainTo(batch, prefetch - 1);
        if (!channel.isOpen()) {
            // Delivered on a channel that has closed since (its shutdown signal reaches handleShutdownSignal
            // later, on another thread): the broker has requeued these and may have handed them to another
            // consumer already. Processed here they would race that delivery, and a message the other
            // consumer dead-letters could still be applied here; their redeliveries come back instead.
            return List.of();
        }
        return batch;
    }

    private Delivery delivery(Received r) {
        Map<String, Object> raw =
                r.properties().getHeaders() == null ? Map.of() : r.properties().getHeaders();
        Map<String, String> headers = new HashMap<>();
        raw.forEach((k, v) -> {
            if (v != null) {
                headers.put(k, v.toString()); // LongString and numbers print as their text
            }
        });
        String eventId = headers.getOrDefault(eventIdHeader, r.properties().getMessageId());
        if (eventId == null) {
            throw new InvalidDeliveryException("message " + r.envelope().getDeliveryTag() + " on " + queue
                    + " has neither a '" + eventIdHeader + "' header nor a message-id property with the producer's"
                    + " event id; publish with RabbitPublisher or set one of them");
        }
        int attempt = 1;
        Object count = raw.get("x-delivery-count");
        if (count instanceof Number n) {
            attempt = n.intValue() + 1;
        } else if (r.envelope().isRedeliver()) {
            attempt = 2;
        }
        return Delivery.builder(eventId)
                .payload(r.body())
                .headers(headers)
                .attempt(attempt)
                .redelivered(r.envelope().isRedeliver() || attempt > 1)
                .source("rabbitmq:" + queue)
                .build();
    }

    /**
     * Stops the consumer when the client recovered the connection but not the subscription
     * (topology recovery off). The client confirms a restored subscription asynchronously, after
     * it reports the recovery, so the check waits a grace period before it concludes.
     */
    private void checkResubscribed() {
        long at = recoveredAt;
        if (at == 0) {
            return;
        }
        if (subscribed) {
            recoveredAt = 0;
        } else if (System.nanoTime() - at > RESUBSCRIBE_GRACE.toNanos()) {
            driver.fail(new IllegalStateException("connection of consumer on " + queue + " recovered, but not its"
                    + " subscription within " + RESUBSCRIBE_GRACE + " (is topology recovery off?); build a new"
                    + " consumer"));
        }
    }

    /**
     * Requeues the held messages whose retry delay is over, and processes again those whose claim another
     * delivery held, settling each by what it finds; worker thread.
     */
    private void requeueDue() throws IOException {
        Channel ch = channel;
        long now = System.nanoTime();
        while (!held.isEmpty() && held.peek().dueNanos() - now <= 0) {
            Held h = held.poll();
            if (h.delivery() != null) {
                tryAgain(ch, h);
                continue;
            }
            try {
                ch.basicNack(h.tag(), false, true);
            } catch (IOException | RuntimeException e) {
                throw unsettled(ch, e); // as in settle
            }
        }
    }

    /**
     * Processes {@code h}, whose claim another delivery held, again, unless its channel has shut down since it
     * was held (the broker has requeued it, maybe to another consumer); settles it by the outcome, which holds
     * it again while the claim is still held.
     */
    private void tryAgain(Channel ch, Held h) throws IOException {
        if (!ch.isOpen() || shutdowns.get() != h.epoch() || !driver.isRunning()) {
            return;
        }
        Outcome o = driver.processAgain(h.delivery());
        settle(List.of(new Processed<>(h.message(), h.delivery(), o)), h.tries());
    }

    private void settle(List<Processed<Received>> processed) throws IOException {
        settle(processed, 0);
    }

    /**
     * @param tries how often a message whose claim another delivery holds was tried before ({@code processed} is
     *              then that one message)
     */
    private void settle(List<Processed<Received>> processed, int tries) throws IOException {
        List<Long> tags = new ArrayList<>(processed.size());
        List<Verdict> verdicts = new ArrayList<>(processed.size());
        Map<Long, Duration> delays = new HashMap<>();
        Map<Long, Processed<Received>> inProgress = new HashMap<>();
        List<Outcome> gaveUp = new ArrayList<>();
        for (Processed<Received> p : processed) {
            tags.add(p.message().envelope().getDeliveryTag());
            Verdict verdict = p.verdict();
            Duration delay = null;
            Outcome o = p.outcome();
            if (verdict == Verdict.ACKNOWLEDGE) {
                failures.remove(o.eventId());
            } else if (AdapterDriver.heldElsewhere(o)) {
                // kept and tried again, not requeued: a requeue counts toward a quorum queue's delivery limit
                delay = retries.delay(tries + 1);
                inProgress.put(p.message().envelope().getDeliveryTag(), p);
                if (tries == 0) {
                    log.info(
                            "message {} on {} (attempt {}) is in progress in another delivery; kept unacknowledged"
                                    + " and tried again until that one ends",
                            o.eventId(),
                            queue,
                            p.delivery().attempt());
                }
            } else if (o.status() == Status.IN_PROGRESS) {
                delay = retries.delay(1); // this thread's own transaction holds it: waiting here would never end
            } else if (o.status() == Status.FAILED_RETRYABLE) {
                // the broker's count where it keeps one (quorum queues) or this process's count of the
                // event's failures, whichever is larger: copies of one event share the latter
                int attempt = Math.max(p.delivery().attempt(), failures.merge(o.eventId(), 1, Integer::sum));
                if (retries.allowsRetry(attempt) || !deadLetterAfterRetries) {
                    // past the last retry without the opt-in: keep trying at the policy's cap. A reject
                    // would drop the message on a queue without a dead-letter exchange, and a database
                    // outage longer than the policy would drop every healthy message with it.
                    delay = retries.delay(attempt);
                } else {
                    verdict = Verdict.DEAD_LETTER;
                    failures.remove(o.eventId());
                    gaveUp.add(o);
                }
            }
            verdicts.add(verdict);
            if (delay != null) {
                delays.put(p.message().envelope().getDeliveryTag(), delay);
            }
        }
        Channel ch = channel;
        long lowestHeld = held.isEmpty()
                ? Long.MAX_VALUE
                : held.stream().mapToLong(Held::tag).min().getAsLong();
        for (Settlement s : Settlement.plan(tags, verdicts, lowestHeld)) {
            try {
                switch (s.kind()) {
                    case ACK_MULTIPLE -> ch.basicAck(s.tag(), true);
                    case ACK -> ch.basicAck(s.tag(), false);
                    case REQUEUE -> {
                        long due = System.nanoTime() + delays.get(s.tag()).toNanos();
                        Processed<Received> p = inProgress.get(s.tag());
                        held.add(
                                p == null
                                        ? new Held(s.tag(), due)
                                        : new Held(
                                                s.tag(),
                                                due,
                                                p.message(),
                                                p.delivery(),
                                                tries + 1,
                                                p.message().epoch()));
                    }
                    case DEAD_LETTER -> ch.basicReject(s.tag(), false);
                }
            } catch (IOException | RuntimeException e) {
                throw unsettled(ch, e);
            }
        }
        for (Processed<Received> p : processed) {
            Outcome o = p.outcome();
            if (o.status() == Status.FAILED_PERMANENT) {
                log.warn(
                        "message {} on {} failed permanently and was rejected to the dead-letter exchange: {}",
                        o.eventId(),
                        queue,
                        String.valueOf(o.failure()));
            }
        }
        for (Outcome o : gaveUp) {
            log.warn(
                    "message {} on {} still failed after the last of {} retries and was rejected to the dead-letter"
                            + " exchange: {}",
                    o.eventId(),
                    queue,
                    retries.maxRetries(),
                    String.valueOf(o.failure()));
        }
    }

    /**
     * After a settlement (or delayed requeue) on {@code ch} failed with {@code e}: returns what to throw. A
     * settlement that did not happen must not be overtaken by a later cumulative ack on the same channel, so
     * that channel must be gone; the broker then requeues every message unacknowledged on it, and the inbox
     * absorbs the redeliveries. A channel lost with its connection under automatic recovery is gone already,
     * and the client restores the connection, a new channel and the subscription (and drops settlements of the
     * dead channel's tags): the consumer goes on, as a user expects after a network blip. Such a channel is not
     * aborted: the client does not restore a channel the application closed, and the consumer would receive
     * nothing more. Any other failure (no automatic recovery, the channel closed by the broker, or still open)
     * aborts the channel, and its shutdown stops the consumer visibly.
     */
    private IOException unsettled(Channel ch, Exception e) {
        ShutdownSignalException why = !(connection instanceof Recoverable)
                ? null
                : e instanceof ShutdownSignalException closed ? closed : e instanceof IOException ? closing(ch) : null;
        if (lostWithItsConnection(why)) {
            log.warn(
                    "connection of consumer on {} lost while settling ({}); the broker requeues what was not"
                            + " settled, waiting for the client's automatic recovery",
                    queue,
                    e.toString());
            held.clear(); // held on the dead channel, requeued by the broker: a requeue of one is moot
        } else {
            abort(ch);
        }
        return e instanceof IOException io ? io : new IOException(e);
    }

    /**
     * How {@code ch} closes, after a write on it failed while it was open (the client's automatic recovery closes
     * the socket of a failed write, so the connection's loss follows at once); null if it is still open after
     * {@link #CLOSE_GRACE}.
     */
    private static ShutdownSignalException closing(Channel ch) {
        CompletableFuture<ShutdownSignalException> closed = new CompletableFuture<>();
        ShutdownListener listener = closed::complete;
        ch.addShutdownListener(listener); // called at once if it is closed already
        try {
            return closed.get(CLOSE_GRACE.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (ExecutionException | TimeoutException e) {
            return null;
        } finally {
            ch.removeShutdownListener(listener);
        }
    }

    /** A shutdown the client's automatic recovery repairs: the connection's, and not by this application. */
    private static boolean lostWithItsConnection(ShutdownSignalException sig) {
        return sig != null && sig.isHardError() && !sig.isInitiatedByApplication();
    }

    private void abort(Channel ch) {
        // also when already closed: aborting a recoverable channel makes the client forget it, so
        // automatic recovery cannot restore a subscription that nobody processes any more
        if (ch != null) {
            try {
                ch.abort();
            } catch (IOException | RuntimeException e) {
                log.debug("abort of channel on {} failed: {}", queue, e.toString());
            }
        }
    }

    /** True until {@link #close()}, or until the worker or the channel died (then {@link #failure()} says why). */
    public boolean isRunning() {
        return running && driver.isRunning();
    }

    /** What stopped the consumer when it was not closed: an error in the worker, or the channel shut down. */
    public Optional<Throwable> failure() {
        return driver.failure();
    }

    /** Cancels the subscription, finishes the batch in hand, closes the channel. */
    @Override
    public void close() throws IOException {
        Channel ch = channel;
        if (ch == null) {
            return;
        }
        try {
            if (ch.isOpen() && consumerTag != null) {
                ch.basicCancel(consumerTag);
            }
        } catch (IOException | RuntimeException e) {
            log.debug("cancel of consumer on {} failed: {}", queue, e.toString());
        }
        running = false;
        if (recovery != null) {
            ((Recoverable) connection).removeRecoveryListener(recovery);
        }
        driver.stop();
        try {
            worker.join(Duration.ofMinutes(1).toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            if (ch.isOpen()) {
                ch.close(); // the broker requeues what is still held for a delayed requeue
            } else {
                abort(ch);
            }
        } catch (TimeoutException | RuntimeException e) {
            log.debug("close of channel on {} failed: {}", queue, e.toString());
        }
        driver.close();
    }

    /**
     * Configures a {@link RabbitConsumer}. {@code connection}, {@code queue} and {@code consumer}
     * are required; setters check their argument at once. Not thread-safe.
     */
    public static final class Builder {
        private Connection connection;
        private String queue;
        private IdempotentConsumer consumer;
        private int prefetch = DEFAULT_PREFETCH;
        private ConsumerSettings settings = ConsumerSettings.defaults("eventIdHeader", OutboxMessage.EVENT_ID_HEADER);
        private RetryPolicy retries = DEFAULT_RETRIES;
        private boolean deadLetterAfterRetries;

        private Builder() {}

        public Builder connection(Connection connection) {
            this.connection = Objects.requireNonNull(connection, "connection");
            return this;
        }

        public Builder queue(String queue) {
            this.queue = Objects.requireNonNull(queue, "queue");
            return this;
        }

        public Builder consumer(IdempotentConsumer consumer) {
            this.consumer = Objects.requireNonNull(consumer, "consumer");
            return this;
        }

        /** Prefetch count and largest batch, 1 to 65535; default {@value #DEFAULT_PREFETCH}. */
        public Builder prefetch(int prefetch) {
            this.prefetch = ConsumerSettings.between("prefetch", prefetch, 1, 65_535);
            return this;
        }

        /** Header with the producer's event id; default {@value OutboxMessage#EVENT_ID_HEADER}. */
        public Builder eventIdHeader(String eventIdHeader) {
            this.settings = settings.withEventId(eventIdHeader);
            return this;
        }

        /**
         * Pause after failed receives (and batches that failed outside the handler) in a row;
         * default {@link AdapterDriver#DEFAULT_RECEIVE_RETRIES}; the loop never gives up, past the
         * last retry it waits the cap.
         */
        public Builder receiveRetries(RetryPolicy policy) {
            this.settings = settings.withReceiveRetries(policy);
            return this;
        }

        /**
         * Spacing and number of retries of a retryable failure; default {@link #DEFAULT_RETRIES}. A
         * message is held unacknowledged for {@code policy.delay(attempt)}, then requeued; past
         * {@code policy.maxRetries()} it is rejected to the queue's dead-letter exchange with
         * {@link #deadLetterAfterRetries()}, else tried again at the longest delay. The attempt
         * is the larger of the broker's delivery count (quorum queues only) and this process's count
         * of the event's failures. That count is kept per event id, not per message: copies of one
         * event (a producer's retry) share it, so a copy can be dead-lettered after fewer deliveries
         * of its own; it lives in memory, so a restart or another consumer of a classic queue
         * starts over.
         */
        public Builder retries(RetryPolicy policy) {
            this.retries = Objects.requireNonNull(policy, "policy");
            return this;
        }

        /**
         * Rejects a message still failing retryably after the policy's last retry, so the broker routes
         * it to the queue's dead-letter exchange. Off by default: the message is then tried again at the
         * policy's longest delay for as long as it fails, because on a queue without a dead-letter
         * exchange a reject deletes it, and an outage longer than the policy would delete healthy
         * messages. Turn it on only for a queue declared with {@code x-dead-letter-exchange}.
         */
        public Builder deadLetterAfterRetries() {
            this.deadLetterAfterRetries = true;
            return this;
        }

        /** @throws InvalidConfigurationException naming what is missing */
        public RabbitConsumer build() {
            if (connection == null || queue == null || consumer == null) {
                throw new InvalidConfigurationException("connection, queue and consumer are required, but "
                        + (connection == null ? "connection " : "") + (queue == null ? "queue " : "")
                        + (consumer == null ? "consumer " : "") + "was not set");
            }
            return new RabbitConsumer(this);
        }
    }
}
