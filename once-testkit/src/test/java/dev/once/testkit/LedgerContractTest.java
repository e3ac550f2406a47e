package dev.once.testkit;

import dev.once.Delivery;
import dev.once.Handler;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * The test kit's handler contract run as any user would run it: a ledger that credits an account
 * by the payload's amount (the same ledger the engine's own tests in once-core use).
 */
class LedgerContractTest extends IdempotentHandlerContract {

    private static final Handler CREDIT = (d, tx) -> {
        try (PreparedStatement ps =
                tx.connection().prepareStatement("UPDATE account SET balance = balance + ? WHERE id = 1")) {
            ps.setLong(1, Long.parseLong(d.payloadText()));
            ps.executeUpdate();
        }
    };

    @Override
    protected void createTables(Connection connection) throws SQLException {
        try (Statement s = connection.createStatement()) {
            s.execute("CREATE TABLE account (id bigint PRIMARY KEY, balance bigint NOT NULL)");
            s.execute("INSERT INTO account VALUES (1, 0)");
        }
    }

    @Override
    protected Handler handler() {
        return CREDIT;
    }

    @Override
    protected Delivery event(String eventId) {
        return Delivery.of(eventId, "2000");
    }

    @Override
    protected Object state(Connection connection) throws SQLException {
        try (Statement s = connection.createStatement();
                ResultSet rs = s.executeQuery("SELECT balance FROM account WHERE id = 1")) {
            rs.next();
            return rs.getLong(1);
        }
    }
}
