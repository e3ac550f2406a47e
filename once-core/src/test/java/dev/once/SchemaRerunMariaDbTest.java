package dev.once;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * MariaDB commits each DDL statement on its own, so a process killed inside a migration leaves the
 * statements it ran applied and no version row. The next {@link Schema#migrate} runs the whole
 * migration again and must finish it, whichever statement the kill came after; before, it stopped
 * on every later start ("Table 'cut_1_1_inbox' already exists").
 *
 * <p>Every cut point of every migration is tried: the statements of the earlier migrations and their
 * version rows, then the first {@code k} statements of migration {@code v} (k = all of them is the
 * kill between the last DDL and the version row). The schema {@code migrate} then leaves must equal
 * a clean one, column for column and index for index.
 */
class SchemaRerunMariaDbTest {

    @Test
    void aMigrationKilledAfterAnyOfItsStatementsIsFinishedByTheNextMigrate() throws Exception {
        try (TestDatabase db = TestMariaDb.shared().freshDatabase(2)) {
            List<String> clean = structure(db, "once_");
            List<Schema.Migration> migrations = Schema.migrations(Dialects.MARIADB, "x_");
            int cuts = 0;
            for (Schema.Migration cut : migrations) {
                int statements = cut.statements().size();
                for (int k = 1; k <= statements; k++) {
                    String prefix = "cut_" + cut.version() + "_" + k + "_";
                    interruptedAt(db, prefix, cut.version(), k);
                    Schema.migrate(db.dataSource(), prefix);
                    assertThat(structure(db, prefix))
                            .as(
                                    "V%d killed after statement %d of %d, then migrated again",
                                    cut.version(), k, statements)
                            .isEqualTo(clean);
                    cuts++;
                }
            }
            assertThat(cuts).as("cut points tried").isGreaterThanOrEqualTo(migrations.size());
        }
    }

    /** What a kill leaves: earlier migrations applied and recorded, the first {@code k} statements of {@code version} applied. */
    private static void interruptedAt(TestDatabase db, String prefix, int version, int k) throws SQLException {
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement()) {
            s.execute("CREATE TABLE " + prefix + "schema_version (version integer PRIMARY KEY,"
                    + " name varchar(255) NOT NULL, applied_at timestamp NOT NULL)");
            for (Schema.Migration m : Schema.migrations(Dialects.MARIADB, prefix)) {
                List<String> statements = m.statements();
                if (m.version() == version) {
                    for (String statement : statements.subList(0, k)) {
                        s.execute(statement);
                    }
                    return;
                }
                for (String statement : statements) {
                    s.execute(statement);
                }
                try (PreparedStatement p =
                        c.prepareStatement("INSERT INTO " + prefix + "schema_version VALUES (?, ?, now())")) {
                    p.setInt(1, m.version());
                    p.setString(2, m.name());
                    p.executeUpdate();
                }
            }
        }
    }

    /** Columns and indexes of the prefix's tables, the prefix removed from every name. */
    private static List<String> structure(TestDatabase db, String prefix) throws SQLException {
        List<String> rows = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection()) {
            query(
                    c,
                    "SELECT table_name, column_name, ordinal_position, column_type, is_nullable,"
                            + " coalesce(column_default, '-'), coalesce(collation_name, '-'), extra"
                            + " FROM information_schema.columns WHERE table_schema = database() AND table_name LIKE ?"
                            + " ORDER BY table_name, ordinal_position",
                    prefix,
                    rows);
            query(
                    c,
                    "SELECT table_name, index_name, seq_in_index, column_name, non_unique"
                            + " FROM information_schema.statistics WHERE table_schema = database() AND table_name LIKE ?"
                            + " ORDER BY table_name, index_name, seq_in_index",
                    prefix,
                    rows);
            query(
                    c,
                    "SELECT 'version', version, name, '' FROM " + prefix + "schema_version ORDER BY version",
                    null,
                    rows);
        }
        return rows;
    }

    private static void query(Connection c, String sql, String prefix, List<String> into) throws SQLException {
        try (PreparedStatement p = c.prepareStatement(sql)) {
            if (prefix != null) {
                p.setString(1, prefix.replace("_", "\\_") + "%");
            }
            try (ResultSet rs = p.executeQuery()) {
                int columns = rs.getMetaData().getColumnCount();
                while (rs.next()) {
                    StringBuilder row = new StringBuilder();
                    for (int i = 1; i <= columns; i++) {
                        row.append(i == 1 ? "" : " | ").append(rs.getString(i));
                    }
                    into.add(prefix == null ? row.toString() : row.toString().replace(prefix, "<prefix>"));
                }
            }
        }
    }
}
