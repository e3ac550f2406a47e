package dev.once.cli.demo;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import java.nio.charset.StandardCharsets;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;

/**
 * The consumer built on {@link IdempotentConsumer}: each batch claims the event ids in the same
 * PostgreSQL transaction that credits the ledger and enqueues the charge in the outbox, with the
 * idempotency key {@code charge:<payment>}. A delivery whose id is already claimed is discarded.
 */
final class OnceLane extends Lane {

    static final String NAME = "once";
    static final String CONSUMER = "once-demo";
    private static final int DISCARDS_SHOWN = 8;

    /** A discarded duplicate, as the page lists it. */
    record Discard(String paymentId, String reason, String worker) {}

    final AtomicLong applied = new AtomicLong();
    final AtomicLong discardedCount = new AtomicLong();
    final AtomicLong discardedAmount = new AtomicLong();
    private final Deque<Discard> discarded = new ArrayDeque<>();
    private final IdempotentConsumer consumer;

    OnceLane(String bootstrap, String topic, String group, Faults faults, DataSource dataSource, String chargesUrl) {
        super(NAME, bootstrap, topic, group, faults);
        this.consumer = IdempotentConsumer.builder()
                .dataSource(dataSource)
                .consumer(CONSUMER)
                // Below max.poll.interval.ms: a worker waiting on a concurrent claim keeps its membership.
                .lockTimeout(Duration.ofSeconds(1))
                .handler((d, tx) -> {
                    Payment p = Payment.of(d.eventId(), d.payloadText());
                    try (PreparedStatement ps = tx.connection().prepareStatement(DemoSql.credit("once_ledger"))) {
                        ps.setString(1, p.eventId()); // 1 event id
                        ps.setString(2, p.paymentId()); // 2 payment id
                        ps.setInt(3, p.amount()); // 3 amount
                        ps.setString(4, d.headers().getOrDefault("worker", "")); // 4 worker
                        ps.executeUpdate();
                    }
                    tx.outbox()
                            .add(
                                    chargesUrl,
                                    p.paymentId(),
                                    p.body().getBytes(StandardCharsets.UTF_8),
                                    Map.of(PaymentProvider.CALLER, NAME),
                                    "charge:" + p.paymentId());
                })
                .build();
    }

    @Override
    boolean[] process(List<Payment> batch, String worker) {
        List<Delivery> deliveries = new ArrayList<>();
        for (Payment p : batch) {
            deliveries.add(Delivery.builder(p.eventId())
                    .type("payment")
                    .payload(p.body())
                    .headers(Map.of("worker", worker))
                    .source("kafka")
                    .build());
        }
        List<Outcome> outcomes = consumer.processBatch(deliveries);
        boolean[] ack = new boolean[batch.size()];
        for (int i = 0; i < batch.size(); i++) {
            Payment p = batch.get(i);
            Outcome o = outcomes.get(i);
            ack[i] = o.shouldAcknowledge();
            switch (o.status()) {
                case APPLIED -> {
                    applied.incrementAndGet();
                    log(worker + " claimed " + p.eventId() + ": +$" + p.amount() + ", charge queued in the outbox");
                }
                case DUPLICATE -> {
                    Fault f = faults.of(p.eventId());
                    String reason = f == null ? "redelivered" : f.reason;
                    discardedCount.incrementAndGet();
                    discardedAmount.addAndGet(p.amount());
                    synchronized (discarded) {
                        discarded.addFirst(new Discard(p.paymentId(), reason, worker));
                        while (discarded.size() > DISCARDS_SHOWN) {
                            discarded.removeLast();
                        }
                    }
                    log(worker + " discarded " + p.eventId() + ": id already claimed (" + reason + ")");
                }
                default ->
                    log(worker + " left " + p.eventId() + " for redelivery: " + o.tag()
                            + (o.failure() == null ? "" : " (" + o.failure().getMessage() + ")"));
            }
        }
        return ack;
    }

    List<Discard> recentDiscards() {
        synchronized (discarded) {
            return List.copyOf(discarded);
        }
    }
}
