package dev.once.core;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;

/**
 * A data source that counts the connections taken from it (the engine takes one per transaction it
 * owns, so the count is the number of transactions a call ran) and the statements prepared on them
 * that insert into the outbox table (each is executed once, as one statement or one JDBC batch).
 */
final class CountingDataSource {

    private final AtomicInteger connections = new AtomicInteger();
    private final AtomicInteger outboxInserts = new AtomicInteger();
    private final AtomicInteger commits = new AtomicInteger();
    private final AtomicInteger rollbacks = new AtomicInteger();
    private final List<String> prepared = new CopyOnWriteArrayList<>();
    private final DataSource dataSource;

    CountingDataSource(DataSource target) {
        this.dataSource = (DataSource) Proxy.newProxyInstance(
                DataSource.class.getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                    Object result = invoke(method, target, args);
                    if (method.getName().equals("getConnection") && method.getReturnType() == Connection.class) {
                        connections.incrementAndGet();
                        return counting((Connection) result);
                    }
                    return result;
                });
    }

    private Connection counting(Connection target) {
        return (Connection) Proxy.newProxyInstance(
                Connection.class.getClassLoader(), new Class<?>[] {Connection.class}, (proxy, method, args) -> {
                    if (method.getName().equals("prepareStatement") && args[0] instanceof String any) {
                        prepared.add(any);
                    }
                    if (method.getName().equals("prepareStatement")
                            && args[0] instanceof String sql
                            && sql.trim()
                                    .toLowerCase(Locale.ROOT)
                                    .matches("(?s)insert\\s+into\\s+[\"`]?\\w*outbox[\"`]?\\s.*")) {
                        outboxInserts.incrementAndGet();
                    }
                    if (method.getName().equals("commit") && method.getParameterCount() == 0) {
                        commits.incrementAndGet();
                    }
                    if (method.getName().equals("rollback") && method.getParameterCount() == 0) {
                        rollbacks.incrementAndGet();
                    }
                    return invoke(method, target, args);
                });
    }

    /** {@code method} on {@code target}, throwing what it threw (a proxy's handler must not wrap it). */
    static Object invoke(Method method, Object target, Object[] args) throws Throwable {
        try {
            return method.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    DataSource dataSource() {
        return dataSource;
    }

    /** Connections taken since the last reset. */
    int transactions() {
        return connections.get();
    }

    /** Outbox insert statements prepared since the last reset. */
    int outboxInserts() {
        return outboxInserts.get();
    }

    /** {@code Connection.commit()} calls since the last reset. */
    int commits() {
        return commits.get();
    }

    /** {@code Connection.rollback()} calls (not to a savepoint) since the last reset. */
    int rollbacks() {
        return rollbacks.get();
    }

    /** Every statement prepared on the connections since the last reset, in order. */
    List<String> prepared() {
        return List.copyOf(prepared);
    }

    void reset() {
        prepared.clear();
        connections.set(0);
        outboxInserts.set(0);
        commits.set(0);
        rollbacks.set(0);
    }
}
