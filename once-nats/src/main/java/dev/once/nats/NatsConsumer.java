package dev.once.nats;

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
import io.nats.client.Connection;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamManagement;
import io.nats.client.JetStreamSubscription;
import io.nats.client.Message;
import io.nats.client.PullSubscribeOptions;
import io.nats.client.api.AckPolicy;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.ConsumerInfo;
import io.nats.client.impl.Headers;
import io.nats.client.impl.NatsMessage;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Pulls from a durable JetStream consumer and runs every message through an
 * {@link IdempotentConsumer}: fetch a batch, process it in one database transaction, and only
 * after the commit {@code ack} the applied and duplicate messages. While a batch is still
 * working, a heartbeat sends {@code inProgress()} for each of its messages, so long work does not
 * outlive the ack wait; a redelivery that happens anyway (ack wait expired, crash before the ack)
 * is absorbed by the inbox as a duplicate. Retryable failures are {@code nak}ed with the delay of
 * one {@link RetryPolicy} ({@link Builder#retries}, default {@link #DEFAULT_RETRIES}) for the
 * message's delivery count, permanent ones {@code term}inated (JetStream stops delivering them). With a
 * {@linkplain Builder#deadLetterSubject dead-letter subject} a permanent failure is first published
 * there (its payload, its headers, and {@value #DEAD_LETTER_REASON}, {@value #DEAD_LETTER_STREAM},
 * {@value #DEAD_LETTER_SUBJECT}, {@value #DEAD_LETTER_SEQUENCE}, {@value #DEAD_LETTER_CONSUMER}) and
 * terminated only once JetStream acknowledged the dead letter; without one it is terminated with a
 * log line only, and gone.
 *
 * <p>JetStream's {@code max_deliver} is respected: a durable that has one keeps it, and
 * {@link Builder#deadLetterAfterRetries()} sets it to the policy's retries + 1. At that limit the
 * server stops delivering a message and only publishes an advisory, so the last delivery of a
 * message that still fails retryably is dead-lettered by this consumer (without a dead-letter
 * subject it is logged and left to the server, which drops it). Without a limit a retryable failure
 * is tried until it succeeds, past the policy's last retry at its longest delay.
 *
 * <p>{@code max_deliver} counts deliveries, not failures, so a delivery whose claim another delivery
 * holds ({@code IN_PROGRESS}: a redelivery while a slow holder works) is not {@code nak}ed, which would
 * spend the message's deliveries on nothing and let JetStream drop it while the holder may still roll
 * back. It is kept in hand ({@code inProgress()}) and tried again until the holder ends, then settled
 * by what that try finds: applied (the holder rolled back) or duplicate (it committed). The wait ends
 * early only while the message has deliveries left: when the connection is closed (JetStream redelivers
 * after the ack wait) or the consumer closes ({@code nak}ed). On the last delivery {@code max_deliver}
 * allows, JetStream delivers it no more, so closing waits for the holder, and so does a closed
 * connection: the event is applied if the holder rolled back, though the ack cannot be sent.
 *
 * <p>On {@link #start()} the durable pull consumer is created, or updated to this configuration
 * (explicit acks, the {@linkplain Builder#ackWait ack wait}, the optional filter subject; other
 * settings of an existing durable, such as {@code max_deliver} and {@code backoff}, are kept). The
 * event id is read from the header {@value OutboxMessage#EVENT_ID_HEADER} (configurable),
 * falling back to {@code Nats-Msg-Id}; JetStream's delivery count is reported as the attempt.
 * nats-server before 2.10.14 can hand a message out again with delivery count 1, acknowledged or not
 * (nats-server#5305): a delivery of its own, absorbed by the inbox as a duplicate, acked once, and
 * reported as a first delivery.
 * Any number of {@code NatsConsumer}s may share one durable (competing consumers).
 *
 * <p>Runs on the {@link AdapterDriver}: a batch whose processing fails outside the handler is
 * {@code nak}ed and the loop backs off; an unexpected failure stops the consumer, and
 * {@link #isRunning()} and {@link #failure()} report it.
 *
 * <p>One fetch thread. Thread-safe; {@link #start()} once, {@link #close()} stops fetching, lets the
 * batch in hand finish and ack, and returns.
 */
public final class NatsConsumer implements AutoCloseable {

    /** Messages per fetch and per transaction. */
    public static final int DEFAULT_BATCH_SIZE = 50;
    /** How long one fetch waits for a full batch. */
    public static final Duration DEFAULT_FETCH_WAIT = Duration.ofSeconds(1);
    /** How long JetStream waits for an ack before it redelivers. */
    public static final Duration DEFAULT_ACK_WAIT = Duration.ofSeconds(30);
    /**
     * Spacing of retryable failures: 1 s doubling to 1 min, equal jitter, 10 retries (with
     * {@link Builder#deadLetterAfterRetries()}: {@code max_deliver} 11, about five minutes).
     */
    public static final RetryPolicy DEFAULT_RETRIES = RetryPolicy.builder()
            .initialDelay(Duration.ofSeconds(1))
            .maxDelay(Duration.ofMinutes(1))
            .jitter(RetryPolicy.Jitter.EQUAL)
            .maxRetries(10)
            .build();
    /** Dead-letter header: why the message failed permanently. */
    public static final String DEAD_LETTER_REASON = "once-dead-letter-reason";
    /** Dead-letter header: the stream the message came from. */
    public static final String DEAD_LETTER_STREAM = "once-dead-letter-stream";
    /** Dead-letter header: the subject the message was published to. */
    public static final String DEAD_LETTER_SUBJECT = "once-dead-letter-subject";
    /** Dead-letter header: the message's sequence in its stream. */
    public static final String DEAD_LETTER_SEQUENCE = "once-dead-letter-sequence";
    /** Dead-letter header: the durable that gave up on it. */
    public static final String DEAD_LETTER_CONSUMER = "once-dead-letter-consumer";
    /** Header read before {@code Nats-Msg-Id}. */
    public static final String NATS_MSG_ID = "Nats-Msg-Id";

    /** JetStream's API error code for a consumer that does not exist. */
    private static final int CONSUMER_NOT_FOUND = 10014;

    private static final Logger log = LoggerFactory.getLogger(NatsConsumer.class);
    private static final AtomicInteger INSTANCES = new AtomicInteger();
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_-]{1,255}");
    private static final Pattern DEAD_LETTER_SUBJECT_PATTERN =
            Pattern.compile("[A-Za-z0-9_-]{1,255}(\\.[A-Za-z0-9_-]{1,255}){0,31}");

    private final Connection connection;
    private final String stream;
    private final String durable;
    private final String filterSubject;
    private final IdempotentConsumer consumer;
    private final RetryPolicy receiveRetries;
    private final int batchSize;
    private final Duration fetchWait;
    private final Duration ackWait;
    private final RetryPolicy retries;
    private final boolean deadLetterAfterRetries;
    private final boolean heartbeat;
    private final String eventIdHeader;
    private final String deadLetterSubject;
    private final AdapterDriver<Message> driver;
    private final Thread fetcher;
    private final Duration keepAliveEvery;
    /** Counted down by {@link #close()}: a delivery waiting for its claim's holder stops waiting when it can. */
    private final CountDownLatch closing = new CountDownLatch(1);
    /** Sends {@code inProgress()} for the deliveries waiting for their claims' holders; started on the first such wait. */
    private ScheduledExecutorService keepAlive;

    private volatile JetStreamSubscription subscription;
    /** The durable's {@code max_deliver} as the server holds it after {@link #start()}; 0 or less: none. */
    private volatile long maxDeliver;

    private volatile boolean running;

    private NatsConsumer(Builder b) {
        this.connection = b.connection;
        this.stream = b.stream;
        this.durable = b.durable;
        this.filterSubject = b.filterSubject;
        this.consumer = b.consumer;
        this.receiveRetries = b.settings.receiveRetries();
        this.batchSize = b.batchSize;
        this.fetchWait = b.fetchWait;
        this.ackWait = b.ackWait;
        this.retries = b.retries;
        this.deadLetterAfterRetries = b.deadLetterAfterRetries;
        this.heartbeat = b.settings.heartbeat();
        this.eventIdHeader = b.settings.eventId();
        this.deadLetterSubject = b.deadLetterSubject;
        int n = INSTANCES.incrementAndGet();
        String name = "once-nats-" + n + "-" + stream + "-" + durable;
        AdapterDriver.Builder<Message> loop =
                AdapterDriver.builder(name, consumer, new Nats()).receiveRetries(receiveRetries);
        if (heartbeat) {
            loop.heartbeat(Duration.ofMillis(Math.max(1, ackWait.toMillis() / 3)));
        }
        this.driver = loop.build();
        this.fetcher = new Thread(() -> this.driver.run(() -> subscription.fetch(batchSize, fetchWait)), name);
        this.fetcher.setDaemon(true);
        this.keepAliveEvery = Duration.ofMillis(Math.max(1, ackWait.toMillis() / 3));
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Creates or updates the durable pull consumer, subscribes and starts fetching; returns this.
     *
     * @throws IOException          if the server cannot be reached
     * @throws JetStreamApiException if the stream does not exist or refuses the consumer configuration
     */
    public synchronized NatsConsumer start() throws IOException, JetStreamApiException {
        if (running) {
            throw new IllegalStateException("NatsConsumer " + durable + " on " + stream + " is already started");
        }
        JetStreamManagement jsm = connection.jetStreamManagement();
        ConsumerConfiguration existing = null;
        try {
            existing = jsm.getConsumerInfo(stream, durable).getConsumerConfiguration();
        } catch (JetStreamApiException e) {
            if (e.getApiErrorCode() != CONSUMER_NOT_FOUND) {
                throw e;
            }
        }
        // Build on the durable's own settings: an update without max_deliver would reset the limit
        // the user set to unlimited.
        ConsumerConfiguration.Builder config = ConsumerConfiguration.builder(existing)
                .durable(durable)
                .ackPolicy(AckPolicy.Explicit)
                .ackWait(ackWait);
        if (filterSubject != null) {
            config.filterSubject(filterSubject);
        }
        if (deadLetterAfterRetries) {
            config.maxDeliver(retries.maxRetries() + 1L);
        }
        ConsumerInfo info = jsm.addOrUpdateConsumer(stream, config.build());
        maxDeliver = info.getConsumerConfiguration().getMaxDeliver();
        subscription = connection.jetStream().subscribe(null, PullSubscribeOptions.bind(stream, durable));
        running = true;
        fetcher.start();
        return this;
    }

    /** What JetStream makes different: headers, the delivery count, ack / nak with delay / term per message. */
    private final class Nats implements Broker<Message> {

        @Override
        public Delivery delivery(Message m) {
            return NatsConsumer.this.delivery(m);
        }

        @Override
        public String describe(Message m) {
            return m.getSubject() + "#" + m.metaData().streamSequence();
        }

        /**
         * Settles every message of the batch, then waits for the claims held by others ({@code IN_PROGRESS}) one
         * after the other and settles each by the try that found its holder ended. JetStream acknowledges per
         * message, so settling the rest first is safe, and their acks do not wait for a holder. The wait runs on
         * the one fetch thread and holds up the next fetch: acceptable because {@code IN_PROGRESS} is rare (a
         * redelivery while the holder still works, typically past the ack wait) and short (the holder is one
         * database transaction); the alternative, a {@code nak}, spends {@code max_deliver} on nothing. One
         * {@code inProgress()} beat covers every held message until it is settled, the ones waiting their turn
         * too: behind a holder that outlives the ack wait, JetStream would hand them out again.
         */
        @Override
        public void settle(List<Processed<Message>> processed) {
            List<Processed<Message>> held = new ArrayList<>();
            for (Processed<Message> p : processed) {
                if (AdapterDriver.heldElsewhere(p.outcome()) && p.delivery() != null) {
                    held.add(p);
                } else {
                    NatsConsumer.this.settle(p.message(), p.outcome());
                }
            }
            if (held.isEmpty()) {
                return;
            }
            List<Message> inHand = new CopyOnWriteArrayList<>();
            held.forEach(p -> inHand.add(p.message()));
            ScheduledFuture<?> beat = keepAlive()
                    .scheduleAtFixedRate(
                            () -> inHand.forEach(NatsConsumer::inProgress),
                            0,
                            keepAliveEvery.toMillis(),
                            TimeUnit.MILLISECONDS);
            try {
                for (Processed<Message> p : held) {
                    Outcome o = waitForHolder(p.message(), p.delivery(), p.outcome());
                    inHand.remove(p.message());
                    NatsConsumer.this.settle(p.message(), o);
                }
            } finally {
                beat.cancel(false);
                if (closing.getCount() == 0) {
                    stopKeepAlive();
                }
            }
        }

        @Override
        public void extend(List<Message> messages) {
            messages.forEach(NatsConsumer::inProgress);
        }
    }

    private void settle(Message m, Outcome o) {
        try {
            switch (Verdict.of(o)) {
                case ACKNOWLEDGE -> m.ack();
                case DEAD_LETTER -> {
                    if (deadLetterSubject == null) {
                        log.warn(
                                "message {} on {}/{} failed permanently and is terminated (no dead-letter subject): {}",
                                o.eventId(),
                                stream,
                                durable,
                                String.valueOf(o.failure()));
                        m.term();
                    } else if (deadLetter(m, o)) {
                        m.term();
                    } else {
                        m.nakWithDelay(retries.delay(delivered(m)));
                    }
                }
                case REDELIVER -> redeliver(m, o);
            }
        } catch (RuntimeException e) {
            // the connection is gone: JetStream redelivers after the ack wait and the inbox absorbs it
            log.warn(
                    "could not settle {} on {}/{} ({}); it is redelivered after the ack wait and absorbed",
                    o.eventId(),
                    stream,
                    durable,
                    e.toString());
        }
    }

    /**
     * Keeps {@code m}, whose claim another delivery holds, in hand and processes it again, backing off by the
     * policy (at most a heartbeat interval apart), until the holder has ended; returns the outcome of the try that
     * found it ended, or {@code IN_PROGRESS} when waiting stopped: the connection is closed or the consumer is
     * closing, and {@code max_deliver} leaves the message another delivery. The caller's beat sends
     * {@code inProgress()} meanwhile, so the ack wait does not run out and JetStream does not spend a delivery on it.
     */
    private Outcome waitForHolder(Message m, Delivery d, Outcome o) {
        long limit = maxDeliver;
        int delivered = delivered(m);
        boolean last = limit > 0 && delivered >= limit;
        log.info(
                "message {} on {}/{} (delivery {}) is in progress in another delivery; kept in hand and tried again"
                        + " until that one ends",
                o.eventId(),
                stream,
                durable,
                delivered);
        try {
            for (int tries = 1; AdapterDriver.heldElsewhere(o); tries++) {
                if (connection.getStatus() == Connection.Status.CLOSED && !last) {
                    return o; // nothing can be sent: JetStream redelivers it after the ack wait
                } // on the last delivery it does not: the try that finds the holder ended is the event's only chance
                long pause = Math.min(retries.delay(tries).toMillis(), keepAliveEvery.toMillis());
                if (closing.await(pause, TimeUnit.MILLISECONDS) && !last) {
                    return o; // nak'ed: another delivery is left
                }
                o = driver.processAgain(d);
            }
            return o;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return o;
        }
    }

    private synchronized void stopKeepAlive() {
        if (keepAlive != null) {
            keepAlive.shutdownNow();
        }
    }

    private synchronized ScheduledExecutorService keepAlive() {
        if (keepAlive == null || keepAlive.isShutdown()) {
            keepAlive = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, fetcher.getName() + "-in-progress");
                t.setDaemon(true);
                return t;
            });
        }
        return keepAlive;
    }

    /**
     * A retryable failure is {@code nak}ed with the policy's delay, except on the last delivery
     * {@code max_deliver} allows: JetStream would drop it then, so it is dead-lettered. A message
     * whose claim another delivery still held when {@link #waitForHolder} stopped waiting
     * ({@code IN_PROGRESS}: the consumer is closing, another delivery is left) is {@code nak}ed.
     */
    private void redeliver(Message m, Outcome o) {
        int delivered = delivered(m);
        long limit = maxDeliver;
        if (o.status() != Outcome.Status.FAILED_RETRYABLE) {
            // the consumer closes while the claim's holder still works: another consumer takes it over
            m.nak();
            return;
        }
        if (limit <= 0 || delivered < limit) {
            m.nakWithDelay(retries.delay(delivered));
            return;
        }
        if (deadLetterSubject == null) {
            log.warn(
                    "message {} on {}/{} still failed on delivery {} of max_deliver {} and is dropped by JetStream"
                            + " (no dead-letter subject; the server publishes a MAX_DELIVERIES advisory): {}",
                    o.eventId(),
                    stream,
                    durable,
                    delivered,
                    limit,
                    String.valueOf(o.failure()));
            m.nak();
        } else if (deadLetter(m, o)) {
            m.term();
        } else {
            log.error(
                    "message {} on {}/{} reached max_deliver {} and could not be dead-lettered: JetStream will not"
                            + " deliver it again; it stays in stream {} at sequence {}",
                    o.eventId(),
                    stream,
                    durable,
                    limit,
                    stream,
                    m.metaData().streamSequence());
            m.nak();
        }
    }

    private static int delivered(Message m) {
        return (int) Math.min(Integer.MAX_VALUE, Math.max(1, m.metaData().deliveredCount()));
    }

    /**
     * Publishes {@code m} to the dead-letter subject and waits for JetStream's acknowledgement;
     * false when the dead letter is not stored (no stream captures the subject, the server is
     * away), so the message is not terminated but tried again. A {@code Nats-Msg-Id} among the
     * original headers makes a repeated dead letter a duplicate the dead-letter stream drops.
     */
    private boolean deadLetter(Message m, Outcome o) {
        Headers headers = new Headers(m.getHeaders());
        headers.put(DEAD_LETTER_REASON, headerValue(String.valueOf(o.failure())));
        headers.put(DEAD_LETTER_STREAM, stream);
        headers.put(DEAD_LETTER_SUBJECT, m.getSubject());
        headers.put(DEAD_LETTER_SEQUENCE, Long.toString(m.metaData().streamSequence()));
        headers.put(DEAD_LETTER_CONSUMER, durable);
        try {
            connection
                    .jetStream()
                    .publish(NatsMessage.builder()
                            .subject(deadLetterSubject)
                            .headers(headers)
                            .data(m.getData())
                            .build());
        } catch (IOException | JetStreamApiException | RuntimeException e) {
            log.warn(
                    "could not dead-letter {} on {}/{} to {}: {}",
                    o.eventId(),
                    stream,
                    durable,
                    deadLetterSubject,
                    e.toString());
            return false;
        }
        log.warn(
                "message {} on {}/{} failed, was dead-lettered to {} and is terminated: {}",
                o.eventId(),
                stream,
                durable,
                deadLetterSubject,
                String.valueOf(o.failure()));
        return true;
    }

    /** NATS header values are printable ASCII on one line; the reason is cut to a readable length. */
    private static String headerValue(String s) {
        StringBuilder b = new StringBuilder(Math.min(s.length(), 1000));
        for (int i = 0; i < s.length() && b.length() < 1000; i++) {
            char c = s.charAt(i);
            b.append(c >= 0x20 && c < 0x7f ? c : ' ');
        }
        return b.toString();
    }

    private static void inProgress(Message m) {
        try {
            m.inProgress();
        } catch (RuntimeException e) {
            log.debug("inProgress failed: {}", e.toString());
        }
    }

    private Delivery delivery(Message m) {
        Map<String, String> headers = new HashMap<>();
        Headers h = m.getHeaders();
        if (h != null) {
            for (String key : h.keySet()) {
                headers.put(key, h.getFirst(key));
            }
        }
        String eventId = headers.containsKey(eventIdHeader) ? headers.get(eventIdHeader) : headers.get(NATS_MSG_ID);
        if (eventId == null) {
            throw new InvalidDeliveryException("message " + m.metaData().streamSequence() + " on stream " + stream
                    + " has neither a '" + eventIdHeader + "' nor a '" + NATS_MSG_ID + "' header with the producer's"
                    + " event id; publish with NatsPublisher or set one of them");
        }
        int attempt = delivered(m);
        return Delivery.builder(eventId)
                .payload(m.getData())
                .headers(headers)
                .attempt(attempt)
                .redelivered(attempt > 1)
                .source("nats:" + stream + "/" + m.getSubject())
                .build();
    }

    /** True from {@link #start()} until {@link #close()} or a fatal failure ({@link #failure()}). */
    public boolean isRunning() {
        return running && driver.isRunning();
    }

    /** What stopped the consumer when it was not closed. */
    public Optional<Throwable> failure() {
        return driver.failure();
    }

    /** Stops fetching, waits for the batch in hand to finish and ack, unsubscribes (the durable stays). */
    @Override
    public void close() {
        running = false;
        closing.countDown();
        driver.stop();
        try {
            fetcher.join(fetchWait.toMillis() + Duration.ofMinutes(1).toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        driver.close();
        if (!fetcher.isAlive()) {
            stopKeepAlive();
        } // else the fetcher still waits for a holder on a message's last delivery, and stops it when done
        JetStreamSubscription s = subscription;
        if (s != null) {
            try {
                s.unsubscribe();
            } catch (RuntimeException e) {
                log.debug("unsubscribe from {}/{} failed: {}", stream, durable, e.toString());
            }
        }
    }

    /**
     * Configures a {@link NatsConsumer}. {@code connection}, {@code stream}, {@code durable} and
     * {@code consumer} are required; setters check their argument at once, {@link #build()} checks
     * that a fetch waits less than the ack wait. Not thread-safe.
     */
    public static final class Builder {
        private Connection connection;
        private String stream;
        private String durable;
        private String filterSubject;
        private IdempotentConsumer consumer;
        private int batchSize = DEFAULT_BATCH_SIZE;
        private Duration fetchWait = DEFAULT_FETCH_WAIT;
        private Duration ackWait = DEFAULT_ACK_WAIT;
        private RetryPolicy retries = DEFAULT_RETRIES;
        private boolean deadLetterAfterRetries;
        private ConsumerSettings settings = ConsumerSettings.defaults("eventIdHeader", OutboxMessage.EVENT_ID_HEADER);
        private String deadLetterSubject;

        private Builder() {}

        public Builder connection(Connection connection) {
            this.connection = Objects.requireNonNull(connection, "connection");
            return this;
        }

        /** The stream's name. */
        public Builder stream(String stream) {
            this.stream = name("stream", stream);
            return this;
        }

        /** The durable consumer's name, shared by competing consumers. */
        public Builder durable(String durable) {
            this.durable = name("durable", durable);
            return this;
        }

        /** Only subjects matching this filter; default all of the stream. */
        public Builder filterSubject(String filterSubject) {
            this.filterSubject = Objects.requireNonNull(filterSubject, "filterSubject");
            return this;
        }

        public Builder consumer(IdempotentConsumer consumer) {
            this.consumer = Objects.requireNonNull(consumer, "consumer");
            return this;
        }

        /** Messages per fetch and per transaction, 1 to 10000; default {@value #DEFAULT_BATCH_SIZE}. */
        public Builder batchSize(int batchSize) {
            this.batchSize = ConsumerSettings.between("batchSize", batchSize, 1, 10_000);
            return this;
        }

        /** Longest wait of one fetch; default 1 s; must be shorter than the ack wait. */
        public Builder fetchWait(Duration fetchWait) {
            this.fetchWait = ConsumerSettings.positive("fetchWait", fetchWait);
            return this;
        }

        /** JetStream's ack wait for the durable; default 30 s; the heartbeat runs every third of it. */
        public Builder ackWait(Duration ackWait) {
            this.ackWait = ConsumerSettings.positive("ackWait", ackWait);
            return this;
        }

        /**
         * Subject a permanently failed message is published to, with its headers and the reason,
         * before it is terminated; a stream of the user's must capture it (until one does, the
         * message is {@code nak}ed and tried again). Default none: terminated with a log line only.
         */
        public Builder deadLetterSubject(String subject) {
            Objects.requireNonNull(subject, "subject");
            if (!DEAD_LETTER_SUBJECT_PATTERN.matcher(subject).matches()) {
                throw new InvalidConfigurationException("deadLetterSubject must be a NATS subject without wildcards"
                        + " or spaces (tokens of [A-Za-z0-9_-] separated by dots), but was '" + subject + "'");
            }
            this.deadLetterSubject = subject;
            return this;
        }

        /**
         * Spacing of retryable failures: the {@code nak} of the n-th delivery waits
         * {@code policy.delay(n)}; default {@link #DEFAULT_RETRIES}. Its {@code maxRetries} bounds
         * the tries only with {@link #deadLetterAfterRetries()}.
         */
        public Builder retries(RetryPolicy policy) {
            this.retries = Objects.requireNonNull(policy, "policy");
            return this;
        }

        /**
         * Sets the durable's {@code max_deliver} to the policy's retries + 1, so the last try of a
         * message that keeps failing retryably is dead-lettered; needs a
         * {@link #deadLetterSubject}. Default off: the durable's own {@code max_deliver}, if any, is kept.
         */
        public Builder deadLetterAfterRetries() {
            this.deadLetterAfterRetries = true;
            return this;
        }

        /** Whether a batch still working sends {@code inProgress()}; default true. */
        public Builder heartbeat(boolean heartbeat) {
            this.settings = settings.withHeartbeat(heartbeat);
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

        /** @throws InvalidConfigurationException naming what is missing or conflicting */
        public NatsConsumer build() {
            if (connection == null || stream == null || durable == null || consumer == null) {
                throw new InvalidConfigurationException("connection, stream, durable and consumer are required, but "
                        + (connection == null ? "connection " : "") + (stream == null ? "stream " : "")
                        + (durable == null ? "durable " : "") + (consumer == null ? "consumer " : "") + "was not set");
            }
            if (deadLetterAfterRetries && deadLetterSubject == null) {
                throw new InvalidConfigurationException("deadLetterAfterRetries needs a deadLetterSubject: without"
                        + " one JetStream drops a message at max_deliver");
            }
            if (fetchWait.compareTo(ackWait) >= 0) {
                // a fetch that outlives the ack wait gets the same message handed out twice
                throw new InvalidConfigurationException("fetchWait must be shorter than ackWait, but fetchWait was "
                        + fetchWait + " and ackWait " + ackWait + "; lower fetchWait");
            }
            return new NatsConsumer(this);
        }

        private static String name(String what, String value) {
            Objects.requireNonNull(value, what);
            if (!NAME.matcher(value).matches()) {
                throw new InvalidConfigurationException(
                        what + " must match " + NAME.pattern() + ", but was '" + value + "'");
            }
            return value;
        }
    }
}
