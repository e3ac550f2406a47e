package dev.once.core;

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
 * The once tables for every fresh test database of these tests, as {@link Schema#freshDatabaseStatements}
 * in one batch: once-testkit registers the same migration for its users, but once-core's tests cannot
 * depend on the test kit (it depends on once-core), so they register this one
 * (src/test/resources/META-INF/services). CoreSchemaMigrationTest proves the tables equal to
 * {@link Schema#migrate}'s.
 */
public final class CoreSchemaMigration implements SchemaMigration {

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
