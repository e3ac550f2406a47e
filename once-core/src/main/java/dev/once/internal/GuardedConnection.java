package dev.once.internal;

import dev.once.HandlerMisuseException;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.util.Set;

/**
 * The connection a handler gets: everything passes through except the calls that would end or
 * reshape the claim transaction. A refused call is remembered, so a handler that catches the
 * exception and carries on is still rolled back. Not API.
 */
public final class GuardedConnection implements InvocationHandler {

    private static final Set<String> REFUSED =
            Set.of("commit", "close", "setAutoCommit", "abort", "setTransactionIsolation", "setReadOnly");

    private final Connection delegate;
    private final Connection proxy;
    private volatile String misuse;

    public GuardedConnection(Connection delegate) {
        this.delegate = delegate;
        this.proxy = (Connection) Proxy.newProxyInstance(Connection.class.getClassLoader(),
                new Class<?>[] {Connection.class}, this);
    }

    public Connection connection() {
        return proxy;
    }

    /** The refused call, or null if the handler kept to its part. */
    public String misuse() {
        return misuse;
    }

    @Override
    public Object invoke(Object p, Method method, Object[] args) throws Throwable {
        String name = method.getName();
        // rollback(Savepoint) only undoes the handler's own work; rollback() would drop the claim.
        boolean refused = REFUSED.contains(name) || ("rollback".equals(name) && (args == null || args.length == 0));
        if (refused) {
            misuse = name;
            throw new HandlerMisuseException("handler called Connection." + name
                    + "() on the claim transaction; the engine commits or rolls back the claim and the effect together,"
                    + " so this delivery is rolled back and reported as a permanent failure: remove the call");
        }
        if ("unwrap".equals(name) && args[0] == Connection.class) {
            return proxy;
        }
        try {
            return method.invoke(delegate, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}
