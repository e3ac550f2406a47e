package dev.once.testkit.broker;

import dev.once.BatchHandler;
import dev.once.BatchTx;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.PermanentFailureException;
import dev.once.RetryableException;
import dev.once.Tx;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import javax.sql.DataSource;

/**
 * The handler of the broker adapters' state machines: what it does on its first calls for an event
 * is scripted ({@link Behaviour}), after the script it writes the effect. The effect is a row of
 * its own table per application, with the copy that caused it (header {@value #COPY_HEADER}, set by
 * the test's publisher), the delivery's source and attempt; no unique constraint on the event id, on
 * purpose, so an effect applied twice shows up as a second row. As a {@link BatchHandler} it runs each
 * claimed delivery's script in turn, in the batch's transaction: one throwing fails the whole batch. A table per handler: a chain that
 * jqwik's bounded shrinking left running in the background must not drop or fill the next one's.
 */
public final class ScriptedHandler implements Handler, BatchHandler {

    /** Header naming the published copy of an event ({@code <event id>#<n>}). */
    public static final String COPY_HEADER = "test-copy";

    /** What the handler does on one call for an event. */
    public enum Behaviour {
        OK,
        RETRYABLE,
        PERMANENT,
        /** Its effect statement fails (violates a CHECK); it catches the SQLException and returns normally. */
        SWALLOW,
        /** Writes its effect after the handler's {@link Slow} wait (past a lock timeout, an ack wait, a lease). */
        SLOW
    }

    /** What a {@link Behaviour#SLOW} call waits for before it writes its effect. */
    @FunctionalInterface
    public interface Slow {
        void await(Delivery d) throws InterruptedException;
    }

    /** One effect row. */
    public record Effect(long seq, String eventId, String copy, String source) {}

    private final String table;
    private final Slow slow;
    private final Map<String, Queue<Behaviour>> scripts = new ConcurrentHashMap<>();

    /**
     * @param table      the effect table, made afresh by {@link #createTable}
     * @param slowMillis how long a {@link Behaviour#SLOW} call takes before it writes its effect
     */
    public ScriptedHandler(String table, long slowMillis) {
        this(table, d -> Thread.sleep(slowMillis));
    }

    /**
     * @param table the effect table, made afresh by {@link #createTable}
     * @param slow  what a {@link Behaviour#SLOW} call waits for before it writes its effect
     */
    public ScriptedHandler(String table, Slow slow) {
        if (!table.matches("[a-z][a-z0-9_]*")) {
            throw new IllegalArgumentException("table must be a plain lower-case name, but was '" + table + "'");
        }
        this.table = table;
        this.slow = slow;
    }

    /** Makes the effect table afresh. */
    public void createTable(DataSource ds) {
        try (Connection c = ds.getConnection();
                java.sql.Statement s = c.createStatement()) {
            s.execute("DROP TABLE IF EXISTS " + table);
            s.execute("CREATE TABLE " + table + " (seq bigserial PRIMARY KEY, event_id text NOT NULL,"
                    + " copy text NOT NULL, source text NOT NULL, attempt int NOT NULL CHECK (attempt > 0))");
        } catch (SQLException e) {
            throw new IllegalStateException("cannot make the effect table " + table, e);
        }
    }

    /** The handler's first calls for {@code eventId}, one behaviour per call; then it applies the event. */
    public void script(String eventId, List<Behaviour> script) {
        scripts.put(eventId, new ConcurrentLinkedQueue<>(script));
    }

    @Override
    public void handle(Delivery d, Tx tx) throws Exception {
        handle(d, tx.connection());
    }

    @Override
    public void handle(List<Delivery> claimed, BatchTx tx) throws Exception {
        for (Delivery d : claimed) {
            handle(d, tx.connection());
        }
    }

    private void handle(Delivery d, Connection c) throws Exception {
        Queue<Behaviour> script = scripts.get(d.eventId());
        Behaviour b = script == null ? null : script.poll();
        String copy = d.headers().get(COPY_HEADER);
        switch (b == null ? Behaviour.OK : b) {
            case RETRYABLE -> throw new RetryableException("scripted retryable failure of " + copy);
            case PERMANENT -> throw new PermanentFailureException("scripted permanent failure of " + copy);
            case SWALLOW -> {
                try {
                    effect(c, d, copy, -1); // violates the CHECK
                } catch (SQLException swallowed) {
                    // the handler's bug under test: the transaction is aborted, the handler returns
                }
            }
            case SLOW -> {
                try {
                    slow.await(d);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new RetryableException("interrupted", e);
                }
                effect(c, d, copy, d.attempt());
            }
            default -> effect(c, d, copy, d.attempt());
        }
    }

    private void effect(Connection c, Delivery d, String copy, int attempt) throws SQLException {
        try (PreparedStatement ps =
                c.prepareStatement("INSERT INTO " + table + " (event_id, copy, source, attempt) VALUES (?, ?, ?, ?)")) {
            ps.setString(1, d.eventId()); // 1: event id
            ps.setString(2, copy); // 2: copy
            ps.setString(3, d.source() == null ? "" : d.source()); // 3: source
            ps.setInt(4, attempt); // 4: attempt
            ps.executeUpdate();
        }
    }

    /** Committed effects per event id. */
    public Map<String, Long> effects(DataSource ds) {
        Map<String, Long> counts = new HashMap<>();
        for (Effect e : effectRows(ds)) {
            counts.merge(e.eventId(), 1L, Long::sum);
        }
        return counts;
    }

    /** Committed effect rows in the order they were written. */
    public List<Effect> effectRows(DataSource ds) {
        List<Effect> rows = new ArrayList<>();
        try (Connection c = ds.getConnection();
                PreparedStatement ps =
                        c.prepareStatement("SELECT seq, event_id, copy, source FROM " + table + " ORDER BY seq");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                rows.add(new Effect(rs.getLong(1), rs.getString(2), rs.getString(3), rs.getString(4)));
            }
        } catch (SQLException e) {
            throw new IllegalStateException("cannot read the effects", e);
        }
        return rows;
    }
}
