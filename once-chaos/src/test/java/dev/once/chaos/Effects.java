package dev.once.chaos;

import dev.once.Delivery;
import dev.once.Handler;
import dev.once.testsupport.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import javax.sql.DataSource;

/**
 * The business effect of the fault tests, kept countable: every application of an event inserts
 * one row into {@code chaos_effect}, which has no unique key, so an effect applied twice shows as
 * two rows instead of being hidden by a constraint.
 */
final class Effects {

    static final String TABLE = "chaos_effect";

    /** The effect the once consumer's handler applies in its claim transaction. */
    static final Handler HANDLER = (d, tx) -> apply(tx.connection(), d);

    private Effects() {}

    static void create(TestDatabase db) {
        create(db.dataSource());
    }

    static void create(DataSource ds) {
        String type = "varchar(255)";
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement()) {
            if (!c.getMetaData().getDatabaseProductName().toLowerCase().contains("postgres")) {
                // The oracle must tell every distinct id apart: MariaDB's defaults fold case and trailing spaces.
                type += " CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin";
            }
            s.execute("CREATE TABLE " + TABLE + " (event_id " + type + " NOT NULL, applied_at bigint NOT NULL)");
        } catch (SQLException e) {
            throw new IllegalStateException("could not create " + TABLE + ": " + e.getMessage(), e);
        }
    }

    static void apply(Connection c, Delivery d) throws SQLException {
        try (PreparedStatement ps =
                c.prepareStatement("INSERT INTO " + TABLE + " (event_id, applied_at) VALUES (?, ?)")) {
            ps.setString(1, d.eventId());
            ps.setLong(2, System.nanoTime());
            ps.executeUpdate();
        }
    }

    /** Applications per event id. */
    static Map<String, Long> counts(TestDatabase db) {
        return counts(db.dataSource());
    }

    static Map<String, Long> counts(DataSource ds) {
        Map<String, Long> counts = new HashMap<>();
        try (Connection c = ds.getConnection();
                PreparedStatement ps =
                        c.prepareStatement("SELECT event_id, count(*) FROM " + TABLE + " GROUP BY event_id");
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                counts.put(rs.getString(1), rs.getLong(2));
            }
        } catch (SQLException e) {
            throw new IllegalStateException("could not count effects: " + e.getMessage(), e);
        }
        return counts;
    }

    /** Acknowledged events whose effect is missing: the broker forgot them, the database never had them. */
    static long lost(Collection<String> acknowledged, Map<String, Long> counts) {
        return acknowledged.stream()
                .filter(id -> counts.getOrDefault(id, 0L) == 0)
                .count();
    }

    /** Events whose effect was applied more than once. */
    static long appliedTwice(Map<String, Long> counts) {
        return counts.values().stream().filter(n -> n > 1).count();
    }
}
