package dev.once.testsupport;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
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

    /**
     * A new database with the once tables, and a pool of up to {@code poolSize} connections on it. The
     * tables are copies ({@code CREATE TABLE ... LIKE}, rows included) of a template database this JVM
     * migrated once: on the loaded CI machine the migration's 16 DDL statements took 820-840 ms a database,
     * the copies of its 7 tables 230 ms. Where the template holds what {@code LIKE} does not copy (foreign
     * keys, views, triggers, routines, sequences) every database is migrated instead.
     */
    public TestDatabase freshDatabase(int poolSize) {
        String database = "once_test_" + ProcessHandle.current().pid() + "_" + SEQUENCE.incrementAndGet();
        Template template = template();
        if (template.tables().isEmpty()) {
            admin(List.of("CREATE DATABASE " + database));
            return TestDatabase.migrated(pool(database, poolSize), database, () -> drop(database));
        }
        List<String> copy = new ArrayList<>();
        copy.add("CREATE DATABASE " + database);
        for (String table : template.tables()) {
            copy.add("CREATE TABLE " + database + ".`" + table + "` LIKE " + template.name() + ".`" + table + "`");
        }
        for (String table : template.withRows()) {
            copy.add("INSERT INTO " + database + ".`" + table + "` SELECT * FROM " + template.name() + ".`" + table
                    + "`");
        }
        try {
            admin(copy);
        } catch (RuntimeException e) {
            drop(database); // no database left behind on a shared server
            throw e;
        }
        return new TestDatabase(pool(database, poolSize), database, () -> drop(database));
    }

    /** The migrated database fresh ones copy: its tables, those with rows, or no tables where it cannot be copied. */
    private record Template(String name, List<String> tables, List<String> withRows) {}

    private Template template;

    private synchronized Template template() {
        if (template == null) {
            String name = "once_test_" + ProcessHandle.current().pid() + "_template";
            admin(List.of("DROP DATABASE IF EXISTS " + name, "CREATE DATABASE " + name));
            TestDatabase migrated = TestDatabase.migrated(pool(name, 1), name, () -> drop(name));
            Runtime.getRuntime().addShutdownHook(new Thread(migrated::close, "once-mariadb-template-drop"));
            String in = " WHERE " + "%s = '" + name + "'";
            long uncopied = migrated.queryLong("SELECT (SELECT count(*) FROM information_schema.referential_constraints"
                    + in.formatted("constraint_schema") + ") + (SELECT count(*) FROM information_schema.tables"
                    + in.formatted("table_schema") + " AND table_type <> 'BASE TABLE') + (SELECT count(*) FROM"
                    + " information_schema.triggers" + in.formatted("trigger_schema") + ") + (SELECT count(*) FROM"
                    + " information_schema.routines" + in.formatted("routine_schema") + ")");
            List<String> tables = new ArrayList<>();
            List<String> withRows = new ArrayList<>();
            if (uncopied == 0) {
                try (Connection c = migrated.dataSource().getConnection();
                        Statement s = c.createStatement();
                        ResultSet rs = s.executeQuery("SELECT table_name FROM information_schema.tables"
                                + in.formatted("table_schema") + " ORDER BY table_name")) {
                    while (rs.next()) {
                        tables.add(rs.getString(1));
                    }
                } catch (SQLException e) {
                    throw new IllegalStateException("reading the template database " + name + " failed", e);
                }
                for (String table : tables) {
                    if (migrated.queryLong("SELECT count(*) FROM `" + table + "`") > 0) {
                        withRows.add(table);
                    }
                }
            }
            template = new Template(name, List.copyOf(tables), List.copyOf(withRows));
        }
        return template;
    }

    private HikariDataSource pool(String database, int poolSize) {
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(jdbcUrl.replaceFirst("/[^/?]*(\\?|$)", "/" + database + "$1"));
        config.setMaximumPoolSize(poolSize);
        config.setMinimumIdle(0);
        config.setPoolName(database);
        return new HikariDataSource(config);
    }

    private void drop(String database) {
        admin(List.of("DROP DATABASE IF EXISTS " + database));
    }

    private void admin(List<String> statements) {
        TestDatabase.admin(jdbcUrl, statements);
    }
}
