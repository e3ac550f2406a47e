package dev.once.testsupport;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import javax.sql.DataSource;

/**
 * The business effect of the broker adapters' state machines and the scripts that say how a
 * handler's first calls for an event go: a row in {@code effect} per applied event (no unique key,
 * so an effect applied twice shows as two rows). Without engine types: a test's handler throws its
 * engine's exceptions for the failing steps and hands the others to {@link #apply}. Thread-safe.
 */
public final class ScriptedEffects {

    /** What the handler does on one call for an event. */
    public enum Step {
        OK,
        RETRYABLE,
        PERMANENT,
        /** Its effect statement fails; it catches the SQLException and returns normally. */
        SWALLOW,
        /** Writes its effect after the test's slow wait (past a lock timeout, a visibility timeout, a lease). */
        SLOW
    }

    public static final String CREATE = "CREATE TABLE effect (seq bigserial PRIMARY KEY, event_id text NOT NULL,"
            + " copy text NOT NULL, attempt int NOT NULL CHECK (attempt > 0))";

    private final Map<String, Queue<Step>> scripts = new ConcurrentHashMap<>();

    /** No scripts yet: every call is {@link Step#OK}. */
    public ScriptedEffects() {}

    /** The steps of the handler's first calls for {@code eventId}; later calls are {@link Step#OK}. */
    public void script(String eventId, List<Step> steps) {
        scripts.put(eventId, new ConcurrentLinkedQueue<>(steps));
    }

    /** The step of this call for {@code eventId}, consumed. */
    public Step next(String eventId) {
        Queue<Step> script = scripts.get(eventId);
        Step s = script == null ? null : script.poll();
        return s == null ? Step.OK : s;
    }

    /**
     * Runs a step that does not throw: {@link Step#OK} writes the effect, {@link Step#SWALLOW} writes
     * one the CHECK refuses and swallows the SQLException (the handler bug under test: its transaction
     * is aborted and it returns normally), {@link Step#SLOW} runs {@code slow} first, then writes.
     */
    public static void apply(Step step, Connection c, String eventId, String copy, int attempt, Runnable slow)
            throws SQLException {
        switch (step) {
            case SWALLOW -> {
                try {
                    write(c, eventId, copy, -1);
                } catch (SQLException swallowed) {
                    // the bug under test
                }
            }
            case SLOW -> {
                slow.run();
                write(c, eventId, copy, attempt);
            }
            case OK -> write(c, eventId, copy, attempt);
            default -> throw new IllegalArgumentException(step + " is the test's to throw");
        }
    }

    private static void write(Connection c, String eventId, String copy, int attempt) throws SQLException {
        try (PreparedStatement ps =
                c.prepareStatement("INSERT INTO effect (event_id, copy, attempt) VALUES (?, ?, ?)")) {
            ps.setString(1, eventId);
            ps.setString(2, copy);
            ps.setInt(3, attempt);
            ps.executeUpdate();
        }
    }

    /** Effect rows per event id. */
    public static Map<String, Long> counts(DataSource ds) {
        Map<String, Long> counts = new HashMap<>();
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT event_id, count(*) FROM effect GROUP BY event_id");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                counts.put(rs.getString(1), rs.getLong(2));
            }
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
        return counts;
    }

    /** {@code target}, except that every successful {@code commit()} runs {@code hook} before it returns (the ack gap). */
    public static DataSource afterCommit(DataSource target, Runnable hook) {
        return (DataSource) Proxy.newProxyInstance(
                ScriptedEffects.class.getClassLoader(), new Class<?>[] {DataSource.class}, (p, m, args) -> {
                    Object result = invoke(m, target, args);
                    if (result instanceof Connection c) {
                        return Proxy.newProxyInstance(
                                ScriptedEffects.class.getClassLoader(),
                                new Class<?>[] {Connection.class},
                                (cp, cm, ca) -> {
                                    Object r = invoke(cm, c, ca);
                                    if (cm.getName().equals("commit")) {
                                        hook.run();
                                    }
                                    return r;
                                });
                    }
                    return result;
                });
    }

    /** {@code m} on {@code target}, throwing what it threw (for a test's own proxies). */
    public static Object invoke(Method m, Object target, Object[] args) throws Throwable {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}
