package dev.once.spring.boot;

import dev.once.Schema;
import dev.once.jdbc.Dialects;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import org.flywaydb.core.api.MigrationVersion;
import org.flywaydb.core.api.migration.Context;
import org.flywaydb.core.api.migration.JavaMigration;

/**
 * once's migrations as one repeatable Flyway migration ({@code once schema} in the application's
 * {@code flyway_schema_history}): a Spring Boot application with Flyway gets the once tables from its own
 * Flyway run, with nothing to configure. Spring Boot hands every {@code JavaMigration} bean to Flyway.
 *
 * <p>Why one repeatable migration and not once's versioned scripts in a Flyway location: the application
 * already has its own {@code V1}, {@code V2}…; once's {@code V1__once.sql} would collide with them, and
 * numbers out of their range make every later once release an out-of-order migration Flyway refuses. A
 * repeatable migration has no version to collide; its checksum is the list of once's migrations, so a
 * release that ships a new migration (V9, V10, …) changes it and Flyway runs it again, and
 * {@link Schema#migrate(Connection, String)} applies only what the database lacks, recorded in
 * {@code <prefix>schema_version} as {@code Schema.migrate} always does. The result is the same tables,
 * column for column, as {@code Schema.migrate} makes ({@code FlywayMigrationTest}).
 */
public final class OnceFlywayMigration implements JavaMigration {

    private final String tablePrefix;

    OnceFlywayMigration(String tablePrefix) {
        this.tablePrefix = tablePrefix;
    }

    @Override
    public MigrationVersion getVersion() {
        return null; // repeatable
    }

    @Override
    public String getDescription() {
        return "once schema (prefix " + tablePrefix + ")";
    }

    @Override
    public Integer getChecksum() {
        List<String> shipped = new ArrayList<>();
        for (String dialect : List.of("postgresql", "mariadb")) {
            Schema.migrations(Dialects.byName(dialect), tablePrefix)
                    .forEach(m -> shipped.add(dialect + "/" + m.name()));
        }
        return shipped.hashCode();
    }

    @Override
    public boolean canExecuteInTransaction() {
        return false; // Schema.migrate commits each migration on its own, under its lock
    }

    @Override
    public void migrate(Context context) throws Exception {
        AutoCommit.run(context.getConnection(), c -> Schema.migrate(c, tablePrefix));
    }
}
