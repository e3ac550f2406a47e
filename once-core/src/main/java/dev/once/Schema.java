package dev.once;

import dev.once.internal.Transactions;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import javax.sql.DataSource;

/**
 * The {@code once} tables, as numbered SQL migrations per dialect shipped in this jar
 * ({@code dev/once/jdbc/<dialect>/}). {@link #migrate} applies the ones a database lacks and
 * records them in {@code <prefix>schema_version}; no migration framework is imposed. Users who
 * run Flyway or Liquibase take {@link #script} and put it in their own migrations instead.
 *
 * <p>Safe to call from many instances at once: migrations of one prefix are serialized by a
 * database lock.
 */
public final class Schema {

    private Schema() {}

    /** A migration as shipped: its version, file name and SQL with the prefix applied. */
    public record Migration(int version, String name, String sql) {

        /**
         * The migration's SQL as the statements {@link #migrate} executes one by one, comment lines
         * dropped: our own migration files hold no procedural bodies, so a statement ends at a ';' at
         * the end of a line.
         *
         * @return an unmodifiable list, in order
         */
        public List<String> statements() {
            StringBuilder withoutComments = new StringBuilder();
            for (String line : sql.split("\\R")) {
                if (!line.strip().startsWith("--")) {
                    withoutComments.append(line).append('\n');
                }
            }
            return Arrays.stream(withoutComments.toString().split(";\\s*\\n"))
                    .map(String::strip)
                    .filter(s -> !s.isEmpty())
                    .toList();
        }
    }

    /** How long {@link #migrate} waits for another instance's migration of the same prefix, unless told. */
    public static final Duration DEFAULT_LOCK_WAIT = Duration.ofSeconds(60);

    /** Applies missing migrations with the default prefix {@value TablePrefix#DEFAULT}. */
    public static int migrate(DataSource dataSource) {
        return migrate(dataSource, TablePrefix.DEFAULT);
    }

    /** Applies the migrations the database lacks, waiting up to {@link #DEFAULT_LOCK_WAIT} for a concurrent migration. */
    public static int migrate(DataSource dataSource, String prefix) {
        return migrate(dataSource, prefix, DEFAULT_LOCK_WAIT);
    }

    /**
     * Applies the migrations the database lacks, each in its own transaction.
     *
     * @param lockWait how long to wait for another instance migrating the same prefix (1 s to 1 h);
     *                 where the lock is a transaction lock (PostgreSQL) it waits until the other
     *                 migration commits, bounded only by the session's {@code lock_timeout}
     * @return how many were applied (0 when up to date)
     * @throws InvalidConfigurationException if the prefix is not a valid identifier, the wait is out of
     *         range or the database is not supported
     * @throws OnceException wrapping the SQL error of a failed migration, or when the migration lock
     *         was not granted within {@code lockWait}; earlier migrations stay applied
     */
    public static int migrate(DataSource dataSource, String prefix, Duration lockWait) {
        TablePrefix.validate(prefix);
        if (lockWait == null
                || lockWait.compareTo(Duration.ofSeconds(1)) < 0
                || lockWait.compareTo(Duration.ofHours(1)) > 0) {
            throw new InvalidConfigurationException("lockWait must be between 1s and 1h, but was " + lockWait
                    + ": it bounds how long a migration waits for another instance migrating the same prefix");
        }
        try (Connection c = dataSource.getConnection()) {
            return migrate(c, Dialects.detect(c), prefix, lockWait);
        } catch (SQLException e) {
            throw new OnceException("schema migration for prefix '" + prefix + "' failed: " + e.getMessage(), e);
        }
    }

    /**
     * Applies the migrations the database lacks on a connection the caller holds, for a migration tool
     * that hands one over (the Spring Boot starter's Flyway migration and Liquibase change). The connection
     * must be in auto-commit mode, outside any transaction: each migration commits on its own, as
     * {@link #migrate(DataSource, String)} does.
     *
     * @return how many were applied (0 when up to date)
     * @throws InvalidConfigurationException if the prefix is not a valid identifier or the database is not
     *         supported
     * @throws OnceException wrapping the SQL error of a failed migration; earlier migrations stay applied
     */
    public static int migrate(Connection connection, String prefix) {
        TablePrefix.validate(prefix);
        try {
            return migrate(connection, Dialects.detect(connection), prefix, DEFAULT_LOCK_WAIT);
        } catch (SQLException e) {
            throw new OnceException("schema migration for prefix '" + prefix + "' failed: " + e.getMessage(), e);
        }
    }

