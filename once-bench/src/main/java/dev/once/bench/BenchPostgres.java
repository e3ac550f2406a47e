package dev.once.bench;

import com.sun.management.OperatingSystemMXBean;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.Schema;
import dev.once.testsupport.TestPostgres;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The one PostgreSQL a benchmark run uses: an embedded PostgreSQL 17 with {@code fsync} and
 * {@code synchronous_commit} on, or the server given with {@code --postgres}. Every measurement
 * gets a {@link #freshDatabase fresh schema} so no run sees another's rows or index growth.
 */
final class BenchPostgres implements AutoCloseable {

    /** Accounts in a fresh database: 100 per worker for 8 workers, and enough for 1,000 correctness rounds. */
    static final int ACCOUNTS = 1_000;

    private static final AtomicInteger SEQUENCE = new AtomicInteger();

    private final String jdbcUrl;
    private final EmbeddedPostgres embedded;

    /** The server's URL (no schema): for a forked JVM (JMH) that opens connections of its own. */
    String jdbcUrl() {
        return jdbcUrl;
    }

    private BenchPostgres(String jdbcUrl, EmbeddedPostgres embedded) {
        this.jdbcUrl = jdbcUrl;
        this.embedded = embedded;
    }

    /** Starts the embedded, durable server when {@code url} is null; otherwise uses {@code url}. */
    static BenchPostgres start(String url) throws IOException {
        if (url != null) {
            return new BenchPostgres(url, null);
        }
        EmbeddedPostgres pg = TestPostgres.embedded(true);
        return new BenchPostgres(pg.getJdbcUrl("postgres", "postgres"), pg);
    }

    /**
     * Starts an embedded, durable server as {@link #start} does, with {@code settings} on top (a
     * probe preloads {@code pg_stat_statements} this way; the suites never do).
     */
    static BenchPostgres embedded(Map<String, String> settings) throws IOException {
        var builder = EmbeddedPostgres.builder()
                .setServerConfig("fsync", "on")
                .setServerConfig("synchronous_commit", "on")
                .setServerConfig("full_page_writes", "on")
                .setServerConfig("max_connections", "300")
                .setServerConfig("shared_buffers", "256MB");
        settings.forEach(builder::setServerConfig);
        EmbeddedPostgres pg = builder.start();
        return new BenchPostgres(pg.getJdbcUrl("postgres", "postgres"), pg);
    }

    boolean isEmbedded() {
        return embedded != null;
    }

    /**
     * A new schema holding the once tables and {@value #ACCOUNTS} accounts, behind a Hikari pool of
     * exactly {@code connections} connections (opened up front, so no measurement pays for a connect).
     */
    Db freshDatabase(int connections) {
        String schema = "bench_" + ProcessHandle.current().pid() + "_" + SEQUENCE.incrementAndGet();
        admin("CREATE SCHEMA " + schema);
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(jdbcUrl + (jdbcUrl.contains("?") ? "&" : "?") + "currentSchema=" + schema);
        config.setMaximumPoolSize(connections);
        config.setMinimumIdle(connections);
        config.setPoolName(schema);
        HikariDataSource ds = new HikariDataSource(config);
        try {
            Schema.migrate(ds);
            try (Connection c = ds.getConnection()) {
                Ledger.create(c, ACCOUNTS);
            }
        } catch (SQLException | RuntimeException e) {
            ds.close();
            admin("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
            throw new IllegalStateException("could not prepare schema " + schema + ": " + e.getMessage(), e);
        }
        return new Db(ds, schema);
    }

    /** Flushes dirty pages before a measurement, so a checkpoint does not land inside it (superuser only). */
    void checkpoint() {
        try {
            admin("CHECKPOINT");
        } catch (IllegalStateException e) {
            // Not a superuser on a given server: measure without it and let the numbers show the noise.
        }
    }

    /**
     * The embedded server's CPU time so far, in clock ticks (100 a second on Linux): its postmaster's
     * own and its reaped children's, and its live backends' (read from {@code /proc}); -1 for a
     * server given by URL (possibly on another machine) or when {@code /proc} cannot be read.
     */
    long serverCpuTicks() {
        if (embedded == null) {
            return -1;
        }
        try {
            if (postmaster == 0) {
                try (Connection c = DriverManager.getConnection(jdbcUrl);
                        Statement s = c.createStatement();
                        ResultSet rs = s.executeQuery("SELECT pg_backend_pid()")) {
                    rs.next();
                    postmaster = parent(rs.getLong(1));
                }
            }
            long[] own = stat(postmaster);
            long ticks = own[0] + own[1] + own[2] + own[3];
            try (var procs = java.nio.file.Files.list(java.nio.file.Path.of("/proc"))) {
                for (var p : (Iterable<java.nio.file.Path>) procs::iterator) {
                    String name = p.getFileName().toString();
                    if (name.chars().allMatch(Character::isDigit)) {
                        try {
                            long pid = Long.parseLong(name);
                            if (parent(pid) == postmaster) {
                                long[] child = stat(pid);
                                ticks += child[0] + child[1];
                            }
                        } catch (IOException | RuntimeException e) {
                            // ended meanwhile: its time is in the postmaster's reaped children
                        }
                    }
                }
            }
            return ticks;
        } catch (IOException | SQLException | RuntimeException e) {
            return -1;
        }
    }

    private long postmaster;

    private static long parent(long pid) throws IOException {
        for (String line :
                java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc", Long.toString(pid), "status"))) {
            if (line.startsWith("PPid:")) {
                return Long.parseLong(line.substring(5).strip());
            }
        }
        throw new IOException("no PPid in /proc/" + pid + "/status");
    }

    // utime, stime, cutime, cstime
    private static long[] stat(long pid) throws IOException {
        String stat = java.nio.file.Files.readString(java.nio.file.Path.of("/proc", Long.toString(pid), "stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return new long[] {Long.parseLong(f[11]), Long.parseLong(f[12]), Long.parseLong(f[13]), Long.parseLong(f[14])};
    }

    /** Server version and the settings that decide commit cost. */
    Map<String, String> serverFacts() {
        Map<String, String> facts = new LinkedHashMap<>();
        try (Connection c = DriverManager.getConnection(jdbcUrl);
                Statement s = c.createStatement()) {
            for (String name : new String[] {
                "server_version",
                "fsync",
                "synchronous_commit",
                "full_page_writes",
                "wal_sync_method",
                "shared_buffers",
                "max_connections"
            }) {
                try (ResultSet rs = s.executeQuery("SHOW " + name)) {
                    rs.next();
                    facts.put(name, rs.getString(1));
                }
            }
        } catch (SQLException e) {
            throw new IllegalStateException(
                    "could not read server settings from " + jdbcUrl + ": " + e.getMessage(), e);
        }
        return facts;
    }

    /** The machine the numbers come from. */
    static Map<String, String> machineFacts() {
        Map<String, String> facts = new LinkedHashMap<>();
        facts.put("cores", Integer.toString(Runtime.getRuntime().availableProcessors()));
        var os = (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        facts.put("memory", (os.getTotalMemorySize() >> 20) + " MiB");
        facts.put(
                "os",
                System.getProperty("os.name") + " " + System.getProperty("os.version") + " "
                        + System.getProperty("os.arch"));
        facts.put("jdk", System.getProperty("java.vm.name") + " " + System.getProperty("java.runtime.version"));
        return facts;
    }

    private void admin(String sql) {
        try (Connection c = DriverManager.getConnection(jdbcUrl);
                Statement s = c.createStatement()) {
            s.execute(sql);
        } catch (SQLException e) {
            throw new IllegalStateException(sql + " failed on " + jdbcUrl + ": " + e.getMessage(), e);
        }
    }

    @Override
    public void close() throws IOException {
        if (embedded != null) {
            embedded.close();
        }
    }

    /** A fresh schema and its pool; closing drops both. */
    final class Db implements AutoCloseable {
        private final HikariDataSource dataSource;
        private final String schema;

        private Db(HikariDataSource dataSource, String schema) {
            this.dataSource = dataSource;
            this.schema = schema;
        }

        HikariDataSource dataSource() {
            return dataSource;
        }

        String schema() {
            return schema;
        }

        long[] balances(int accounts) {
            try (Connection c = dataSource.getConnection()) {
                return Ledger.balances(c, accounts);
            } catch (SQLException e) {
                throw new IllegalStateException("could not read balances in " + schema + ": " + e.getMessage(), e);
            }
        }

        @Override
        public void close() {
            dataSource.close();
            admin("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
        }
    }
}
