package dev.once.bench.jmh;

import dev.once.OutboxHeaders;
import dev.once.internal.ClaimWatch;
import dev.once.internal.GuardedConnection;
import dev.once.internal.OutboxBuffer;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.time.Clock;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What the guarded JDBC objects that only forward ({@code GuardedResultSet}, {@code GuardedMetaData},
 * the extra methods of {@code GuardedCallableStatement}) cost per call, three ways on one real pgjdbc
 * connection: the driver's own object ({@code *Raw}), what the engine hands a handler
 * ({@code *Guarded}, reached through a {@link GuardedConnection}: the hand-written delegates until
 * issue 24, measured below, and since then the engine's own Proxy forwarders,
 * {@code dev.once.internal.Forwarders}), and this class's {@link Proxy} copy of those forwarders
 * ({@code *Proxy}: a result set's {@code getStatement} leads back to the guard and its {@code next}
 * reports a failure, metadata's {@code getConnection} is the guard and its result sets are wrapped;
 * everything else is {@link Method#invoke}). Issue 24: the hand-written form stays only if it wins
 * by something visible beside a round trip.
 *
 * <p>Issue 24's run (the hand-written delegates as {@code *Guarded}; load 11-12 on 2 cores), ns per
 * call, raw / hand-written / Proxy: row read 41 / 68 / 112 (B per row 48 / 48 / 96), metadata
 * 68 / 53 / 102, callable OUT parameter 2.8 / 5.8 / 9.3; update round trip 90,000 raw, 146,000
 * guarded. The Proxy's added cost (at most about 50 ns a call) is 0.05 % of a round trip, so the
 * engine forwards these three types through a Proxy since.
 *
 * <ul>
 *   <li>{@code rowRead*}: {@code next()} + {@code getLong(1)} + {@code getString(2)} over a fetched,
 *       scrollable 100-row result ({@code beforeFirst()} once per 100 rows); ns per row, all
 *       client-side.
 *   <li>{@code metaData*}: {@code getDatabaseMajorVersion()}, answered by pgjdbc without the server.
 *   <li>{@code callableOut*}: {@code CallableStatement.getLong(1)} on an executed call's OUT parameter
 *       (a method only {@code CallableStatement} declares).
 *   <li>{@code updateRoundTrip*}: {@code prepareStatement} + {@code setLong} + {@code executeUpdate} of a
 *       one-row update of a temporary table, auto-commit on, raw and through the guarded connection
 *       (which lexes the SQL): the database round trip every handler statement costs, which the
 *       forwarding cost is weighed against.
 * </ul>
 *
 * <p>The database comes from the system property {@value GuardBench#URL_PROPERTY}, default
 * {@code jdbc:postgresql://127.0.0.1:5432/test?user=postgres}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Thread)
@Fork(
        value = 1,
        jvmArgsAppend = {"-Xms256m", "-Xmx256m"})
@Warmup(iterations = 5, time = 1)
@Measurement(iterations = 5, time = 1)
public class ForwardBench {

    static final int ROWS = 100;

    private Connection raw;
    private Connection guarded;

    private ResultSet rowsRaw;
    private ResultSet rowsGuarded;
    private ResultSet rowsProxy;

    private DatabaseMetaData metaRaw;
    private DatabaseMetaData metaGuarded;
    private DatabaseMetaData metaProxy;

    private CallableStatement callRaw;
    private CallableStatement callGuarded;
    private CallableStatement callProxy;

    private long next;

    @Setup(Level.Trial)
    public void open() throws SQLException {
        String url = System.getProperty(GuardBench.URL_PROPERTY, "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
        raw = DriverManager.getConnection(url);
        guarded = new GuardedConnection(raw, watch(raw));
        try (Statement s = raw.createStatement()) {
            s.execute("CREATE TEMPORARY TABLE forward_bench (id bigint PRIMARY KEY, n bigint NOT NULL)");
            s.execute("INSERT INTO forward_bench VALUES (1, 0)");
        }
        String rows = "SELECT g, 'row ' || g FROM generate_series(1, " + ROWS + ") g";
        rowsRaw = scrollable(raw, rows);
        rowsGuarded = scrollable(guarded, rows);
        rowsProxy = Forwarders.resultSet(guarded, null, scrollable(raw, rows));

        metaRaw = raw.getMetaData();
        metaGuarded = guarded.getMetaData();
        metaProxy = Forwarders.metaData(guarded, raw.getMetaData());

        String call = "{? = call abs(?::bigint)}";
        callRaw = executedCall(raw.prepareCall(call));
        callGuarded = executedCall(guarded.prepareCall(call));
        // The proxy sends what PreparedStatement and Statement declare to the guarded statement (the
        // rules stay hand-written there) and only CallableStatement's own methods to the driver's.
        callProxy = Forwarders.callable(executedCall(guarded.prepareCall(call)), executedCall(raw.prepareCall(call)));
    }

    private static ResultSet scrollable(Connection c, String sql) throws SQLException {
        PreparedStatement ps = c.prepareStatement(sql, ResultSet.TYPE_SCROLL_INSENSITIVE, ResultSet.CONCUR_READ_ONLY);
        return ps.executeQuery();
    }

    private static CallableStatement executedCall(CallableStatement cs) throws SQLException {
        cs.registerOutParameter(1, Types.BIGINT);
        cs.setLong(2, -42);
        cs.execute();
        return cs;
    }

    /** What the engine gives the guard of one claim transaction (what the handler was seen doing). */
    private static ClaimWatch watch(Connection raw) {
        return new ClaimWatch(
                new OutboxBuffer(raw, Dialects.POSTGRESQL, TablePrefix.DEFAULT, Clock.systemUTC(), OutboxHeaders.NONE),
                Dialects.POSTGRESQL,
                ClaimWatch.inboxTable(TablePrefix.DEFAULT));
    }

    @TearDown(Level.Trial)
    public void close() throws SQLException {
        raw.close();
    }

    // ---- a fetched result, row by row ------------------------------------------------------

    @Benchmark
    @OperationsPerInvocation(ROWS)
    public long rowReadRaw() throws SQLException {
        return readAll(rowsRaw);
    }

    @Benchmark
    @OperationsPerInvocation(ROWS)
    public long rowReadGuarded() throws SQLException {
        return readAll(rowsGuarded);
    }

    @Benchmark
    @OperationsPerInvocation(ROWS)
    public long rowReadProxy() throws SQLException {
        return readAll(rowsProxy);
    }

    private static long readAll(ResultSet rs) throws SQLException {
        rs.beforeFirst();
        long sum = 0;
        while (rs.next()) {
            sum += rs.getLong(1) + rs.getString(2).length();
        }
        return sum;
    }

    // ---- metadata ----------------------------------------------------------------------------

    @Benchmark
    public int metaDataRaw() throws SQLException {
        return metaRaw.getDatabaseMajorVersion();
    }

    @Benchmark
    public int metaDataGuarded() throws SQLException {
        return metaGuarded.getDatabaseMajorVersion();
    }

    @Benchmark
    public int metaDataProxy() throws SQLException {
        return metaProxy.getDatabaseMajorVersion();
    }

    // ---- a callable statement's OUT parameter ------------------------------------------------

    @Benchmark
    public long callableOutRaw() throws SQLException {
        return callRaw.getLong(1);
    }

    @Benchmark
    public long callableOutGuarded() throws SQLException {
        return callGuarded.getLong(1);
    }

    @Benchmark
    public long callableOutProxy() throws SQLException {
        return callProxy.getLong(1);
    }

    // ---- one round trip, for scale -------------------------------------------------------------

    @Benchmark
    public int updateRoundTripRaw() throws SQLException {
        return update(raw);
    }

    @Benchmark
    public int updateRoundTripGuarded() throws SQLException {
        return update(guarded);
    }

    private int update(Connection c) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("UPDATE forward_bench SET n = ? WHERE id = 1")) {
            ps.setLong(1, next++);
            return ps.executeUpdate();
        }
    }

    /**
     * The Proxy alternative to the hand-written forwarders, with their rules: one handler per JDBC
     * type, {@link Method#invoke} for everything that only forwards. (Reporting a failed
     * {@code next()} to the guard is package-private in the engine; here it is the same try/catch
     * around the call, which costs nothing when nothing fails.)
     */
    static final class Forwarders {

        private Forwarders() {}

        static ResultSet resultSet(Connection guard, Statement statement, ResultSet delegate) {
            return (ResultSet) Proxy.newProxyInstance(
                    Forwarders.class.getClassLoader(),
                    new Class<?>[] {ResultSet.class},
                    new ResultSetHandler(guard, statement, delegate));
        }

        static DatabaseMetaData metaData(Connection guard, DatabaseMetaData delegate) {
            return (DatabaseMetaData) Proxy.newProxyInstance(
                    Forwarders.class.getClassLoader(),
                    new Class<?>[] {DatabaseMetaData.class},
                    new MetaDataHandler(guard, delegate));
        }

        static CallableStatement callable(CallableStatement guardedStatement, CallableStatement delegate) {
            return (CallableStatement) Proxy.newProxyInstance(
                    Forwarders.class.getClassLoader(),
                    new Class<?>[] {CallableStatement.class},
                    new CallableHandler(guardedStatement, delegate));
        }

        static Object forward(Object target, Method method, Object[] args) throws Throwable {
            try {
                return method.invoke(target, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
        }

        /** Identity for equals and hashCode, as the hand-written classes (which do not override them). */
        static Object objectMethod(Object proxy, Object target, Method method, Object[] args) {
            return switch (method.getName()) {
                case "equals" -> proxy == args[0];
                case "hashCode" -> System.identityHashCode(proxy);
                default -> target.toString();
            };
        }

        private static final class ResultSetHandler implements InvocationHandler {
            private final Connection guard;
            private final Statement statement;
            private final ResultSet delegate;

            ResultSetHandler(Connection guard, Statement statement, ResultSet delegate) {
                this.guard = guard;
                this.statement = statement;
                this.delegate = delegate;
            }

            @Override
            public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
                if (method.getDeclaringClass() == Object.class) {
                    return objectMethod(proxy, delegate, method, args);
                }
                switch (method.getName()) {
                    case "next":
                        try {
                            return delegate.next();
                        } catch (SQLException e) {
                            throw e; // the engine: throw connection.failed(e)
                        }
                    case "getStatement":
                        return statement != null ? statement : guard.createStatement();
                    case "unwrap":
                        return ((Class<?>) args[0]).isInstance(proxy) ? proxy : delegate.unwrap((Class<?>) args[0]);
                    default:
                        return forward(delegate, method, args);
                }
            }
        }

        private static final class MetaDataHandler implements InvocationHandler {
            private final Connection guard;
            private final DatabaseMetaData delegate;

            MetaDataHandler(Connection guard, DatabaseMetaData delegate) {
                this.guard = guard;
                this.delegate = delegate;
            }

            @Override
            public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
                if (method.getDeclaringClass() == Object.class) {
                    return objectMethod(proxy, delegate, method, args);
                }
                switch (method.getName()) {
                    case "getConnection":
                        return guard;
                    case "unwrap":
                        return ((Class<?>) args[0]).isInstance(proxy) ? proxy : delegate.unwrap((Class<?>) args[0]);
                    default:
                        Object result = forward(delegate, method, args);
                        return result instanceof ResultSet rs ? resultSet(guard, null, rs) : result;
                }
            }
        }

        private static final class CallableHandler implements InvocationHandler {
            private final CallableStatement guarded;
            private final CallableStatement delegate;

            CallableHandler(CallableStatement guarded, CallableStatement delegate) {
                this.guarded = guarded;
                this.delegate = delegate;
            }

            @Override
            public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
                if (method.getDeclaringClass() == Object.class) {
                    return objectMethod(proxy, delegate, method, args);
                }
                return forward(
                        method.getDeclaringClass() == CallableStatement.class ? delegate : guarded, method, args);
            }
        }
    }
}
