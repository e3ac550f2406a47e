package dev.once.sqs;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Inbox;
import dev.once.Outcome;
import dev.once.RetryableException;
import dev.once.StreamPositions;
import dev.once.Tx;
import dev.once.testsupport.TestDatabase;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

/**
 * The test business effect (one row per applied event in {@code effect}, in commit order) and a
 * consumer wrapper that records every delivery and outcome the adapter produced.
 */
final class Recorder implements IdempotentConsumer {

    static final String CREATE = "CREATE TABLE effect (seq bigserial PRIMARY KEY, event_id text NOT NULL,"
            + " body text NOT NULL, attempt int NOT NULL)";
    /** The engine's consumer name: another engine with it competes for the same claims. */
    static final String CONSUMER = "sqs-test";

    final List<Delivery> deliveries = new CopyOnWriteArrayList<>();
    final List<Outcome> outcomes = new CopyOnWriteArrayList<>();
    /** The size of each ordered run the adapter handed over. */
    final List<Integer> runs = new CopyOnWriteArrayList<>();

    private final IdempotentConsumer delegate;
    private volatile Consumer<Delivery> onDelivery = d -> {};

    Recorder(TestDatabase db, Slow slow) {
        this(db, null, slow);
    }

    /** @param lockTimeout how long a claim waits for another delivery's (null: the database's default) */
    Recorder(TestDatabase db, Duration lockTimeout, Slow slow) {
        db.execute(CREATE);
        this.delegate = IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer(CONSUMER)
                .handler((d, tx) -> apply(d, tx, slow))
                .lockTimeout(lockTimeout)
                .build();
    }

    /** What the handler does before it writes: wait, or fail. */
    @FunctionalInterface
    interface Slow {
        void before(Delivery d) throws Exception;
    }

    void onDelivery(Consumer<Delivery> listener) {
        this.onDelivery = listener;
    }

    private static void apply(Delivery d, Tx tx, Slow slow) throws Exception {
        slow.before(d);
        if (d.payloadText().startsWith("fail-once") && d.attempt() == 1) {
            throw new RetryableException("first attempt of " + d.eventId() + " fails on purpose");
        }
        try (PreparedStatement ps =
                tx.connection().prepareStatement("INSERT INTO effect (event_id, body, attempt) VALUES (?, ?, ?)")) {
            ps.setString(1, d.eventId()); // 1: event id
            ps.setString(2, d.payloadText()); // 2: body
            ps.setInt(3, d.attempt()); // 3: attempt
            ps.executeUpdate();
        }
    }

    @Override
    public String consumer() {
        return delegate.consumer();
    }

    @Override
    public Inbox inbox() {
        return delegate.inbox();
    }

    @Override
    public Outcome process(Delivery d) {
        deliveries.add(d);
        onDelivery.accept(d);
        Outcome o = delegate.process(d);
        outcomes.add(o);
        return o;
    }

    @Override
    public List<Outcome> processBatch(List<Delivery> ds) {
        deliveries.addAll(ds);
        ds.forEach(onDelivery);
        List<Outcome> os = delegate.processBatch(ds);
        outcomes.addAll(os);
        return os;
    }

    @Override
    public List<Outcome> processInOrder(List<Delivery> ds) {
        deliveries.addAll(ds);
        ds.forEach(onDelivery);
        runs.add(ds.size());
        List<Outcome> os = delegate.processInOrder(ds);
        outcomes.addAll(os);
        return os;
    }

    @Override
    public List<Outcome> processInOrder(List<Delivery> ds, StreamPositions positions) {
        deliveries.addAll(ds);
        ds.forEach(onDelivery);
        runs.add(ds.size());
        List<Outcome> os = delegate.processInOrder(ds, positions);
        outcomes.addAll(os);
        return os;
    }

    long count(String eventId, Outcome.Status status) {
        return outcomes.stream()
                .filter(o -> o.eventId().equals(eventId) && o.status() == status)
                .count();
    }
}
