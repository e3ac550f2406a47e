package dev.once.core;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;

/**
 * A data source that counts the connections taken from it: the engine takes one per transaction
 * it owns, so the count is the number of transactions a call ran.
 */
final class CountingDataSource {

    private final AtomicInteger connections = new AtomicInteger();
    private final DataSource dataSource;

    CountingDataSource(DataSource target) {
        this.dataSource = (DataSource) Proxy.newProxyInstance(
                DataSource.class.getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
                    if (method.getName().equals("getConnection") && method.getReturnType() == Connection.class) {
                        connections.incrementAndGet();
                    }
                    try {
                        return method.invoke(target, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    DataSource dataSource() {
        return dataSource;
    }

    /** Connections taken since the last reset. */
    int transactions() {
        return connections.get();
    }

    void reset() {
        connections.set(0);
    }
}
