package dev.once.bench.jmh;

import dev.once.OutboxHeaders;
import dev.once.internal.ClaimWatch;
import dev.once.internal.GuardedConnection;
import dev.once.internal.HarmlessSql;
import dev.once.internal.OutboxRepository;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Clock;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What the guarded connection a handler gets ({@code tx.connection()}) costs per statement, against
 * the driver's own connection and against a {@link Proxy} that forwards every call reflectively and
 * runs the same check (issue 24 asks whether the hand-written delegates earn their keep), all on a
 * real pgjdbc connection. The {@code prepare*} benchmarks are a handler's statement without its
 * round trip: prepare (the guard lexes the SQL for transaction control here), bind two longs,
 * close; all of it is client-side in pgjdbc. {@code roundTrip} is the same statement shape
 * executed ({@code SELECT 1}), the loopback round trip the guard's cost is weighed against.
 *
 * <p>The database comes from the system property {@value #URL_PROPERTY} (BenchMain's {@code guard}
 * suite passes the embedded server's).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Thread)
@Fork(
        value = 1,
        jvmArgsAppend = {"-Xms256m", "-Xmx256m"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
public class GuardBench {

    public static final String URL_PROPERTY = "once.bench.jdbc";

    /** The handler statement of the benchmark's ledger, and a longer one (a data-modifying CTE with a literal). */
    @Param({
        "UPDATE account SET balance = balance + ? WHERE id = ?",
        "WITH moved AS (UPDATE account SET balance = balance - ? WHERE id = ? RETURNING id, balance)"
                + " INSERT INTO ledger_entry (account_id, balance_after, note)"
                + " SELECT id, balance, 'transfer, written by the benchmark''s handler' FROM moved"
    })
    public String sql;

    private Connection raw;
    private Connection guarded;
    private Connection proxied;
    private PreparedStatement selectOne;

    @Setup(Level.Trial)
    public void open() throws SQLException {
        String url = System.getProperty(URL_PROPERTY, "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
        raw = DriverManager.getConnection(url);
        guarded = new GuardedConnection(raw, watch(raw));
        proxied = ProxyGuard.connection(raw, new GuardedConnection(raw, watch(raw)));
        selectOne = raw.prepareStatement("SELECT 1");
    }

    /** What the engine gives the guard of one claim transaction (what the handler was seen doing). */
    private static ClaimWatch watch(Connection raw) {
        return new ClaimWatch(
                new ClaimWatch.Consumer(
                        Dialects.POSTGRESQL,
                        ClaimWatch.inboxTable(TablePrefix.DEFAULT),
                        new HarmlessSql(),
                        new OutboxRepository(Dialects.POSTGRESQL, TablePrefix.DEFAULT),
                        Clock.systemUTC(),
                        OutboxHeaders.NONE),
                raw);
    }

    @TearDown(Level.Trial)
    public void close() throws SQLException {
        selectOne.close();
        raw.close();
    }

    @Benchmark
    public int prepareRaw() throws SQLException {
        return prepareBindClose(raw);
    }

    @Benchmark
    public int prepareGuarded() throws SQLException {
        return prepareBindClose(guarded);
    }

    @Benchmark
    public int prepareProxy() throws SQLException {
        return prepareBindClose(proxied);
    }

    /** One loopback round trip of a prepared statement, for scale. */
    @Benchmark
    public int roundTrip() throws SQLException {
        try (ResultSet rs = selectOne.executeQuery()) {
            rs.next();
            return rs.getInt(1);
        }
    }

    private int prepareBindClose(Connection c) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setLong(1, 7);
            ps.setLong(2, 42);
            return ps.getFetchSize();
        }
    }

    /**
     * The alternative to 3,600 lines of delegates: one {@link InvocationHandler} for every JDBC type,
     * refusing the same calls and checking SQL with the guard's own check (reached reflectively,
     * bound once into a {@link MethodHandle}, so the check costs the same as in the guard and the
     * difference is the forwarding).
     */
    static final class ProxyGuard implements InvocationHandler {
        private static final MethodHandle CHECK;

        static {
            try {
                Method m = GuardedConnection.class.getDeclaredMethod("check", String.class);
                m.setAccessible(true);
                CHECK = MethodHandles.lookup().unreflect(m);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        private final Object delegate;
        private final GuardedConnection checker;

        private ProxyGuard(Object delegate, GuardedConnection checker) {
            this.delegate = delegate;
            this.checker = checker;
        }

        static Connection connection(Connection raw, GuardedConnection checker) {
            return (Connection) Proxy.newProxyInstance(
                    ProxyGuard.class.getClassLoader(), new Class<?>[] {Connection.class}, new ProxyGuard(raw, checker));
        }

        @Override
        public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
            String name = method.getName();
            switch (name) {
                case "commit",
                        "rollback",
                        "close",
                        "abort",
                        "setAutoCommit",
                        "setTransactionIsolation",
                        "setReadOnly" -> {
                    if (delegate instanceof Connection && (args == null || !name.equals("rollback"))) {
                        throw new SQLException("refused: " + name);
                    }
                }
                case "prepareStatement",
                        "prepareCall",
                        "execute",
                        "executeQuery",
                        "executeUpdate",
                        "addBatch",
                        "executeLargeUpdate",
                        "nativeSQL" -> {
                    if (args != null && args.length > 0 && args[0] instanceof String s) {
                        CHECK.invoke(checker, s);
                    }
                }
                default -> {}
            }
            Object result;
            try {
                result = method.invoke(delegate, args);
            } catch (InvocationTargetException e) {
                throw e.getCause();
            }
            // Whatever leads back to the driver's connection is wrapped in turn.
            if (result instanceof PreparedStatement ps) {
                Class<?> type = result instanceof java.sql.CallableStatement
                        ? java.sql.CallableStatement.class
                        : PreparedStatement.class;
                return Proxy.newProxyInstance(
                        ProxyGuard.class.getClassLoader(), new Class<?>[] {type}, new ProxyGuard(ps, checker));
            }
            if (result instanceof Statement s) {
                return Proxy.newProxyInstance(
                        ProxyGuard.class.getClassLoader(),
                        new Class<?>[] {Statement.class},
                        new ProxyGuard(s, checker));
            }
            if (result instanceof Connection) {
                return proxy;
            }
            return result;
        }
    }
}
