package dev.once.testkit;

import dev.once.Schema;
import dev.once.testsupport.SchemaMigration;
import javax.sql.DataSource;

/**
 * The once tables, for every fresh test database: the test kit registers this migration (see
 * {@link SchemaMigration}), so {@code TestPostgres.shared().freshDatabase()} hands a test a schema
 * the engine can run on.
 */
public final class OnceSchemaMigration implements SchemaMigration {

    /** Called by {@link java.util.ServiceLoader}. */
    public OnceSchemaMigration() {}

    @Override
    public void migrate(DataSource dataSource) {
        Schema.migrate(dataSource);
    }
}
