package dev.once.bench.jmh;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.Handler;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Schema;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What one event costs the client on the per-message path, {@code IdempotentConsumer.process} with
 * the benchmark's one-statement handler, against the hand-written floor that sends the same
 * statements (claim, update, commit) on a held connection with statements prepared once. Both run
 * on a real PostgreSQL, so time per operation is mostly round trips and the load of the machine;
 * the figure this benchmark is for is JMH's bytes allocated per operation ({@code -prof gc}), which
 * neither moves. Each operation is a new event id, so every one is claimed and applied.
 *
 * <p>The database comes from the system property {@value GuardBench#URL_PROPERTY}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@State(Scope.Thread)
@Fork(
        value = 1,
        jvmArgsAppend = {"-Xms256m", "-Xmx256m"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class ProcessBench {

    private static final String CREDIT = "UPDATE account SET balance = balance + ? WHERE id = ?";
    private static final String CLAIM =
            "INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING";

    private static final Handler HANDLER = (delivery, tx) -> {
        String payload = delivery.payloadText();
        try (PreparedStatement ps = tx.connection().prepareStatement(CREDIT)) {
            ps.setLong(1, Long.parseLong(payload)); // 1 amount
            ps.setLong(2, 7); // 2 account id
            ps.executeUpdate();
        }
    };

    private String url;
    private String schema;
    private HikariDataSource pool;
    private IdempotentConsumer consumer;
    private Connection held;
    private PreparedStatement claim;
    private PreparedStatement credit;
    private long next;

    @Setup(Level.Trial)
    public void open() throws SQLException {
        url = System.getProperty(GuardBench.URL_PROPERTY, "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
        schema = "jmh_process_" + ProcessHandle.current().pid();
        admin("DROP SCHEMA IF EXISTS " + schema + " CASCADE; CREATE SCHEMA " + schema);
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(url + (url.contains("?") ? "&" : "?") + "currentSchema=" + schema);
        config.setMaximumPoolSize(2);
        config.setMinimumIdle(2);
        pool = new HikariDataSource(config);
        Schema.migrate(pool);
        try (Connection c = pool.getConnection();
                Statement s = c.createStatement()) {
            s.execute("CREATE TABLE account (id bigint PRIMARY KEY, balance bigint NOT NULL)");
            s.execute("INSERT INTO account SELECT g, 0 FROM generate_series(0, 99) g");
        }
        consumer = IdempotentConsumer.builder()
                .dataSource(pool)
                .consumer("bench")
                .handler(HANDLER)
                .build();
        held = pool.getConnection();
        held.setAutoCommit(false);
        claim = held.prepareStatement(CLAIM);
        credit = held.prepareStatement(CREDIT);
    }

    @TearDown(Level.Trial)
    public void close() throws SQLException {
        claim.close();
        credit.close();
        held.setAutoCommit(true);
        held.close();
        pool.close();
        admin("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
    }

    /** {@code once}: pool checkout, claim, the handler's update through the guarded connection, commit. */
    @Benchmark
    public Outcome once() {
        Outcome o = consumer.process(Delivery.of("once-" + next++, "1"));
        if (o.status() != Outcome.Status.APPLIED) {
            throw new IllegalStateException(o.eventId() + " came out " + o.status(), o.failure());
        }
        return o;
    }

    /** The hand-written floor-per-event: the same three round trips on a held connection. */
    @Benchmark
    public int floor() throws SQLException {
        claim.setString(1, "bench"); // 1 consumer
        claim.setString(2, "floor-" + next++); // 2 event_id
        claim.setTimestamp(3, new Timestamp(System.currentTimeMillis())); // 3 processed_at
        int n = claim.executeUpdate();
        if (n == 1) {
            credit.setLong(1, 1); // 1 amount
            credit.setLong(2, 7); // 2 account id
            credit.executeUpdate();
        }
        held.commit();
        return n;
    }

    private void admin(String sql) throws SQLException {
        try (Connection c = DriverManager.getConnection(url);
                Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }
}
