package dev.once.testsupport;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;

/**
 * A fresh test database's tables in one round trip, and the catalog to prove them equal to a
 * migrated one's. A {@link SchemaMigration} may send the shipped migrations (once-core's
 * {@code Schema.freshDatabaseStatements}) as one batch instead of one transaction per migration
 * under the migration lock: a fresh database is nobody else's, so
 * the lock and the per-migration version reads guard nothing there. Measured at 04:20 UTC on the
 * loaded CI machine (load 34): a fresh PostgreSQL schema took 730-760 ms and a MariaDB database
 * 1.2-1.5 s through the per-migration path, which also queues every JVM's fresh databases behind
 * one server-wide lock per prefix.
 */
public final class SchemaScript {

    private SchemaScript() {}

    /** Runs the statements as one batch in one transaction (DDL commits on its own on MariaDB). */
    public static void run(DataSource dataSource, List<String> statements) {
        try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(false);
            try (Statement s = c.createStatement()) {
                for (String sql : statements) {
                    s.addBatch(sql);
                }
                s.executeBatch();
                c.commit();
            } catch (SQLException e) {
                c.rollback();
                throw e;
            } finally {
                c.setAutoCommit(true);
            }
        } catch (SQLException e) {
            throw new IllegalStateException("schema script failed: " + e.getMessage(), e);
        }
    }

    /**
     * What the tables of the schema (PostgreSQL) or database (MariaDB) a data source points at look
     * like, one line per column, index and constraint, without the schema's name: two schemas made
     * by different routes are equal when these are.
     */
    public static List<String> catalog(DataSource dataSource) {
        try (Connection c = dataSource.getConnection()) {
            boolean postgres =
                    c.getMetaData().getDatabaseProductName().toLowerCase().contains("postgres");
            List<String> lines = new ArrayList<>();
            if (postgres) {
                rows(
                        c,
                        lines,
                        "SELECT 'column', table_name, column_name, ordinal_position, data_type,"
                                + " character_maximum_length, numeric_precision, is_nullable, column_default, is_identity,"
                                + " identity_generation, collation_name FROM information_schema.columns"
                                + " WHERE table_schema = current_schema() ORDER BY 2, 4");
                rows(
                        c,
                        lines,
                        "SELECT 'index', tablename, indexname, replace(indexdef, current_schema() || '.', '')"
                                + " FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 2, 3");
                rows(
                        c,
                        lines,
                        "SELECT 'constraint', conrelid::regclass::text, conname, contype,"
                                + " pg_get_constraintdef(oid) FROM pg_constraint"
                                + " WHERE connamespace = current_schema()::regnamespace ORDER BY 2, 3");
                rows(
                        c,
                        lines,
                        "SELECT 'sequence', sequence_name, data_type, start_value, increment"
                                + " FROM information_schema.sequences WHERE sequence_schema = current_schema() ORDER BY 2");
            } else {
                rows(
                        c,
                        lines,
                        "SELECT 'table', table_name, engine, table_collation, create_options"
                                + " FROM information_schema.tables WHERE table_schema = database() ORDER BY 2");
                rows(
                        c,
                        lines,
                        "SELECT 'column', table_name, column_name, ordinal_position, column_type, is_nullable,"
                                + " column_default, extra, collation_name FROM information_schema.columns"
                                + " WHERE table_schema = database() ORDER BY 2, 4");
                rows(
                        c,
                        lines,
                        "SELECT 'index', table_name, index_name, seq_in_index, column_name, non_unique,"
                                + " sub_part, index_type FROM information_schema.statistics"
                                + " WHERE table_schema = database() ORDER BY 2, 3, 4");
                rows(
                        c,
                        lines,
                        "SELECT 'constraint', table_name, constraint_name, constraint_type"
                                + " FROM information_schema.table_constraints WHERE constraint_schema = database() ORDER BY 2, 3");
                rows(
                        c,
                        lines,
                        "SELECT 'check', table_name, constraint_name, check_clause"
                                + " FROM information_schema.check_constraints WHERE constraint_schema = database() ORDER BY 2, 3");
            }
            return lines;
        } catch (SQLException e) {
            throw new IllegalStateException("reading the catalog failed: " + e.getMessage(), e);
        }
    }

    private static void rows(Connection c, List<String> lines, String sql) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(sql)) {
            int columns = rs.getMetaData().getColumnCount();
            while (rs.next()) {
                StringBuilder line = new StringBuilder();
                for (int i = 1; i <= columns; i++) {
                    line.append(i == 1 ? "" : " | ").append(rs.getString(i));
                }
                lines.add(line.toString());
            }
        }
    }
}
