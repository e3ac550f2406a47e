package dev.once.spring.boot;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.function.Consumer;

/**
 * Runs {@code Schema.migrate} on a migration tool's connection, which Liquibase hands over with
 * auto-commit off: {@code Schema.migrate} owns one transaction per migration and refuses a connection that
 * is already in one. Switching auto-commit on commits what the tool did before (JDBC says so), and the
 * tool gets its connection back as it gave it.
 */
final class AutoCommit {

    private AutoCommit() {}

    static void run(Connection connection, Consumer<Connection> work) throws SQLException {
        boolean was = connection.getAutoCommit();
        if (!was) {
            connection.setAutoCommit(true);
        }
        try {
            work.accept(connection);
        } finally {
            if (!was) {
                connection.setAutoCommit(false);
            }
        }
    }
}
