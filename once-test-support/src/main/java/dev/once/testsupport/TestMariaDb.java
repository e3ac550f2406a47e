package dev.once.testsupport;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Real MariaDB for tests: the server at {@value #URL_ENV}, or {@value #DEFAULT_URL}. There is no
 * embedded MariaDB; where none is reachable the test is skipped (failed under
 * {@value Services#REQUIRE_ENV}{@code =mariadb}). Needs the MariaDB JDBC driver on the test class path.
 */
public final class TestMariaDb {

    public static final String URL_ENV = "ONCE_TEST_MARIADB_URL";
    public static final String DEFAULT_URL = "jdbc:mariadb://127.0.0.1:3306/test?user=root";

    private static final AtomicLong SEQUENCE = new AtomicLong();
    private static volatile TestMariaDb shared;

    private final String jdbcUrl;

    private TestMariaDb(String jdbcUrl) {
        this.jdbcUrl = jdbcUrl;
    }

    /** The MariaDB shared by the tests of this JVM; skips or fails the caller when unreachable. */
    public static synchronized TestMariaDb shared() {
        if (shared == null) {
            String url = System.getenv(URL_ENV);
            url = url == null || url.isBlank() ? DEFAULT_URL : url;
            try (Connection c = DriverManager.getConnection(url)) {
                c.isValid(5);
            } catch (SQLException e) {
                throw Services.unavailable(
                        "mariadb", "start MariaDB on 127.0.0.1:3306 (root, no password) or set " + URL_ENV, e);
            }
            shared = new TestMariaDb(url);
        }
        return shared;
    }

    /** A new database with the once tables, and a pool of up to {@code poolSize} connections on it. */
    public TestDatabase freshDatabase(int poolSize) {
        String database = "once_test_" + ProcessHandle.current().pid() + "_" + SEQUENCE.incrementAndGet();
        admin("CREATE DATABASE " + database);
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(jdbcUrl.replaceFirst("/[^/?]*(\\?|$)", "/" + database + "$1"));
        config.setMaximumPoolSize(poolSize);
        config.setMinimumIdle(0);
        config.setPoolName(database);
        return TestDatabase.migrated(
                new HikariDataSource(config), database, () -> admin("DROP DATABASE IF EXISTS " + database));
    }

    private void admin(String sql) {
        TestDatabase.admin(jdbcUrl, sql);
    }
}