    /**
     * What {@link #status} found in a database.
     *
     * @param prefix    the table prefix looked at
     * @param current   the newest migration recorded in {@code <prefix>schema_version}; 0 when that table is
     *                  missing or empty
     * @param latest    the newest migration this jar ships for the database's dialect
     * @param versioned whether {@code <prefix>schema_version} exists
     * @param tables    whether {@code <prefix>inbox} exists
     */
    public record Status(String prefix, int current, int latest, boolean versioned, boolean tables) {

        /** Every shipped migration is recorded as applied. */
        public boolean isCurrent() {
            return versioned && current >= latest;
        }

        /**
         * The tables exist but were not created through {@link #migrate} (nor the starter's Flyway or
         * Liquibase migration, which record their version the same way): their version is not known.
         */
        public boolean isUnversioned() {
            return !versioned && tables;
        }

        /** One line for logs, health details and startup errors. */
        public String describe() {
            if (isCurrent()) {
                return "current (V" + current + ")";
            }
            if (isUnversioned()) {
                return "unversioned (" + prefix + "inbox exists, " + prefix + "schema_version does not; this once"
                        + " needs V" + latest + ")";
            }
            if (!tables) {
                return "missing (no table " + prefix + "inbox; this once needs migrations V1 to V" + latest + ")";
            }
            return "outdated (at V" + current + ", this once needs V" + latest + ")";
        }
    }

    /**
     * Reads which migrations a database has, without changing it: the check an application runs at start
     * so a missing or outdated schema stops it there, not at the first message.
     *
     * @throws InvalidConfigurationException if the prefix is invalid or the database is not supported
     * @throws OnceException if the database does not answer
     */
    public static Status status(DataSource dataSource, String prefix) {
        TablePrefix.validate(prefix);
        try (Connection c = dataSource.getConnection()) {
            Dialect dialect = Dialects.detect(c);
            int latest = migrations(dialect, prefix).stream()
                    .mapToInt(Migration::version)
                    .max()
                    .orElse(0);
            Integer current =
                    probe(c, "SELECT coalesce(max(version), 0) FROM " + dialect.quote(prefix + "schema_version"));
            Integer inbox = probe(c, "SELECT count(*) FROM " + dialect.quote(prefix + "inbox") + " WHERE 1 = 0");
            return new Status(prefix, current == null ? 0 : current, latest, current != null, inbox != null);
        } catch (SQLException e) {
            throw new OnceException("could not read the once schema (prefix '" + prefix + "'): " + e.getMessage(), e);
        }
    }

