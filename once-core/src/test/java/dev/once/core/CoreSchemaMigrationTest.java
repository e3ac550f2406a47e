package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Schema;
import dev.once.testsupport.SchemaScript;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The fresh test databases' one-batch schema ({@link Schema#freshDatabaseStatements}, which
 * CoreSchemaMigration here and the test kit's OnceSchemaMigration send) is the schema Schema.migrate
 * makes: the same columns, indexes, constraints and recorded versions, on both databases.
 */
class CoreSchemaMigrationTest {

    @Test
    void postgresFreshSchemaEqualsMigrated() {
        try (TestDatabase scripted = TestPostgres.shared().freshDatabase(2);
                TestDatabase migrated = TestPostgres.shared().freshDatabase(2)) {
            migrated.execute("DROP SCHEMA " + migrated.name() + " CASCADE", "CREATE SCHEMA " + migrated.name());
            assertSame(scripted, migrated);
        }
    }

    @Test
    void mariaDbFreshDatabaseEqualsMigrated() {
        try (TestDatabase scripted = TestMariaDb.shared().freshDatabase(1);
                TestDatabase migrated = TestMariaDb.shared().freshDatabase(1)) {
            // one pooled connection: it keeps the database it is switched back to
            migrated.execute(
                    "DROP DATABASE " + migrated.name(), "CREATE DATABASE " + migrated.name(), "USE " + migrated.name());
            assertSame(scripted, migrated);
        }
    }

    private static void assertSame(TestDatabase scripted, TestDatabase emptied) {
        assertThat(SchemaScript.catalog(emptied.dataSource())).isEmpty();
        assertThat(Schema.migrate(emptied.dataSource()))
                .isEqualTo(versions(scripted).size());
        assertThat(SchemaScript.catalog(scripted.dataSource()))
                .isNotEmpty()
                .containsExactlyElementsOf(SchemaScript.catalog(emptied.dataSource()));
        assertThat(versions(scripted)).isNotEmpty().containsExactlyElementsOf(versions(emptied));
        assertThat(Schema.migrate(scripted.dataSource())).isZero();
    }

    private static List<String> versions(TestDatabase db) {
        List<String> rows = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT version, name FROM once_schema_version ORDER BY version")) {
            while (rs.next()) {
                rows.add(rs.getInt(1) + " " + rs.getString(2));
            }
        } catch (SQLException e) {
            throw new IllegalStateException(e);
        }
        return rows;
    }
}
