package dev.once.jdbc;

import dev.once.InvalidConfigurationException;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.Locale;
import javax.sql.DataSource;

/** Finds the {@link Dialect} of a connection from its driver metadata. */
public final class Dialects {

    public static final Dialect POSTGRESQL = new PostgresDialect();
    public static final Dialect MARIADB = new MariaDbDialect();

    private Dialects() {}

    /**
     * The dialect of the database behind {@code connection}.
     *
     * @throws InvalidConfigurationException if the database is neither PostgreSQL nor MariaDB (MySQL
     *         is refused: see {@link #byName})
     */
    public static Dialect detect(Connection connection) throws SQLException {
        String product = connection.getMetaData().getDatabaseProductName();
        return byName(product);
    }

    /**
     * The dialect of the database behind {@code dataSource}, asking it once.
     *
     * @throws InvalidConfigurationException if the database does not answer or is not supported
     */
    public static Dialect detect(DataSource dataSource) {
        try (Connection c = dataSource.getConnection()) {
            return detect(c);
        } catch (SQLException e) {
            throw new InvalidConfigurationException("could not detect the SQL dialect, the database did not answer ("
                    + e.getMessage() + "); set dialect(...) explicitly or check the DataSource");
        }
    }

    /**
     * The dialect for a product or dialect name: {@code postgresql}/{@code postgres} or
     * {@code mariadb}, case-insensitive. MySQL is refused: the MariaDB dialect relies on
     * {@code INSERT … RETURNING} and {@code SET STATEMENT}, which MySQL does not have, and no MySQL
     * server has been tested.
     *
     * @throws InvalidConfigurationException naming the product and what is supported
     */
    public static Dialect byName(String name) {
        String n = name == null ? "" : name.toLowerCase(Locale.ROOT);
        if (n.contains("postgres")) {
            return POSTGRESQL;
        }
        if (n.contains("mariadb")) {
            return MARIADB;
        }
        if (n.contains("mysql")) {
            throw new InvalidConfigurationException("database '" + name + "' is not supported: once runs on"
                    + " PostgreSQL 12+ (and PostgreSQL-compatible databases) and MariaDB 10.6+; the MariaDB dialect"
                    + " uses INSERT ... RETURNING and SET STATEMENT, which MySQL does not have");
        }
        throw new InvalidConfigurationException("dialect must be one of postgresql, mariadb, but was '" + name + "'");
    }
}
