package dev.once.testkit;

import dev.once.Schema;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.testsupport.SchemaMigration;
import dev.once.testsupport.SchemaScript;
import java.sql.Connection;
import java.sql.SQLException;
import javax.sql.DataSource;

/**
 * The once tables, for every fresh test database: the test kit registers this migration (see
 * {@link SchemaMigration}), so {@code TestPostgres.shared().freshDatabase()} hands a test a schema
 * the engine can run on. It sends {@link Schema#freshDatabaseStatements} as one batch: a fresh test
 * database is nobody else's, so the lock and version reads of {@link Schema#migrate} guard nothing
 * there and cost a second a database on a loaded CI machine.
 */
public final class OnceSchemaMigration implements SchemaMigration {

    /** Called by {@link java.util.ServiceLoader}. */
    public OnceSchemaMigration() {}

    @Override
    public void migrate(DataSource dataSource) {
        Dialect dialect;
        try (Connection c = dataSource.getConnection()) {
            dialect = Dialects.detect(c);
        } catch (SQLException e) {
            throw new IllegalStateException("no connection to the fresh test database: " + e.getMessage(), e);
        }
        SchemaScript.run(dataSource, Schema.freshDatabaseStatements(dialect, TablePrefix.DEFAULT));
    }
}
