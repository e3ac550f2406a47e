package dev.once.rabbitmq;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.ShutdownSignalException;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.RetryPolicy;
import dev.once.adapter.AdapterDriver;
import dev.once.adapter.Broker;
import dev.once.adapter.Processed;
import dev.once.outbox.OutboxMessage;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Consumes one RabbitMQ queue with manual acknowledgements and runs every message through an
 * {@link IdempotentConsumer}. The prefetch is the batch window: whatever has arrived, up to the
 * prefetch count, is processed in one database transaction, and only after the commit is it
 * settled: {@code basicAck} ({@code multiple} over runs of consecutive successes) for applied
 * and duplicate messages, {@code basicNack(requeue)} for retryable failures and messages still
 * in progress elsewhere, {@code basicReject} without requeue for permanent failures, which the
 * broker routes to the queue's dead-letter exchange ({@code x-dead-letter-exchange}) or drops
 * when it has none.
 *
 * <p>A connection lost between commit and ack makes the broker requeue the message; the
 * redelivery is absorbed by the inbox as a duplicate. The event id is read from the header
 * {@value OutboxMessage#EVENT_ID_HEADER} (configurable), falling back to the AMQP
 * {@code message-id} property; the attempt is {@code x-delivery-count + 1} on quorum queues,
 * 2 for a message flagged {@code redelivered} elsewhere, 1 otherwise. Requeued retries come back
 * at once: bound them with a quorum queue's {@code x-delivery-limit}.
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

    private static final Logger log = LoggerFactory.getLogger(RabbitConsumer.class);
    private static final AtomicInteger INSTANCES = new AtomicInteger();

    private final Connection connection;
    private final String queue;
    private final IdempotentConsumer consumer;
    private final RetryPolicy receiveRetries;
    private final int prefetch;
    private final String eventIdHeader;
    private final BlockingQueue<Received> arrived = new LinkedBlockingQueue<>();
    private final AdapterDriver<Received> driver;
    private final Thread worker;
    private volatile Channel channel;
    private volatile String consumerTag;
    private volatile boolean running;

    private record Received(Envelope envelope, AMQP.BasicProperties properties, byte[] body) {}

    private RabbitConsumer(Builder b) {
        this.connection = b.connection;
        this.queue = b.queue;
        this.consumer = b.consumer;
        this.receiveRetries = b.receiveRetries;
        this.prefetch = b.prefetch;
        this.eventIdHeader = b.eventIdHeader;
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
        ch.basicQos(prefetch);
        channel = ch;
        running = true;
        worker.start();
        consumerTag = ch.basicConsume(queue, false, new DefaultConsumer(ch) {
            @Override
            public void handleDelivery(String tag, Envelope envelope, AMQP.BasicProperties properties, byte[] body) {
                arrived.add(new Received(envelope, properties, body));
            }

            @Override
            public void handleShutdownSignal(String tag, ShutdownSignalException sig) {
                if (running && driver.isRunning()) {
                    // Unacknowledged messages are requeued by the broker and absorbed on redelivery;
                    // without a channel this consumer is dead, and says so.
                    driver.fail(new IllegalStateException(
                            "channel of consumer on " + queue + " shut down: " + sig.getMessage(), sig));
                }
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

    private List<Received> receive() throws InterruptedException {
        Received first = arrived.poll(200, TimeUnit.MILLISECONDS);
        if (first == null || !driver.isRunning()) {
            return List.of();
        }
        List<Received> batch = new ArrayList<>(prefetch);
        batch.add(first);
        arrived.drainTo(batch, prefetch - 1);
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

    private void settle(List<Processed<Received>> processed) throws IOException {
        List<Long> tags = new ArrayList<>(processed.size());
        List<Outcome> outcomes = new ArrayList<>(processed.size());
        for (Processed<Received> p : processed) {
            tags.add(p.message().envelope().getDeliveryTag());
            outcomes.add(p.outcome());
        }
        Channel ch = channel;
        for (Settlement s : Settlement.plan(tags, outcomes)) {
            try {
                switch (s.kind()) {
                    case ACK_MULTIPLE -> ch.basicAck(s.tag(), true);
                    case ACK -> ch.basicAck(s.tag(), false);
                    case REQUEUE -> ch.basicNack(s.tag(), false, true);
                    case DEAD_LETTER -> ch.basicReject(s.tag(), false);
                }
            } catch (IOException | RuntimeException e) {
                // A settlement that did not happen must not be overtaken by a later cumulative ack:
                // close the channel, so the broker requeues every unacknowledged message (the inbox
                // absorbs the redeliveries), and stop.
                abort(ch);
                throw e instanceof IOException io ? io : new IOException(e);
            }
        }
        for (Outcome o : outcomes) {
            if (o.status() == Status.FAILED_PERMANENT) {
                log.warn(
                        "message {} on {} failed permanently and was rejected to the dead-letter exchange: {}",
                        o.eventId(),
                        queue,
                        String.valueOf(o.failure()));
            }
        }
    }

    private void abort(Channel ch) {
        if (ch != null && ch.isOpen()) {
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
        driver.stop();
        try {
            worker.join(Duration.ofMinutes(1).toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            if (ch.isOpen()) {
                ch.close();
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
        private String eventIdHeader = OutboxMessage.EVENT_ID_HEADER;
        private RetryPolicy receiveRetries = AdapterDriver.DEFAULT_RECEIVE_RETRIES;

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
            if (prefetch < 1 || prefetch > 65_535) {
                throw new InvalidConfigurationException("prefetch must be between 1 and 65535, but was " + prefetch);
            }
            this.prefetch = prefetch;
            return this;
        }

        /** Header with the producer's event id; default {@value OutboxMessage#EVENT_ID_HEADER}. */
        public Builder eventIdHeader(String eventIdHeader) {
            Objects.requireNonNull(eventIdHeader, "eventIdHeader");
            if (eventIdHeader.isBlank()) {
                throw new InvalidConfigurationException("eventIdHeader must not be blank");
            }
            this.eventIdHeader = eventIdHeader;
            return this;
        }

        /**
         * Pause after failed receives (and batches that failed outside the handler) in a row;
         * default {@link AdapterDriver#DEFAULT_RECEIVE_RETRIES}; the loop never gives up, past the
         * last retry it waits the cap.
         */
        public Builder receiveRetries(RetryPolicy policy) {
            this.receiveRetries = Objects.requireNonNull(policy, "policy");
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
