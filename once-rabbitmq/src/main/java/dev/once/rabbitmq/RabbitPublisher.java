package dev.once.rabbitmq;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ShutdownSignalException;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The outbox {@link Publisher} for RabbitMQ, with publisher confirms: {@link #publish} returns only
 * once the broker has confirmed the message (on disk for durable queues). A row's destination is
 * {@code exchange/routing-key}, or a queue name (the default exchange routes it to that queue). The
 * event id travels as the header {@value OutboxMessage#EVENT_ID_HEADER} and as the AMQP
 * {@code message-id}, with every other row header; messages are persistent and published
 * {@code mandatory}, so one that no queue takes is reported instead of silently dropped.
 *
 * <pre>{@code
 * OutboxRelay relay = OutboxRelay.builder().dataSource(ds).publisher(new RabbitPublisher(connection)).build();
 * }</pre>
 *
 * <p><b>Deduplication.</b> RabbitMQ does not deduplicate: a relay that re-sends after a crash
 * produces a second message with the same event id, which the consumer's inbox absorbs.
 *
 * <p><b>Receipt.</b> Status 0; body {@code confirmed seq=<n> channel=<c>}, the publish sequence
 * number the broker confirmed and the number of the channel it counts on.
 *
 * <p><b>Failure contract</b> (a {@link PublishFailure}). Permanent, with the AMQP reply code: the
 * exchange does not exist (404), no queue is bound for the routing key, such as a queue name that
 * does not exist (312 {@code NO_ROUTE}), or the broker refuses the message (406, e.g. larger than
 * its {@code max_message_size}; 311). Retryable: the broker nacked it, no confirm within the
 * confirm timeout, the connection was lost or closed, access refused (403, permissions can be
 * granted), or the thread was interrupted. A channel the broker closed is replaced at the next
 * publish.
 *
 * <p>Owns {@code channels} confirm-mode channels on the given connection ({@value #DEFAULT_CHANNELS}
 * unless given). Thread-safe: a call publishes its messages on a channel no other call publishes
 * on meanwhile, then gives the channel back, each publish settled by its own sequence number
 * ({@link #publishAll} returns then; {@link #publish} waits for its confirm). So relays sharing a
 * publisher pipeline their batches (one publishes while another's confirms are on their way), and
 * with a channel each they publish in parallel.
 */
public final class RabbitPublisher implements Publisher, AutoCloseable {

    /** How long a publish waits for the broker's confirm unless configured. */
    public static final Duration DEFAULT_CONFIRM_TIMEOUT = Duration.ofSeconds(10);

    /**
     * Channels a publisher opens unless configured. One: with the confirm waits outside the
     * channel's use, four relays on one channel moved as many messages per second as on four, into
     * a classic and into a quorum queue (the relay suite, 2026-12-03, issue 21); more channels let
     * the relays' publishes run in parallel where the broker has the cores for it.
     */
    public static final int DEFAULT_CHANNELS = 1;

    private static final int NO_ROUTE = 312;

    private final Connection connection;
    private final Duration confirmTimeout;
    // message id -> the broker's reason for returning it; filled by the channel's return listener
    private final Map<String, String> returned = new ConcurrentHashMap<>();
    private final List<Lane> lanes = new ArrayList<>();
    // The lanes no call is publishing on. A call takes one, publishes, and gives it back before it
    // waits for its confirms (a call sending alone keeps it until its confirm): a call's publishes
    // are consecutive on the channel, and its sequence numbers are taken and used by that call only.
    private final BlockingQueue<Lane> idle;
    // Sends alone what a channel closure left without a confirm in publishAll: as many threads as
    // lanes (each such send holds one through its confirm), daemons that end when idle, so the
    // publisher needs no more closing than its channels.
    private final ThreadPoolExecutor resends;

    /** @throws IOException if the channels cannot be opened */
    public RabbitPublisher(Connection connection) throws IOException {
        this(connection, DEFAULT_CONFIRM_TIMEOUT);
    }

    /** @throws IOException if the channels cannot be opened */
    public RabbitPublisher(Connection connection, Duration confirmTimeout) throws IOException {
        this(connection, confirmTimeout, DEFAULT_CHANNELS);
    }

    /**
     * @param channels confirm-mode channels to publish on, at least 1: with as many as relays share
     *                 the publisher, each publishes at once
     * @throws IOException if the channels cannot be opened
     */
    public RabbitPublisher(Connection connection, Duration confirmTimeout, int channels) throws IOException {
        this.connection = Objects.requireNonNull(connection, "connection");
        this.confirmTimeout = Objects.requireNonNull(confirmTimeout, "confirmTimeout");
        if (channels < 1) {
            throw new IllegalArgumentException("channels must be at least 1, but was " + channels);
        }
        this.idle = new ArrayBlockingQueue<>(channels);
        AtomicInteger threads = new AtomicInteger();
        this.resends =
                new ThreadPoolExecutor(channels, channels, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
                    Thread t = new Thread(r, "once-rabbit-resend-" + threads.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                });
        resends.allowCoreThreadTimeOut(true);
        for (int i = 0; i < channels; i++) {
            Lane lane = new Lane(open());
            lanes.add(lane);
            idle.add(lane);
        }
    }

    /**
     * One of the publisher's channels with its publishes awaiting a confirm: {@code current},
     * replaced once the broker closes the channel, touched only by the call holding the lane (and
     * read by {@link #close}).
     */
    private static final class Lane {
        volatile Confirms current;

        Lane(Confirms current) {
            this.current = current;
        }
    }

    private Confirms open() throws IOException {
        Channel ch = connection.createChannel();
        if (ch == null) {
            throw new IOException("connection " + connection + " has no channel left to open");
        }
        Confirms confirms = new Confirms(ch, new ConcurrentSkipListMap<>());
        ch.confirmSelect();
        ch.addReturnListener(r -> returned.put(
                String.valueOf(r.getProperties().getMessageId()), r.getReplyCode() + " " + r.getReplyText()));
        ch.addConfirmListener(
                (seq, multiple) -> confirms.settle(seq, multiple, true),
                (seq, multiple) -> confirms.settle(seq, multiple, false));
        ch.addShutdownListener(signal -> {
            for (Sent s : confirms.unconfirmed().values()) {
                s.closed.completeExceptionally(signal);
            }
        });
        return confirms;
    }

    /**
     * A confirm-mode channel and its publishes awaiting a confirm, by sequence number. One map per
     * channel: the shutdown listener of a closed channel runs on the connection's thread, possibly
     * after its successor was opened, and must fail only its own publishes (failing the
     * successor's would refuse a good message for the other's fault; a map cleared at the switch
     * would leave the closed channel's publishes waiting out the confirm timeout).
     */
    private record Confirms(Channel channel, ConcurrentSkipListMap<Long, Sent> unconfirmed) {

        // Runs on the connection's thread: a confirm covers one sequence number, or all up to it.
        void settle(long seq, boolean multiple, boolean ack) {
            var settled = multiple ? unconfirmed.headMap(seq, true) : unconfirmed.subMap(seq, true, seq, true);
            for (Sent s : settled.values()) {
                s.closed.complete(ack);
            }
            settled.clear();
        }
    }

    /** A publish waiting for its confirm: completed true (ack) or false (nack), or failed when the channel closed. */
    private record Sent(long seq, int channel, CompletableFuture<Boolean> closed) {}

    /**
     * Publishes one outbox row and waits for its confirm.
     *
     * @return {@code confirmed seq=… channel=…}
     * @throws PublishFailure permanent when the exchange is missing, nothing routes the message or the
     *                        broker refuses it; retryable when the broker nacked it, no confirm came in
     *                        time or the connection was lost
     * @throws InterruptedException interrupted while waiting for the confirm; the row is sent again
     */
    @Override
    public Receipt publish(OutboxMessage message) throws InterruptedException {
        Object outcome = send(List.of(message), false).get(0);
        if (outcome instanceof PublishFailure f) {
            throw f;
        }
        return (Receipt) outcome;
    }

    /**
     * Publishes every row and returns without waiting: each row's stage completes when the broker's
     * confirm for that row arrives (or its nack, or the confirm timeout passes), not when the
     * batch's last one does. When the broker closes the channel mid-batch (a missing exchange, a
     * refused message), it does not say for which message, and the message may be another relay's
     * on the shared channel, so the rows without a confirm are published again one by one on a new
     * channel, each alone on it until its confirm, on the publisher's own threads: the one at fault
     * fails alone, the others are sent (RabbitMQ does not deduplicate; the consumer's inbox absorbs
     * a second copy).
     */
    @Override
    public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
        Object[] outcomes = new Object[messages.size()];
        Sent[] sent = new Sent[messages.size()];
        Lane lane;
        try {
            lane = idle.take();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return messages.stream()
                    .<CompletionStage<Receipt>>map(m -> CompletableFuture.failedFuture(e))
                    .toList();
        }
        try {
            publishEach(lane, messages, outcomes, sent);
        } finally {
            idle.add(lane);
        }
        List<CompletionStage<Receipt>> results = new ArrayList<>(messages.size());
        for (int i = 0; i < messages.size(); i++) {
            OutboxMessage m = messages.get(i);
            if (outcomes[i] != null) {
                results.add(stage(outcomes[i]));
            } else if (sent[i] == null) {
                results.add(alone(m)); // not published: the channel closed before its turn
            } else {
                Sent s = sent[i];
                // Settled on the connection's thread as the confirm arrives: no thread hop for the
                // row, and a returned message's reason is recorded before its confirm.
                results.add(s.closed
                        .orTimeout(confirmTimeout.toNanos(), TimeUnit.NANOSECONDS)
                        .handle((acked, failure) -> {
                            if (failure == null) {
                                return stage(acked ? confirmed(m, s) : nacked(m, s));
                            }
                            Throwable cause = failure instanceof CompletionException && failure.getCause() != null
                                    ? failure.getCause()
                                    : failure;
                            if (cause instanceof TimeoutException) {
                                return stage(PublishFailure.retryable(
                                        "no confirm for " + what(m) + " within " + confirmTimeout,
                                        Receipt.NONE,
                                        cause));
                            }
                            return alone(m); // the channel closed before its confirm
                        })
                        .thenCompose(r -> r));
            }
        }
        return results;
    }

    private static CompletionStage<Receipt> stage(Object outcome) {
        return outcome instanceof PublishFailure f
                ? CompletableFuture.failedFuture(f)
                : CompletableFuture.completedFuture((Receipt) outcome);
    }

    // Sending alone blocks (for the lane, the confirms left on it, its own confirm): never on the
    // connection's thread, which delivers the confirms it waits for.
    private CompletionStage<Receipt> alone(OutboxMessage m) {
        CompletableFuture<Receipt> result = new CompletableFuture<>();
        resends.execute(() -> {
            try {
                Object outcome = send(List.of(m), true).get(0);
                if (outcome instanceof PublishFailure f) {
                    result.completeExceptionally(f);
                } else {
                    result.complete((Receipt) outcome);
                }
            } catch (InterruptedException e) {
                result.completeExceptionally(e);
            } catch (RuntimeException e) {
                result.completeExceptionally(e);
            }
        });
        return result;
    }

    /**
     * One outcome per message: its Receipt or its PublishFailure. {@code alone}: one message, the
     * only one on its channel until its confirm (the lane held through the wait), so a closure of
     * the channel is its own fault. Otherwise the channel may carry other calls' publishes once
     * this call gave it back, and a closure may be any of theirs: the messages it left without a
     * confirm are each sent alone.
     */
    private List<Object> send(List<OutboxMessage> messages, boolean alone) throws InterruptedException {
        Object[] outcomes = new Object[messages.size()];
        Sent[] sent = new Sent[messages.size()];
        List<Integer> unknown = new ArrayList<>();
        ShutdownSignalException closedBy;
        Lane lane = idle.take();
        try {
            if (alone) {
                awaitEarlier(lane.current);
            }
            closedBy = publishEach(lane, messages, outcomes, sent);
            if (!alone) {
                idle.add(lane);
                lane = null;
            }
            closedBy = awaitConfirms(messages, outcomes, sent, unknown, closedBy);
        } finally {
            if (lane != null) {
                idle.add(lane);
            }
        }
        if (alone && !unknown.isEmpty()) {
            outcomes[0] = closed(what(messages.get(0)), closedBy);
        } else {
            for (int i : unknown) {
                outcomes[i] = send(List.of(messages.get(i)), true).get(0);
            }
        }
        return List.of(outcomes);
    }

    /**
     * Before a message goes out alone: waits (within one confirm timeout) until the publishes other calls
     * left on the lane's channel are confirmed, or the channel closed. A channel the broker is closing for
     * another call's message (its 404 still on the way) is still open when this one is published on it,
     * and its closure would be blamed on this message: a good row was refused as permanent that way
     * (anotherRelaysRefusedBatchOnTheSharedChannelFailsNoneOfThisBatch, once in a CI run). Closed, the
     * channel is replaced before the publish.
     */
    private void awaitEarlier(Confirms channel) throws InterruptedException {
        CompletableFuture<?>[] earlier =
                channel.unconfirmed().values().stream().map(Sent::closed).toArray(CompletableFuture[]::new);
        if (earlier.length == 0) {
            return;
        }
        try {
            CompletableFuture.allOf(earlier).get(confirmTimeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (ExecutionException | TimeoutException e) {
            // closed (publishEach opens another channel), or still unconfirmed after a confirm timeout: go on
        }
    }

    /**
     * Waits (within one confirm timeout) for each published message's confirm and notes its
     * outcome; adds to {@code unknown} the messages a channel closure left unpublished or
     * unconfirmed, and returns the closure (the one given, or the one met while waiting).
     */
    private ShutdownSignalException awaitConfirms(
            List<OutboxMessage> messages,
            Object[] outcomes,
            Sent[] sent,
            List<Integer> unknown,
            ShutdownSignalException closedBy)
            throws InterruptedException {
        long deadline = System.nanoTime() + confirmTimeout.toNanos();
        for (int i = 0; i < messages.size(); i++) {
            if (outcomes[i] != null) {
                continue;
            }
            if (sent[i] == null) {
                unknown.add(i); // not published: the channel closed before its turn
                continue;
            }
            OutboxMessage m = messages.get(i);
            try {
                boolean acked = sent[i].closed.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                outcomes[i] = acked ? confirmed(m, sent[i]) : nacked(m, sent[i]);
            } catch (ExecutionException e) {
                closedBy = (ShutdownSignalException) e.getCause();
                unknown.add(i);
            } catch (TimeoutException e) {
                outcomes[i] = PublishFailure.retryable(
                        "no confirm for " + what(m) + " within " + confirmTimeout, Receipt.NONE, e);
            }
        }
        return closedBy;
    }

    /**
     * Publishes the messages in order on the lane's channel (a new one if the broker closed it),
     * each registered under its sequence number before it goes out; stops at the first publish the
     * closing channel refuses and returns that closure (the rest stay unsent, {@code sent} null).
     */
    private ShutdownSignalException publishEach(
            Lane lane, List<OutboxMessage> messages, Object[] outcomes, Sent[] sent) {
        for (int i = 0; i < messages.size(); i++) {
            OutboxMessage m = messages.get(i);
            try {
                if (!lane.current.channel().isOpen()) {
                    lane.current = open();
                }
                Confirms current = lane.current;
                returned.remove(m.eventId());
                long seq = current.channel().getNextPublishSeqNo();
                sent[i] = new Sent(seq, current.channel().getChannelNumber(), new CompletableFuture<>());
                current.unconfirmed().put(seq, sent[i]);
                current.channel().basicPublish(exchange(m), routingKey(m), true, properties(m), m.payload());
            } catch (ShutdownSignalException e) {
                sent[i] = null; // not published (its channel's shutdown listener may be done): decided later
                return e;
            } catch (IOException e) {
                sent[i] = null;
                if (e.getCause() instanceof ShutdownSignalException signal) {
                    return signal;
                }
                outcomes[i] = PublishFailure.retryable("publishing " + what(m) + " failed: " + e, Receipt.NONE, e);
            }
        }
        return null;
    }

    private Object confirmed(OutboxMessage m, Sent sent) {
        // a returned message is confirmed after its return, so the reason is recorded by now
        String reason = returned.remove(m.eventId());
        if (reason != null) {
            return PublishFailure.permanent(
                    what(m) + " was returned unroutable (" + reason + "): no queue is bound for it;"
                            + " declare the queue or binding and replay the row",
                    new Receipt(NO_ROUTE, reason),
                    null);
        }
        return new Receipt(0, "confirmed seq=" + sent.seq() + " channel=" + sent.channel());
    }

    private static PublishFailure nacked(OutboxMessage m, Sent sent) {
        return PublishFailure.retryable(
                "the broker nacked " + what(m) + "; the relay tries again",
                new Receipt(0, "nacked seq=" + sent.seq() + " channel=" + sent.channel()),
                null);
    }

    private static String exchange(OutboxMessage m) {
        int slash = m.destination().indexOf('/');
        return slash < 0 ? "" : m.destination().substring(0, slash);
    }

    private static String routingKey(OutboxMessage m) {
        int slash = m.destination().indexOf('/');
        return slash < 0 ? m.destination() : m.destination().substring(slash + 1);
    }

    private static String what(OutboxMessage m) {
        return "row " + m.id() + " (event " + m.eventId() + ") to exchange '" + exchange(m) + "' with routing key '"
                + routingKey(m) + "'";
    }

    private static AMQP.BasicProperties properties(OutboxMessage m) {
        Map<String, Object> amqpHeaders = new HashMap<>(m.headers());
        amqpHeaders.put(OutboxMessage.EVENT_ID_HEADER, m.eventId());
        return new AMQP.BasicProperties.Builder()
                .messageId(m.eventId())
                .headers(amqpHeaders)
                .deliveryMode(2)
                .build();
    }

    // The broker closes the channel for an error in the message or its address (404 no exchange,
    // 406 refused, 311 too large): sending it again cannot succeed. A closed connection, or access
    // refused, can succeed later.
    private static PublishFailure closed(String what, ShutdownSignalException e) {
        if (!e.isHardError() && e.getReason() instanceof AMQP.Channel.Close close) {
            int code = close.getReplyCode();
            boolean retryable = code != 404 && code != 406 && code != 311;
            return new PublishFailure(
                    "the broker closed the channel publishing " + what + ": " + code
                            + " " + close.getReplyText()
                            + (retryable ? "; the relay tries again" : "; sending it again cannot succeed"),
                    retryable,
                    new Receipt(code, close.getReplyText()),
                    e);
        }
        return PublishFailure.retryable(
                "the connection closed while publishing " + what + ": " + e.getMessage(), Receipt.NONE, e);
    }

    @Override
    public void close() throws IOException {
        for (Lane lane : lanes) {
            Channel channel = lane.current.channel();
            try {
                if (channel.isOpen()) {
                    channel.close();
                }
            } catch (TimeoutException e) {
                throw new IOException("close of the publisher channel " + channel.getChannelNumber() + " timed out", e);
            }
        }
    }
}
