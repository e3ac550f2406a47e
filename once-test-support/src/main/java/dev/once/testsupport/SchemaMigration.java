package dev.once.testsupport;

import java.util.ServiceLoader;
import javax.sql.DataSource;

/**
 * What a fresh test database gets before the test sees it: the tables of the library under test.
 * {@link TestPostgres#freshDatabase(int)} and {@link TestMariaDb#freshDatabase(int)} run the one
 * implementation registered for {@link ServiceLoader} in
 * {@code META-INF/services/dev.once.testsupport.SchemaMigration}. once-testkit registers the once
 * schema, so its users need nothing; once-core's own tests, which cannot depend on the test kit
 * (it depends on once-core), register theirs in {@code src/test/resources}. This module itself
 * knows no schema: it has no dependency on the engine.
 */
public interface SchemaMigration {

    /** Creates or upgrades the tables in the database {@code dataSource} points at. */
    void migrate(DataSource dataSource);
}
