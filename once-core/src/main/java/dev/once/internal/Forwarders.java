package dev.once.internal;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.CallableStatement;
import java.sql.DatabaseMetaData;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Wrapper;

/**
 * The guarded JDBC objects that guard nothing but where they lead: a handler's result sets, its
 * connection's metadata, and what a callable statement adds to a prepared one. Each is a
 * {@link Proxy} that forwards every call to the driver's object ({@link Method#invoke}), except that
 * <ul>
 *   <li>a result set's {@code getStatement()} is the guarded statement that produced it (or the
 *       driver's, guarded), and a failed {@code next()} (a fetch of the next rows, which can abort the
 *       transaction) is reported to the guard;
 *   <li>metadata's {@code getConnection()} is the guard;
 *   <li>every result set a call returns is guarded in turn (metadata queries, a cursor read with
 *       {@code getObject});
 *   <li>{@code unwrap} never hands out the driver's connection or statement ({@link Guards#unwrap});
 *   <li>a callable statement sends what {@code PreparedStatement} and {@code Statement} declare to a
 *       hand-written {@link GuardedPreparedStatement} (its SQL rules, its failures reported), and only
 *       what {@code CallableStatement} adds to the driver's; its result sets lead back to it;
 *   <li>{@code equals} and {@code hashCode} are identity, {@code toString} is the driver object's.
 * </ul>
 * The statements and the connection, which carry the guard's rules and run on every statement a
 * handler issues, stay hand-written.
 *
 * <p>What it costs, measured by ForwardBench (once-bench, JMH, PostgreSQL on loopback, load
 * 11-12 on 2 cores, 5 + 5 one-second iterations), ns per call, raw driver / the hand-written
 * delegates these replaced / Proxy: a fetched row read ({@code next} + {@code getLong} +
 * {@code getString}) 41 / 68 / 112 (48 / 48 / 96 B); {@code DatabaseMetaData.getDatabaseMajorVersion}
 * 68 / 53 / 102; {@code CallableStatement.getLong} 2.8 / 5.8 / 9.3. A {@code prepareStatement} +
 * {@code executeUpdate} round trip: 90,000 raw, 146,000 through the guarded connection. The Proxy
 * adds at most about 50 ns a call over the hand-written form, 0.05 % of one round trip.
 *
 * <p>Not API.
 */
final class Forwarders {

    private static final ClassLoader LOADER = Forwarders.class.getClassLoader();
    private static final Class<?>[] RESULT_SET = {ResultSet.class};
    private static final Class<?>[] META_DATA = {DatabaseMetaData.class};
    private static final Class<?>[] CALLABLE = {CallableStatement.class};

    private Forwarders() {}

    /**
     * A guarded result set, or null for null.
     *
     * @param statement the guarded statement that produced it, or null to guard the driver's
     */
    static ResultSet resultSet(GuardedConnection connection, Statement statement, ResultSet rs) {
        return rs == null
                ? null
                : (ResultSet)
                        Proxy.newProxyInstance(LOADER, RESULT_SET, new ResultSetForwarder(connection, statement, rs));
    }

    /** The guarded connection's metadata. */
    static DatabaseMetaData metaData(GuardedConnection connection, DatabaseMetaData md) {
        return (DatabaseMetaData) Proxy.newProxyInstance(LOADER, META_DATA, new MetaDataForwarder(connection, md));
    }

    /** A handler's callable statement; its SQL was checked when it was prepared. */
    static CallableStatement callable(GuardedConnection connection, CallableStatement cs) {
        return (CallableStatement) Proxy.newProxyInstance(
                LOADER, CALLABLE, new CallableForwarder(new GuardedPreparedStatement<>(connection, cs), cs));
    }

    /** What every forwarder does alike: identity, unwrap, guarded result sets, the call itself. */
    private abstract static class Forwarder implements InvocationHandler {
        final GuardedConnection connection;
        final Wrapper delegate;

        Forwarder(GuardedConnection connection, Wrapper delegate) {
            this.connection = connection;
            this.delegate = delegate;
        }

        @Override
        public final Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
            if (method.getDeclaringClass() == Object.class) {
                return switch (method.getName()) {
                    case "equals" -> proxy == args[0];
                    case "hashCode" -> System.identityHashCode(proxy);
                    default -> delegate.toString();
                };
            }
            if (method.getName().equals("unwrap") && method.getDeclaringClass() == Wrapper.class) {
                return Guards.unwrap(connection, (Wrapper) proxy, delegate, (Class<?>) args[0]);
            }
            Object result = call(proxy, method, args);
            return result instanceof ResultSet rs ? guarded(proxy, rs) : result;
        }

        /** The call, forwarded; a result set it returns is guarded by {@link #guarded}. */
        abstract Object call(Object proxy, Method method, Object[] args) throws Throwable;

        /** A result set a call returned, guarded (unless it already is). */
        Object guarded(Object proxy, ResultSet rs) {
            return Proxy.isProxyClass(rs.getClass()) && Proxy.getInvocationHandler(rs) instanceof ResultSetForwarder
                    ? rs
                    : resultSet(connection, null, rs);
        }

        static Object forward(Object target, Method method, Object[] args) throws Throwable {
            try {
                return method.invoke(target, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        }
    }

    private static final class ResultSetForwarder extends Forwarder {
        private final Statement statement;
        private final ResultSet rs;

        ResultSetForwarder(GuardedConnection connection, Statement statement, ResultSet rs) {
            super(connection, rs);
            this.statement = statement;
            this.rs = rs;
        }

        @Override
        Object call(Object proxy, Method method, Object[] args) throws Throwable {
            switch (method.getName()) {
                case "next":
                    try {
                        return rs.next(); // a fetch of the next rows can fail (and abort the transaction)
                    } catch (SQLException e) {
                        throw connection.failed(e);
                    }
                case "getStatement":
                    return statement != null ? statement : Guards.statement(connection, rs.getStatement());
                default:
                    return forward(rs, method, args);
            }
        }
    }

    private static final class MetaDataForwarder extends Forwarder {
        MetaDataForwarder(GuardedConnection connection, DatabaseMetaData md) {
            super(connection, md);
        }

        @Override
        Object call(Object proxy, Method method, Object[] args) throws Throwable {
            return method.getName().equals("getConnection") && method.getParameterCount() == 0
                    ? connection
                    : forward(delegate, method, args);
        }
    }

    private static final class CallableForwarder extends Forwarder {
        private final GuardedPreparedStatement<CallableStatement> guarded;

        CallableForwarder(GuardedPreparedStatement<CallableStatement> guarded, CallableStatement cs) {
            super(guarded.connection, cs);
            this.guarded = guarded;
        }

        @Override
        Object call(Object proxy, Method method, Object[] args) throws Throwable {
            return forward(method.getDeclaringClass() == CallableStatement.class ? delegate : guarded, method, args);
        }

        /** Its result sets lead back to it, not to the prepared statement it runs its rules through. */
        @Override
        Object guarded(Object proxy, ResultSet rs) {
            if (Proxy.isProxyClass(rs.getClass()) && Proxy.getInvocationHandler(rs) instanceof ResultSetForwarder f) {
                return resultSet(connection, (Statement) proxy, f.rs);
            }
            return resultSet(connection, (Statement) proxy, rs);
        }
    }
}
