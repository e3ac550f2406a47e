package dev.once.bench.jmh;

import dev.once.OutboxHeaders;
import dev.once.internal.ClaimWatch;
import dev.once.internal.GuardedConnection;
import dev.once.internal.HarmlessSql;
import dev.once.internal.OutboxRepository;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
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
 * What the guarded JDBC objects that only forward (a handler's result sets, its connection's
 * metadata, what a callable statement adds to a prepared one) cost per call, two ways on one real
 * pgjdbc connection: the driver's own object ({@code *Raw}) and what the engine hands a handler
 * ({@code *Guarded}, reached through a {@link GuardedConnection}, which builds them with the engine's
 * {@code dev.once.internal.Forwarders}: the code measured is the production code, never a copy).
 *
 * <p>Issue 24's run, which decided the form (load 11-12 on 2 cores), ns per call, raw / the
 * hand-written delegates of then ({@code GuardedResultSet}, {@code GuardedMetaData},
 * {@code GuardedCallableStatement}) / a {@link java.lang.reflect.Proxy} with the same rules: row read
 * 41 / 68 / 112 (B per row 48 / 48 / 96), metadata 68 / 53 / 102, callable OUT parameter
 * 2.8 / 5.8 / 9.3; update round trip 90,000 raw, 146,000 guarded. The Proxy's added cost (at most
 * about 50 ns a call) is 0.05 % of a round trip, so the engine forwards these three types through a
 * Proxy since, and {@code *Guarded} measures that Proxy.
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

    private DatabaseMetaData metaRaw;
    private DatabaseMetaData metaGuarded;

    private CallableStatement callRaw;
    private CallableStatement callGuarded;

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

        metaRaw = raw.getMetaData();
        metaGuarded = guarded.getMetaData();

        String call = "{? = call abs(?::bigint)}";
        callRaw = executedCall(raw.prepareCall(call));
        callGuarded = executedCall(guarded.prepareCall(call));
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

    // ---- a callable statement's OUT parameter ------------------------------------------------

    @Benchmark
    public long callableOutRaw() throws SQLException {
        return callRaw.getLong(1);
    }

    @Benchmark
    public long callableOutGuarded() throws SQLException {
        return callGuarded.getLong(1);
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
}
