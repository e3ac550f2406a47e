package dev.once.adapter;

import dev.once.ClaimHeldOnThreadException;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryPolicy;
import dev.once.RetryableException;
import dev.once.StreamPositions;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The loop a broker adapter runs, written once: {@link Receiver receive} a batch, decode each
 * message ({@link Broker#delivery}), run the decodable ones through
 * {@link IdempotentConsumer#processBatch} in one transaction while a heartbeat
 * ({@link Broker#extend}) keeps them from being redelivered, then {@link Broker#settle settle}
 * each by its {@link Verdict}. What can go wrong, and what the driver does:
 * <ul>
 *   <li>a message without a usable event id: a {@link Status#FAILED_PERMANENT} outcome of its own,
 *       so the adapter dead-letters it; the rest of the batch is processed;</li>
 *   <li>{@code processBatch} throws (a broken pool, a bug): every message of the batch is
 *       {@link Status#FAILED_RETRYABLE}, settled as such (requeued, never covered by a later
 *       cumulative ack), and the loop backs off before the next receive;</li>
 *   <li>a receive fails: the loop backs off by its {@link RetryPolicy} and receives again;</li>
 *   <li>anything else ({@code Error}s included) kills the loop: {@link Broker#abandon} makes the
 *       broker redeliver what was unsettled, every loop of the driver stops, and
 *       {@link #failure()} and {@link #isRunning()} report it.</li>
 * </ul>
 * In {@linkplain Builder#inGroupOrder group order} (FIFO queues) each group's messages run as one
 * ordered batch ({@link IdempotentConsumer#processInOrder}): the acknowledged prefix is settled
 * together; the first of a group that is not acknowledged, or whose dead-lettering failed, stops
 * its group: its successors are {@link Broker#release released} unprocessed, so nothing is
 * applied ahead of a message that is not settled.
 *
 * <p>The driver owns no receive thread: an adapter calls {@link #run(Receiver)} on each of its
 * threads. Thread-safe. {@link #stop()} makes every loop return after the batch in hand;
 * {@link #close()} also stops the heartbeat thread.
 *
 * @param <M> the broker's message type
 */
public final class AdapterDriver<M> implements AutoCloseable {

    /** After a failed receive: 200 ms doubling to 10 s, equal jitter so loops failing together spread out. */
    public static final RetryPolicy DEFAULT_RECEIVE_RETRIES = RetryPolicy.builder()
            .initialDelay(Duration.ofMillis(200))
            .maxDelay(Duration.ofSeconds(10))
            .jitter(RetryPolicy.Jitter.EQUAL)
            .maxRetries(RetryPolicy.MAX_RETRIES_LIMIT)
            .build();

    private static final Logger log = LoggerFactory.getLogger(AdapterDriver.class);

    private final String name;
    private final IdempotentConsumer consumer;
    private final Broker<M> broker;
    private final Duration heartbeatEvery;
    // Null unless the builder set a group order.
    private final GroupOrder<M> groupOrder;
    private final RetryPolicy receiveRetries;
    private final ScheduledExecutorService heartbeats;
    private final CountDownLatch stopped = new CountDownLatch(1);
    private volatile boolean running = true;
    private volatile Throwable failure;

    private AdapterDriver(Builder<M> b) {
        this.name = b.name;
        this.consumer = b.consumer;
        this.broker = b.broker;
        this.heartbeatEvery = b.heartbeatEvery;
        this.groupOrder = b.groupOf == null
                ? null
                : new GroupOrder<>(name, consumer, broker, b.groupOf, b.streamOf, b.positionOf);
        this.receiveRetries = b.receiveRetries;
        this.heartbeats = heartbeatEvery == null
                ? null
                : Executors.newSingleThreadScheduledExecutor(r -> {
                    Thread t = new Thread(r, name + "-heartbeat");
                    t.setDaemon(true);
                    return t;
                });
    }

    /**
     * Starts a builder.
     *
     * @param name     names the loop in logs and threads, for example {@code "once-sqs-1"}
     * @param consumer the engine every message runs through
     * @param broker   what the broker makes different
     */
    public static <M> Builder<M> builder(String name, IdempotentConsumer consumer, Broker<M> broker) {
        return new Builder<>(name, consumer, broker);
    }

    /**
     * Receives and processes until {@link #stop()} or a fatal failure; call it on each receive
     * thread. Returns normally in both cases; a fatal failure is kept in {@link #failure()}.
     */
    public void run(Receiver<M> receiver) {
        int failures = 0;
        try {
            while (running) {
                List<M> batch;
                try {
                    batch = receiver.receive();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                } catch (Exception e) {
                    if (!running) {
                        return; // the client was closed under us by stop()
                    }
                    failures++;
                    log.warn("{}: receive failed ({} in a row), retrying: {}", name, failures, e.toString());
                    pause(failures);
                    continue;
                }
                failures = 0;
                if (batch == null || batch.isEmpty()) {
                    continue;
                }
                if (!handle(batch)) {
                    failures++;
                    pause(failures);
                }
            }
        } catch (Throwable t) {
            fail(t);
        }
    }

    /**
     * Processes and settles one batch; returns false when {@code processBatch} failed outside the
     * handler (its messages were settled as retryable).
     */
    boolean handle(List<M> batch) {
        if (groupOrder != null) {
            return inGroupOrder(batch);
        }
        List<Processed<M>> processed = new ArrayList<>(batch.size());
        boolean ok = beating(batch, () -> process(batch, processed));
        settle(processed);
        return ok;
    }

    /** Decodes and runs one batch in one transaction; fills {@code out} in batch order; false if processBatch threw. */
    private boolean process(List<M> batch, List<Processed<M>> out) {
        List<Delivery> deliveries = new ArrayList<>(batch.size());
        List<Integer> positions = new ArrayList<>(batch.size());
        for (M m : batch) {
            try {
                deliveries.add(broker.delivery(m));
                positions.add(out.size());
                out.add(null);
            } catch (InvalidDeliveryException e) {
                // never deduplicated on a broker id instead: a permanent failure of its own
                out.add(new Processed<>(m, null, new Outcome(broker.describe(m), Status.FAILED_PERMANENT, e)));
            }
        }
        if (deliveries.isEmpty()) {
            return true;
        }
        List<Outcome> outcomes;
        boolean ok = true;
        try {
            outcomes = consumer.processBatch(deliveries);
        } catch (RuntimeException e) {
            outcomes = failedOutsideTheHandler(name, "batch", deliveries, e);
            ok = false;
        }
        for (int i = 0; i < deliveries.size(); i++) {
            int at = positions.get(i);
            out.set(at, new Processed<>(batch.get(at), deliveries.get(i), outcomes.get(i)));
        }
        return ok;
    }

    /**
     * Whether {@code o} is IN_PROGRESS because another delivery holds its claim in a transaction that can end while
     * the caller waits (another thread's or process's): worth keeping the message in hand and trying again. False
     * for one this thread's own suspended transaction holds ({@link ClaimHeldOnThreadException}), which
     * ends only after the call returns: waiting for it would never end. The one test every adapter (and the Spring
     * listener interceptor) makes before keeping a delivery for its holder.
     */
    public static boolean heldElsewhere(Outcome o) {
        return o.status() == Status.IN_PROGRESS && !(o.failure() instanceof ClaimHeldOnThreadException);
    }

    /**
     * One more try of {@code d}, which this driver's batch left unsettled, from the adapter's own thread (a delivery
     * whose claim another delivery held, kept in hand until that one ends); a failure outside the handler is a
     * retryable outcome, logged, as a batch's is.
     */
    public Outcome processAgain(Delivery d) {
        try {
            return consumer.process(d);
        } catch (RuntimeException e) {
            return failedOutsideTheHandler(name, "a try", List.of(d), e).get(0);
        }
    }

    /**
     * As {@link #processAgain(Delivery)}, for {@code d} decoded from {@code message}; in group order with
     * {@linkplain Builder#groupPositions positions} through the group's stream position, as its first try went: a
     * message its group went on without meanwhile (the broker handed out its successors, another process applied
     * them) is refused rather than applied after them.
     */
    public Outcome processAgain(M message, Delivery d) {
        if (groupOrder == null) {
            return processAgain(d);
        }
        try {
            return groupOrder.again(message, d);
        } catch (RuntimeException e) {
            return failedOutsideTheHandler(name, "a try", List.of(d), e).get(0);
        }
    }

    /**
     * The outcomes of a batch or ordered run ({@code what}) whose processing threw outside the handler
     * (a broken pool, a bug). Nothing of it is known to be applied: each delivery is settled as
     * retryable, so a cumulative ack of a later batch cannot cover it.
     */
    static List<Outcome> failedOutsideTheHandler(
            String name, String what, List<Delivery> deliveries, RuntimeException e) {
        log.error(
                "{}: {} of {} failed outside the handler; it is left for redelivery", name, what, deliveries.size(), e);
        RetryableException cause =
                new RetryableException(what + " of " + deliveries.size() + " failed outside the handler: " + e, e);
        return deliveries.stream()
                .map(d -> new Outcome(d.eventId(), Status.FAILED_RETRYABLE, cause))
                .toList();
    }

    /**
     * Each group's messages as one ordered run ({@link GroupOrder}), under one heartbeat; what a group
     * stopped by an unsettled message leaves is released unprocessed.
     */
    private boolean inGroupOrder(List<M> batch) {
        Map<String, List<M>> groups = groupOrder.groups(batch);
        List<M> released = new ArrayList<>();
        boolean ok = beating(batch, () -> groupOrder.run(groups, released));
        if (!released.isEmpty()) {
            broker.release(released);
        }
        return ok;
    }

    private void settle(List<Processed<M>> processed) {
        try {
            broker.settle(processed);
        } catch (Exception e) {
            // Not settled means redelivered: the inbox absorbs what was applied.
            log.warn(
                    "{}: could not settle a batch of {}; the broker redelivers it and the redelivery is absorbed: {}",
                    name,
                    processed.size(),
                    e.toString());
        }
    }

    private interface Work {
        boolean run();
    }

    private boolean beating(List<M> messages, Work work) {
        ScheduledFuture<?> beat = heartbeats == null
                ? null
                : heartbeats.scheduleAtFixedRate(
                        () -> {
                            try {
                                broker.extend(messages);
                            } catch (RuntimeException e) {
                                log.warn(
                                        "{}: heartbeat for {} messages failed: {}",
                                        name,
                                        messages.size(),
                                        e.toString());
                            }
                        },
                        heartbeatEvery.toMillis(),
                        heartbeatEvery.toMillis(),
                        TimeUnit.MILLISECONDS);
        try {
            return work.run();
        } finally {
            if (beat != null) {
                beat.cancel(false);
            }
        }
    }

    private void pause(int failures) {
        try {
            // past the policy's last retry the loop keeps trying at its cap: a receive loop never gives up
            if (stopped.await(receiveRetries.delay(failures).toMillis(), TimeUnit.MILLISECONDS)) {
                running = false;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            running = false;
        }
    }

    /**
     * Stops every loop of this driver for good because of {@code cause} (for example the broker
     * connection died): {@link #failure()} reports it. The first failure is kept.
     */
    public void fail(Throwable cause) {
        Objects.requireNonNull(cause, "cause");
        synchronized (this) {
            if (failure == null) {
                failure = cause;
            }
        }
        log.error("{}: stopped by an unexpected failure; unsettled messages are redelivered", name, cause);
        stop();
        try {
            broker.abandon(cause);
        } catch (RuntimeException e) {
            log.warn("{}: abandoning the unsettled messages failed: {}", name, e.toString());
        }
    }

    /** Makes every loop return after the batch in hand; returns at once. */
    public void stop() {
        running = false;
        stopped.countDown();
    }

    /** True until {@link #stop()} or a fatal failure. */
    public boolean isRunning() {
        return running;
    }

    /** The failure that stopped the driver, if one did. */
    public Optional<Throwable> failure() {
        return Optional.ofNullable(failure);
    }

    /** Stops the loops and the heartbeat thread. */
    @Override
    public void close() {
        stop();
        if (heartbeats != null) {
            heartbeats.shutdownNow();
        }
    }

    /** Configures an {@link AdapterDriver}; setters check their argument at once. Not thread-safe. */
    public static final class Builder<M> {
        private final String name;
        private final IdempotentConsumer consumer;
        private final Broker<M> broker;
        private Duration heartbeatEvery;
        private Function<M, String> groupOf;
        private Function<String, String> streamOf;
        private Function<M, BigInteger> positionOf;
        private RetryPolicy receiveRetries = DEFAULT_RECEIVE_RETRIES;

        private Builder(String name, IdempotentConsumer consumer, Broker<M> broker) {
            this.name = Objects.requireNonNull(name, "name");
            this.consumer = Objects.requireNonNull(consumer, "consumer");
            this.broker = Objects.requireNonNull(broker, "broker");
        }

        /** Calls {@link Broker#extend} every {@code every} while a batch works; default no heartbeat. */
        public Builder<M> heartbeat(Duration every) {
            Objects.requireNonNull(every, "every");
            if (every.toMillis() < 1) {
                throw new InvalidConfigurationException("heartbeat interval must be at least 1 ms, but was " + every);
            }
            this.heartbeatEvery = every;
            return this;
        }

        /**
         * Processes messages of one group in order, as one ordered batch
         * ({@link IdempotentConsumer#processInOrder}), settling them before the group goes on past a
         * failure; {@code groupOf} names a message's group (null: one group for all). Default: the
         * whole batch in one transaction.
         */
        public Builder<M> inGroupOrder(Function<M, String> groupOf) {
            this.groupOf = Objects.requireNonNull(groupOf, "groupOf");
            return this;
        }

        /**
         * With {@link #inGroupOrder}: each group's runs go through
         * {@link IdempotentConsumer#processInOrder(List, StreamPositions)}, so the database keeps how far each
         * group is applied and a message its group went on without is refused rather than applied after its
         * successors. {@code streamOf} names a group's stream (unique per consumer, at most
         * {@value StreamPositions#MAX_STREAM_LENGTH} characters), {@code positionOf} a message's position in its
         * group, increasing in the broker's order (SQS FIFO: its sequence number).
         */
        public Builder<M> groupPositions(Function<String, String> streamOf, Function<M, BigInteger> positionOf) {
            this.streamOf = Objects.requireNonNull(streamOf, "streamOf");
            this.positionOf = Objects.requireNonNull(positionOf, "positionOf");
            return this;
        }

        /**
         * The pause after receive failures (or failed batches) in a row: {@link RetryPolicy#delay}
         * of their count; default {@link #DEFAULT_RECEIVE_RETRIES}. Its {@code maxRetries} does not
         * stop the loop: past it the pause stays at the cap.
         */
        public Builder<M> receiveRetries(RetryPolicy policy) {
            this.receiveRetries = Objects.requireNonNull(policy, "policy");
            return this;
        }

        /** @throws InvalidConfigurationException for {@link #groupPositions} without {@link #inGroupOrder} */
        public AdapterDriver<M> build() {
            if (positionOf != null && groupOf == null) {
                throw new InvalidConfigurationException(
                        "groupPositions needs inGroupOrder: positions are kept per message group, for " + name);
            }
            return new AdapterDriver<>(this);
        }
    }
}