    // The first column of the one row a query returns, or null when its table does not exist (SQLSTATE
    // 42P01 on PostgreSQL, 42S02 on MariaDB). The pool's connection auto-commits, so a failed probe does
    // not abort the next one.
    private static Integer probe(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(sql)) {
            return rs.next() ? rs.getInt(1) : 0;
        } catch (SQLException e) {
            if ("42P01".equals(e.getSQLState()) || "42S02".equals(e.getSQLState())) {
                return null;
            }
            throw e;
        }
    }

    private static int migrate(Connection c, Dialect dialect, String prefix, Duration lockWait) throws SQLException {
        String versionTable = dialect.quote(prefix + "schema_version");
        String lockName = "once-schema:" + prefix;
        // Where the lock ends with the transaction (PostgreSQL), every migration transaction takes it
        // again and reads the applied version again: a racing instance may have applied the next one
        // meanwhile. Where it is a session lock (MariaDB), it is taken once, outside the transactions.
        boolean sessionLock = dialect.unlockMigrations() != null;
        if (sessionLock) {
            lock(c, dialect, lockName, lockWait);
        }
        try {
            Transactions.inTransaction(c, tx -> {
                if (!sessionLock) {
                    lock(c, dialect, lockName, lockWait);
                }
                try (Statement s = c.createStatement()) {
                    s.execute(createVersionTable(versionTable));
                }
                return null;
            });
            int applied = 0;
            while (Transactions.inTransaction(c, tx -> {
                if (!sessionLock) {
                    lock(c, dialect, lockName, lockWait);
                }
                int current;
                try (Statement s = c.createStatement();
                        ResultSet rs = s.executeQuery("SELECT coalesce(max(version), 0) FROM " + versionTable)) {
                    rs.next();
                    current = rs.getInt(1);
                }
                Migration m = migrations(dialect, prefix).stream()
                        .filter(x -> x.version() > current)
                        .findFirst()
                        .orElse(null);
                if (m == null) {
                    return false;
                }
                try (Statement s = c.createStatement()) {
                    for (String statement : m.statements()) {
                        s.execute(statement);
                    }
                }
                try (PreparedStatement p = c.prepareStatement(
                        "INSERT INTO " + versionTable + " (version, name, applied_at) VALUES (?, ?, ?)")) {
                    p.setInt(1, m.version());
                    p.setString(2, m.name());
                    p.setTimestamp(3, Timestamp.from(Instant.now()));
                    p.executeUpdate();
                }
                return true;
            })) {
                applied++;
            }
            return applied;
        } finally {
            if (sessionLock) {
                try (PreparedStatement unlock = c.prepareStatement(dialect.unlockMigrations())) {
                    unlock.setString(1, lockName);
                    unlock.executeQuery().close();
                }
            }
        }
    }

    // The lock statement answers 1 when granted; MariaDB's GET_LOCK answers 0 when the wait ran out
    // and NULL on an error, and migrating without the lock would race another instance's DDL.
    private static void lock(Connection c, Dialect dialect, String lockName, Duration wait) throws SQLException {
        try (PreparedStatement lock = c.prepareStatement(dialect.lockMigrations(wait))) {
            lock.setString(1, lockName);
            try (ResultSet rs = lock.executeQuery()) {
                int granted = rs.next() ? rs.getInt(1) : 0;
                if (granted != 1 || rs.wasNull()) {
                    throw new OnceException("schema migration lock '" + lockName + "' was not granted within " + wait
                            + " (the database answered " + (rs.wasNull() ? "NULL, an error" : granted)
                            + "): another instance is migrating this prefix or holds the lock; nothing was migrated"
                            + " by this call, try again once it is done");
                }
            }
        }
    }

    /** Every migration of a dialect, in order, with the prefix applied. */
    public static List<Migration> migrations(Dialect dialect, String prefix) {
        TablePrefix.validate(prefix);
        String folder = "/dev/once/jdbc/" + dialect.name() + "/";
        List<Migration> result = new ArrayList<>();
        for (String name : resource(folder + "migrations.list").split("\\R")) {
            if (name.isBlank()) {
                continue;
            }
            int version = Integer.parseInt(name.substring(1, name.indexOf("__")));
            result.add(new Migration(version, name, resource(folder + name).replace("${prefix}", prefix)));
        }
        return List.copyOf(result);
    }

    /**
     * Every statement that takes an empty database to the newest schema and records each migration in
     * {@code <prefix>schema_version}, as {@link #migrate} would leave it, for a caller that runs them
     * as one batch on a database it knows nobody else uses (a fresh test database: there the migration
     * lock and the per-migration version reads of {@link #migrate} guard nothing and cost a round trip
     * each). On any other database use {@link #migrate}: these statements take no lock and assume no
     * table exists.
     *
     * @return an unmodifiable list: the version table, then per migration its {@link Migration#statements()}
     *         and the insert of its version row
     * @throws InvalidConfigurationException if the prefix is not a valid identifier
     */
    public static List<String> freshDatabaseStatements(Dialect dialect, String prefix) {
        TablePrefix.validate(prefix);
        String versionTable = dialect.quote(prefix + "schema_version");
        List<String> statements = new ArrayList<>();
        statements.add(createVersionTable(versionTable));
        for (Migration m : migrations(dialect, prefix)) {
            statements.addAll(m.statements());
            // literals, not binds, so the whole list runs as one statement batch; the name is a file name of
            // this jar, quoted all the same
            statements.add("INSERT INTO " + versionTable + " (version, name, applied_at) VALUES (" + m.version() + ", '"
                    + m.name().replace("'", "''") + "', CURRENT_TIMESTAMP)");
        }
        return List.copyOf(statements);
    }

    private static String createVersionTable(String versionTable) {
        return "CREATE TABLE IF NOT EXISTS " + versionTable + " (version integer PRIMARY KEY,"
                + " name varchar(255) NOT NULL, applied_at timestamp NOT NULL)";
    }

    /** The whole schema of a dialect as one script, for {@code once schema print} or a user's own migration tool. */
    public static String script(Dialect dialect, String prefix) {
        StringBuilder sb = new StringBuilder();
        for (Migration m : migrations(dialect, prefix)) {
            sb.append("-- ").append(m.name()).append('\n').append(m.sql()).append('\n');
        }
        return sb.toString();
    }

    private static String resource(String path) {
        try (InputStream in = Schema.class.getResourceAsStream(path)) {
            if (in == null) {
                throw new OnceException("missing schema resource " + path + " in the once-core jar");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
