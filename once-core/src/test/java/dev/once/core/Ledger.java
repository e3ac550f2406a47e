package dev.once.core;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.PermanentFailureException;
import dev.once.testsupport.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/** The business effect used across core tests: credit an account by the payload's amount. */
final class Ledger {

    static final String CREATE = "CREATE TABLE account (id bigint PRIMARY KEY, balance bigint NOT NULL);"
            + "INSERT INTO account VALUES (1, 0)";

    private Ledger() {}

    /** Creates the ledger tables in {@code db} and returns it. */
    static TestDatabase on(TestDatabase db) {
        try (Connection c = db.dataSource().getConnection()) {
            create(c);
        } catch (SQLException e) {
            db.close();
            throw new IllegalStateException("could not create the ledger: " + e.getMessage(), e);
        }
        return db;
    }

    static long balance(TestDatabase db) throws SQLException {
        try (Connection c = db.dataSource().getConnection()) {
            return balance(c);
        }
    }

    static void create(Connection c) throws SQLException {
        try (Statement s = c.createStatement()) {
            for (String sql : CREATE.split(";")) {
                s.execute(sql);
            }
        }
    }

    /** A payment of {@code amount} cents; payload "poison" makes the handler fail permanently. */
    static Delivery payment(String id, long amount) {
        return Delivery.of(id, Long.toString(amount));
    }

    static final Handler CREDIT = (d, tx) -> {
        String body = d.payloadText();
        if (body.equals("poison")) {
            throw new PermanentFailureException("payload '" + body + "' is not an amount");
        }
        try (PreparedStatement ps =
                tx.connection().prepareStatement("UPDATE account SET balance = balance + ? WHERE id = 1")) {
            ps.setLong(1, Long.parseLong(body));
            ps.executeUpdate();
        }
    };

    static long balance(Connection c) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT balance FROM account WHERE id = 1")) {
            rs.next();
            return rs.getLong(1);
        }
    }
}
