package dev.once.core;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.testkit.IdempotentHandlerContract;
import java.sql.Connection;
import java.sql.SQLException;

/** once-core's own handler through the public contract, as any user would run it. */
class LedgerContractTest extends IdempotentHandlerContract {

    @Override
    protected void createTables(Connection connection) throws SQLException {
        Ledger.create(connection);
    }

    @Override
    protected Handler handler() {
        return Ledger.CREDIT;
    }

    @Override
    protected Delivery event(String eventId) {
        return Ledger.payment(eventId, 2000);
    }

    @Override
    protected Object state(Connection connection) throws SQLException {
        return Ledger.balance(connection);
    }
}
