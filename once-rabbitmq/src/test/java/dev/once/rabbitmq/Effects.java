package dev.once.rabbitmq;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.PermanentFailureException;
import dev.once.RetryableException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import javax.sql.DataSource;

/** The test business effect (a row per applied event) and a data source that runs a hook after each commit. */
final class Effects {

    static final String CREATE =
            "CREATE TABLE effect (seq bigserial PRIMARY KEY, event_id text NOT NULL, attempt int NOT NULL)";

    private Effects() {}

    /** Body "retry" always fails retryably, "poison" permanently; anything else writes a row. */
    static final Handler HANDLER = (Delivery d, dev.once.Tx tx) -> {
        switch (d.payloadText()) {
            case "retry" -> throw new RetryableException("event " + d.eventId() + " always fails retryably");
            case "poison" -> throw new PermanentFailureException("event " + d.eventId() + " can never succeed");
            default -> {
                try (PreparedStatement ps =
                        tx.connection().prepareStatement("INSERT INTO effect (event_id, attempt) VALUES (?, ?)")) {
                    ps.setString(1, d.eventId()); // 1: event id
                    ps.setInt(2, d.attempt()); // 2: attempt
                    ps.executeUpdate();
                }
            }
        }
    };

    /** {@code target}, except that every successful {@code commit()} runs {@code afterCommit} before it returns. */
    static DataSource afterCommit(DataSource target, Runnable afterCommit) {
        return (DataSource) Proxy.newProxyInstance(
                Effects.class.getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                    Object result = invoke(method, target, args);
                    if (result instanceof Connection c) {
                        return Proxy.newProxyInstance(
                                Effects.class.getClassLoader(), new Class<?>[] {Connection.class}, (p, m, a) -> {
                                    Object r = invoke(m, c, a);
                                    if (m.getName().equals("commit")) {
                                        afterCommit.run();
                                    }
                                    return r;
                                });
                    }
                    return result;
                });
    }

    private static Object invoke(java.lang.reflect.Method method, Object target, Object[] args) throws Throwable {
        try {
            return method.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}
