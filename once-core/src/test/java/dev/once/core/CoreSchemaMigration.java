package dev.once.core;

import dev.once.Schema;
import dev.once.testsupport.SchemaMigration;
import javax.sql.DataSource;

/**
 * The once tables for every fresh test database of these tests. once-testkit registers the same
 * migration for its users, but once-core's tests cannot depend on the test kit (it depends on
 * once-core), so they register this one (src/test/resources/META-INF/services).
 */
public final class CoreSchemaMigration implements SchemaMigration {

    @Override
    public void migrate(DataSource dataSource) {
        Schema.migrate(dataSource);
    }
}
