package dev.once.testkit.broker;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import javax.sql.DataSource;

/**
 * Reflective proxies the broker adapters' tests put around real clients: a data source whose commits
 * run a hook (the ack gap: committed, not yet acknowledged), and the call through to the real object.
 */
public final class Proxies {

    private Proxies() {}

    /** {@code target}, except that every successful {@code commit()} runs {@code hook} before it returns. */
    public static DataSource afterCommit(DataSource target, Runnable hook) {
        return (DataSource) Proxy.newProxyInstance(
                Proxies.class.getClassLoader(), new Class<?>[] {DataSource.class}, (p, m, args) -> {
                    Object result = invoke(m, target, args);
                    if (result instanceof Connection c) {
                        return Proxy.newProxyInstance(
                                Proxies.class.getClassLoader(), new Class<?>[] {Connection.class}, (cp, cm, ca) -> {
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

    /** {@code m} on {@code target}, throwing what it threw rather than its reflective wrapper. */
    public static Object invoke(Method m, Object target, Object[] args) throws Throwable {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}
