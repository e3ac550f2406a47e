package dev.once.testkit.broker;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.PermanentFailureException;
import dev.once.Tx;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The business effect every broker contract case checks: one ledger row per event, with the
 * amount from the payload. The table has no unique constraint on purpose, so an effect applied
 * twice shows up as two rows instead of being hidden by an error. A payload of
 * {@value #POISON} fails permanently. One event id can be held at a gate, to keep a claim
 * open while a second delivery of the same event arrives.
 */
final class LedgerHandler implements Handler {

    static final String POISON = "poison";
    static final String TABLE = "broker_ledger";
    static final String CREATE = "CREATE TABLE " + TABLE
            + " (seq bigserial PRIMARY KEY, event_id varchar(255) NOT NULL, amount bigint NOT NULL, attempt int NOT NULL)";

    private static final Duration GATE_LIMIT = Duration.ofSeconds(60);

    private volatile String gatedEventId;
    private final CountDownLatch entered = new CountDownLatch(1);
    private final CountDownLatch released = new CountDownLatch(1);

    /** Holds the first delivery of {@code eventId} inside its transaction until {@link #release()}. */
    void gate(String eventId) {
        this.gatedEventId = eventId;
    }

    boolean awaitEntered(Duration timeout) throws InterruptedException {
        return entered.await(timeout.toMillis(), TimeUnit.MILLISECONDS);
    }

    void release() {
        released.countDown();
    }

    @Override
    public void handle(Delivery delivery, Tx tx) throws Exception {
        String body = delivery.payloadText();
        if (body.equals(POISON)) {
            throw new PermanentFailureException(
                    "payload '" + body + "' of event " + delivery.eventId() + " is not an amount");
        }
        try (PreparedStatement ps = tx.connection()
                .prepareStatement("INSERT INTO " + TABLE + " (event_id, amount, attempt) VALUES (?, ?, ?)")) {
            ps.setString(1, delivery.eventId()); // 1: event id
            ps.setLong(2, Long.parseLong(body)); // 2: amount
            ps.setInt(3, delivery.attempt()); // 3: broker attempt, for the record
            ps.executeUpdate();
        }
        if (delivery.eventId().equals(gatedEventId) && entered.getCount() > 0) {
            entered.countDown();
            if (!released.await(GATE_LIMIT.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("gate on " + gatedEventId + " was not released within " + GATE_LIMIT);
            }
        }
    }

    /** Rows per event id. */
    static Map<String, Integer> rows(Connection c) throws SQLException {
        Map<String, Integer> rows = new HashMap<>();
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT event_id, count(*) FROM " + TABLE + " GROUP BY event_id")) {
            while (rs.next()) {
                rows.put(rs.getString(1), rs.getInt(2));
            }
        }
        return rows;
    }

    static long balance(Connection c) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT coalesce(sum(amount), 0) FROM " + TABLE)) {
            rs.next();
            return rs.getLong(1);
        }
    }
}
