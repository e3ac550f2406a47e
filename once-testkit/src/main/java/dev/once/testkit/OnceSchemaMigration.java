package dev.once.testkit;

import dev.once.Schema;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.jdbc.TablePrefix;
import dev.once.testsupport.SchemaMigration;
import dev.once.testsupport.SchemaScript;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
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
        // The shipped migrations as one batch (SchemaScript; once-core's tests hold a copy, as they cannot depend
        // on the test kit): a fresh test database is nobody else's, so the lock and version reads of
        // Schema.migrate guard nothing there and cost a second a database on the loaded CI machine.
        // OnceSchemaMigrationTest proves the tables equal to Schema.migrate's.
        Dialect dialect;
        try (Connection c = dataSource.getConnection()) {
            dialect = Dialects.detect(c);
        } catch (SQLException e) {
            throw new IllegalStateException("no connection to the fresh test database: " + e.getMessage(), e);
        }
        String versionTable = dialect.quote(TablePrefix.DEFAULT + "schema_version");
        List<String> script = new ArrayList<>();
        // the version table exactly as Schema.migrate creates it
        script.add("CREATE TABLE IF NOT EXISTS " + versionTable + " (version integer PRIMARY KEY,"
                + " name varchar(255) NOT NULL, applied_at timestamp NOT NULL)");
        for (Schema.Migration m : Schema.migrations(dialect, TablePrefix.DEFAULT)) {
            script.addAll(SchemaScript.statements(m.sql()));
            script.add("INSERT INTO " + versionTable + " (version, name, applied_at) VALUES (" + m.version() + ", '"
                    + m.name().replace("'", "''") + "', CURRENT_TIMESTAMP)");
        }
        SchemaScript.run(dataSource, script);
    }
}
