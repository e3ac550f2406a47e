package dev.once.bench;

import dev.once.Handler;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/** The business effect every consumer in the benchmark applies: credit an account. */
final class Ledger {

    /** The one business statement: 1 amount, 2 account id. */
    static final String CREDIT = "UPDATE account SET balance = balance + ? WHERE id = ?";

    private Ledger() {
    }

    /** Creates {@code account} with ids 0 to {@code accounts - 1}, all at balance 0. */
    static void create(Connection c, int accounts) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute("CREATE TABLE account (id bigint PRIMARY KEY, balance bigint NOT NULL)");
            s.execute("INSERT INTO account SELECT g, 0 FROM generate_series(0, " + (accounts - 1) + ") g");
            s.execute("ANALYZE account");
        }
    }

    /** The handler {@code once} runs: the same statement, on the claim transaction's connection. */
    static final Handler ONCE_HANDLER = (delivery, tx) -> {
        String payload = delivery.payloadText();
        try (PreparedStatement ps = tx.connection().prepareStatement(CREDIT)) {
            ps.setLong(1, Event.amount(payload));    // 1 amount
            ps.setLong(2, Event.account(payload));   // 2 account id
            ps.executeUpdate();
        }
    };

    /** Balances of accounts 0 to {@code accounts - 1}, indexed by account id. */
    static long[] balances(Connection c, int accounts) throws SQLException {
        long[] balances = new long[accounts];
        try (PreparedStatement ps = c.prepareStatement("SELECT id, balance FROM account WHERE id < ?")) {
            ps.setLong(1, accounts);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    balances[(int) rs.getLong(1)] = rs.getLong(2);
                }
            }
        }
        return balances;
    }
}
