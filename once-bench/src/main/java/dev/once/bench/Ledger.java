package dev.once.bench;

import dev.once.BatchHandler;
import dev.once.Delivery;
import dev.once.Handler;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.SortedMap;
import java.util.TreeMap;

/** The business effect every consumer in the benchmark applies: credit an account. */
final class Ledger {

    /** The one business statement: 1 amount, 2 account id. */
    static final String CREDIT = "UPDATE account SET balance = balance + ? WHERE id = ?";

    /**
     * The same effect for a whole batch, set-based: 1 account ids, 2 amounts (bigint arrays, one
     * entry per account, sorted). An {@code UPDATE … FROM} applies one joined row per target row, so
     * the caller sums the credits of one account first.
     */
    static final String CREDIT_ALL = "UPDATE account a SET balance = a.balance + d.amount"
            + " FROM unnest(?::bigint[], ?::bigint[]) AS d(id, amount) WHERE a.id = d.id";

    private Ledger() {}

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
            ps.setLong(1, Event.amount(payload)); // 1 amount
            ps.setLong(2, Event.account(payload)); // 2 account id
            ps.executeUpdate();
        }
    };

    /**
     * The batch handler {@code once} runs in mode {@code batch-set}: the claimed deliveries summed
     * per account, sorted, applied with {@link #CREDIT_ALL} in one statement.
     */
    static final BatchHandler ONCE_BATCH_HANDLER = (claimed, tx) -> {
        TreeMap<Long, Long> perAccount = new TreeMap<>();
        for (Delivery d : claimed) {
            String payload = d.payloadText();
            perAccount.merge(Event.account(payload), Event.amount(payload), Long::sum);
        }
        try (PreparedStatement ps = tx.connection().prepareStatement(CREDIT_ALL)) {
            creditAll(tx.connection(), ps, perAccount);
        }
    };

    /** Runs {@link #CREDIT_ALL} with the sums per account, in the map's (ascending) order. */
    static void creditAll(Connection c, PreparedStatement creditAll, SortedMap<Long, Long> perAccount)
            throws SQLException {
        if (perAccount.isEmpty()) {
            return;
        }
        Long[] ids = perAccount.keySet().toArray(new Long[0]);
        Long[] amounts = perAccount.values().toArray(new Long[0]);
        Array idArray = c.createArrayOf("bigint", ids);
        Array amountArray = c.createArrayOf("bigint", amounts);
        try {
            creditAll.setArray(1, idArray); // 1 account ids
            creditAll.setArray(2, amountArray); // 2 amounts
            creditAll.executeUpdate();
        } finally {
            idArray.free();
            amountArray.free();
        }
    }

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
