package dev.once.core;

import dev.once.BatchHandler;
import dev.once.Delivery;
import dev.once.PermanentFailureException;
import dev.once.testsupport.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;

/**
 * A ledger of many accounts for the batch-handler tests, credited set-wise: the claimed
 * deliveries of a batch are summed per account (an {@code UPDATE … FROM} applies one joined row
 * per target row) and applied in ascending account order (one lock order for concurrent batches),
 * on PostgreSQL with one {@code UPDATE … FROM unnest}, on MariaDB with one JDBC batch.
 */
final class Accounts {

    private Accounts() {}

    /** Creates {@code acct} with ids 0 to {@code n - 1}, all at balance 0. */
    static TestDatabase on(TestDatabase db, int n) {
        StringBuilder values = new StringBuilder();
        for (int i = 0; i < n; i++) {
            values.append(i == 0 ? "" : ", ").append('(').append(i).append(", 0)");
        }
        return db.execute(
                "CREATE TABLE acct (id bigint PRIMARY KEY, balance bigint NOT NULL)",
                "INSERT INTO acct (id, balance) VALUES " + values);
    }

    /** A credit of {@code amount} to {@code account}; payload "account:amount", or "poison". */
    static Delivery credit(String id, long account, long amount) {
        return Delivery.of(id, (account + ":" + amount).getBytes(StandardCharsets.UTF_8));
    }

    static Delivery poison(String id) {
        return Delivery.of(id, "poison".getBytes(StandardCharsets.UTF_8));
    }

    static boolean isPoison(Delivery d) {
        return d.payloadText().equals("poison");
    }

    static long account(Delivery d) {
        String p = d.payloadText();
        return Long.parseLong(p.substring(0, p.indexOf(':')));
    }

    static long amount(Delivery d) {
        String p = d.payloadText();
        return Long.parseLong(p.substring(p.indexOf(':') + 1));
    }

    /** The set-based credit as a batch handler; a poison delivery fails the whole call permanently. */
    static BatchHandler setCredit(boolean postgres) {
        return (claimed, tx) -> {
            TreeMap<Long, Long> perAccount = new TreeMap<>();
            for (Delivery d : claimed) {
                if (isPoison(d)) {
                    throw new PermanentFailureException("payload of '" + d.eventId() + "' is not a credit");
                }
                perAccount.merge(account(d), amount(d), Long::sum);
            }
            apply(tx.connection(), perAccount, postgres);
        };
    }

    static void apply(Connection c, SortedMap<Long, Long> perAccount, boolean postgres) throws SQLException {
        if (postgres) {
            Array ids = c.createArrayOf("bigint", perAccount.keySet().toArray());
            Array amounts = c.createArrayOf("bigint", perAccount.values().toArray());
            try (PreparedStatement ps = c.prepareStatement("UPDATE acct a SET balance = a.balance + d.amount"
                    + " FROM unnest(?::bigint[], ?::bigint[]) AS d(id, amount) WHERE a.id = d.id")) {
                ps.setArray(1, ids);
                ps.setArray(2, amounts);
                ps.executeUpdate();
            }
            return;
        }
        try (PreparedStatement ps = c.prepareStatement("UPDATE acct SET balance = balance + ? WHERE id = ?")) {
            for (Map.Entry<Long, Long> e : perAccount.entrySet()) {
                ps.setLong(1, e.getValue());
                ps.setLong(2, e.getKey());
                ps.addBatch();
            }
            ps.executeBatch();
        }
    }

    static Map<Long, Long> balances(TestDatabase db) throws SQLException {
        Map<Long, Long> balances = new TreeMap<>();
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT id, balance FROM acct WHERE balance <> 0")) {
            while (rs.next()) {
                balances.put(rs.getLong(1), rs.getLong(2));
            }
        }
        return balances;
    }
}
