package dev.once.testsupport;

import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import javax.sql.DataSource;

/**
 * A database of its own for one test: a fresh schema (PostgreSQL) or database (MariaDB) with the
 * once tables migrated (by the registered {@link SchemaMigration}), behind a small connection pool.
 * Closing it drops the schema and the pool, so tests never see each other's rows nor state a
 * previous run left behind.
 */
public final class TestDatabase implements AutoCloseable {

    private final HikariDataSource dataSource;
    private final String name;
    private final Runnable drop;

    TestDatabase(HikariDataSource dataSource, String name, Runnable drop) {
        this.dataSource = dataSource;
        this.name = name;
        this.drop = drop;
    }

    /** The pooled data source, pointed at this test's schema. */
    public DataSource dataSource() {
        return dataSource;
    }

    /** The schema (PostgreSQL) or database (MariaDB) name. */
    public String name() {
        return name;
    }

    /** Runs statements in auto-commit, for business tables a test needs. */
    public TestDatabase execute(String... statements) {
        try (Connection c = dataSource.getConnection();
                Statement s = c.createStatement()) {
            for (String sql : statements) {
                s.execute(sql);
            }
        } catch (SQLException e) {
            throw new IllegalStateException("test setup statement failed: " + e.getMessage(), e);
        }
        return this;
    }

    /** Reads one long value, such as a count or a balance. */
    public long queryLong(String sql) {
        try (Connection c = dataSource.getConnection();
                Statement s = c.createStatement();
                var rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        } catch (SQLException e) {
            throw new IllegalStateException("query failed: " + sql + ": " + e.getMessage(), e);
        }
    }

    // One administrative connection per server and JVM, not one per statement: a connection cost 50-100 ms
    // on the loaded CI machine, twice per fresh database (create and drop).
    private static final Map<String, Connection> ADMIN = new HashMap<>();

    /**
     * Runs one administrative statement (create or drop a schema or database) on the JVM's administrative
     * connection to that server; a connection that broke (a test terminated it) is replaced once.
     */
    static void admin(String jdbcUrl, String sql) {
        admin(jdbcUrl, List.of(sql));
    }

    /** Runs administrative statements as one batch, as {@link #admin(String, String)} runs one. */
    static synchronized void admin(String jdbcUrl, List<String> sql) {
        try {
            try {
                adminStatement(jdbcUrl, sql);
            } catch (SQLException first) {
                Connection used = ADMIN.get(jdbcUrl);
                if (used == null || used.isValid(5)) {
                    throw first; // the statement failed, not the connection
                }
                ADMIN.remove(jdbcUrl);
                used.close();
                adminStatement(jdbcUrl, sql);
            }
        } catch (SQLException e) {
            throw new IllegalStateException(sql + " failed on " + jdbcUrl + ": " + e.getMessage(), e);
        }
    }

    private static void adminStatement(String jdbcUrl, List<String> sql) throws SQLException {
        Connection c = ADMIN.get(jdbcUrl);
        if (c == null) {
            c = DriverManager.getConnection(jdbcUrl);
            ADMIN.put(jdbcUrl, c);
        }
        try (Statement s = c.createStatement()) {
            if (sql.size() == 1) {
                s.execute(sql.get(0));
            } else {
                for (String statement : sql) {
                    s.addBatch(statement);
                }
                s.executeBatch();
            }
        }
    }

    static TestDatabase migrated(HikariDataSource ds, String name, Runnable drop) {
        TestDatabase db = new TestDatabase(ds, name, drop);
        try {
            registeredMigration().migrate(ds);
        } catch (RuntimeException e) {
            db.close(); // no schema left behind on a shared server
            throw e;
        }
        return db;
    }

    private static SchemaMigration migration;

    /** The one {@link SchemaMigration} registered for {@link ServiceLoader}, loaded on first use. */
    private static synchronized SchemaMigration registeredMigration() {
        if (migration == null) {
            List<SchemaMigration> found = new ArrayList<>();
            ServiceLoader.load(SchemaMigration.class).forEach(found::add);
            if (found.size() != 1) {
                throw new IllegalStateException("expected exactly one " + SchemaMigration.class.getName()
                        + " registered in META-INF/services, found " + found.size() + " " + found
                        + ": depend on once-testkit, which registers the once schema, or register one");
            }
            migration = found.get(0);
        }
        return migration;
    }

    @Override
    public void close() {
        dataSource.close();
        drop.run();
    }
}
