package dev.once.internal;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A connection subscribed with {@code LISTEN}, waiting for PostgreSQL notifications of one table's rows. It is an
 * auto-commit session and never holds a transaction: one that arrives with auto-commit off is
 * refused (the relay polls), never switched. once-core has
 * no driver dependency, so the PostgreSQL driver's {@code PGConnection.getNotifications(int)} is
 * reached by reflection through {@link Connection#unwrap} (which connection pools forward).
 *
 * <p>A channel is the database's, not a schema's: the outbox trigger names its table's schema in the payload, and a
 * notification of another schema's table of the same name (a schema per tenant) is not this listener's. Not
 * thread-safe: one relay thread owns it. Not API.
 */
public final class PgListener implements AutoCloseable {

    private static final Logger log = LoggerFactory.getLogger(PgListener.class);
    private static final String PG_CONNECTION = "org.postgresql.PGConnection";
    private static final String PG_NOTIFICATION = "org.postgresql.PGNotification";
    // The schema the table's unqualified name resolves to on this connection, as the trigger's TG_TABLE_SCHEMA names
    // it, and whether the table's own trigger names it (schema version 10 on): if not, its notifications carry no
    // schema and every one may be this table's.
    private static final String SCHEMA_OF = "SELECT n.nspname, EXISTS (SELECT 1 FROM pg_trigger t"
            + " JOIN pg_proc p ON p.oid = t.tgfoid WHERE t.tgrelid = c.oid AND p.prosrc LIKE '%TG_TABLE_SCHEMA%')"
            + " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(?)";

    private final Connection connection;
    private final Object pg;
    private final Method getNotifications;
    private final Method takeNotifications;
    private final Method parameter;
    private final String schema;

    private PgListener(
            Connection connection,
            Object pg,
            Method getNotifications,
            Method takeNotifications,
            Method parameter,
            String schema) {
        this.connection = connection;
        this.pg = pg;
        this.getNotifications = getNotifications;
        this.takeNotifications = takeNotifications;
        this.parameter = parameter;
        this.schema = schema;
    }

    /**
     * Takes a connection of its own from {@code dataSource} and runs {@code listenSql} on it, for the notifications of
     * {@code table} (a quoted name, as the relay's statements name it).
     *
     * @return the listener, or null when the driver is not PostgreSQL's or the LISTEN failed (the caller polls)
     */
    public static PgListener open(DataSource dataSource, String listenSql, String table) {
        Connection c = null;
        try {
            c = dataSource.getConnection();
            Class<?> type = Class.forName(PG_CONNECTION, true, loaderOf(c));
            if (!c.isWrapperFor(type)) {
                c.close();
                return null;
            }
            Object pg = c.unwrap(type);
            Method get = type.getMethod("getNotifications", int.class);
            Method take = type.getMethod("getNotifications");
            Method parameter = Class.forName(PG_NOTIFICATION, true, loaderOf(c)).getMethod("getParameter");
            if (!c.getAutoCommit()) {
                // LISTEN outside auto-commit waits for a commit nobody sends; switching auto-commit on
                // would commit whatever the connection holds (the mark of someone else's transaction).
                log.info("no LISTEN/NOTIFY wake-ups (the DataSource handed out a connection with auto-commit off);"
                        + " the relay polls");
                c.close();
                return null;
            }
            try (Statement s = c.createStatement()) {
                s.execute(listenSql);
            }
            return new PgListener(c, pg, get, take, parameter, schemaOf(c, table));
        } catch (ClassNotFoundException | NoSuchMethodException | SQLException | RuntimeException e) {
            log.info("no LISTEN/NOTIFY wake-ups ({}); the relay polls", e.toString());
            closeQuietly(c);
            return null;
        }
    }

    /**
     * The schema {@code table} is in when its trigger names it; null when it does not, or the table does not exist
     * yet: every notification is then the listener's.
     */
    private static String schemaOf(Connection c, String table) throws SQLException {
        try (PreparedStatement p = c.prepareStatement(SCHEMA_OF)) {
            p.setString(1, table);
            try (ResultSet rs = p.executeQuery()) {
                return rs.next() && rs.getBoolean(2) ? rs.getString(1) : null;
            }
        }
    }

    private static ClassLoader loaderOf(Connection c) {
        ClassLoader context = Thread.currentThread().getContextClassLoader();
        return context != null ? context : c.getClass().getClassLoader();
    }

    /**
     * Waits up to {@code max} for a notification of this listener's table.
     *
     * @return true if one arrived (rows are pending), false on timeout or when only other schemas' arrived
     * @throws SQLException if the connection broke; close this listener and open a new one later
     */
    public boolean await(Duration max) throws SQLException {
        // 0 means "wait forever" to the driver: never pass it.
        int millis = (int) Math.max(1, Math.min(Integer.MAX_VALUE, max.toMillis()));
        return arrived(getNotifications, millis);
    }

    /**
     * Takes the notifications that have arrived, without waiting. Called before a poll, which sees
     * the rows of every commit they announce (a notification reaches a listener after its commit),
     * so that they do not wake the relay again for rows that poll took or found held.
     *
     * @throws SQLException if the connection broke; close this listener and open a new one later
     */
    public void drain() throws SQLException {
        arrived(takeNotifications);
    }

    private boolean arrived(Method get, Object... args) throws SQLException {
        try {
            Object[] notifications = (Object[]) get.invoke(pg, args);
            if (notifications == null) {
                return false;
            }
            for (Object n : notifications) {
                if (mine((String) parameter.invoke(n))) {
                    return true;
                }
            }
            return false;
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof SQLException sql) {
                throw sql;
            }
            throw new SQLException("waiting for notifications failed: " + e.getCause(), e.getCause());
        } catch (IllegalAccessException e) {
            throw new SQLException("PGConnection.getNotifications is not accessible: " + e, e);
        }
    }

    // Another schema's trigger may be older and send no schema: its notification is not this table's either.
    private boolean mine(String payload) {
        return schema == null || schema.equals(payload);
    }

    @Override
    public void close() {
        // The connection goes back to a pool: stop listening so its next user gets no notifications.
        try (Statement s = connection.createStatement()) {
            s.execute("UNLISTEN *");
        } catch (SQLException e) {
            log.debug("UNLISTEN failed; the connection is closed anyway", e);
        }
        closeQuietly(connection);
    }

    private static void closeQuietly(Connection c) {
        if (c == null) {
            return;
        }
        try {
            c.close();
        } catch (SQLException e) {
            log.debug("closing the LISTEN connection failed", e);
        }
    }
}
