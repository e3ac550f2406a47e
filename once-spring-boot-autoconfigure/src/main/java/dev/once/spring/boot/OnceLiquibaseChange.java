package dev.once.spring.boot;

import dev.once.Schema;
import liquibase.change.custom.CustomTaskChange;
import liquibase.database.Database;
import liquibase.database.jvm.JdbcConnection;
import liquibase.exception.CustomChangeException;
import liquibase.exception.ValidationErrors;
import liquibase.resource.ResourceAccessor;

/**
 * once's migrations as a Liquibase change, run by {@code classpath:db/changelog/once/changelog.xml}
 * (include it in the application's changelog). The change set runs at every update ({@code runAlways}),
 * and {@link Schema#migrate(java.sql.Connection, String)} applies only the migrations the database lacks,
 * so a once release with a new migration needs no new change set; the versions are recorded in
 * {@code <prefix>schema_version}, as with {@code Schema.migrate}. The table prefix is the changelog
 * parameter {@code once.tablePrefix} (default {@code once_};
 * {@code spring.liquibase.parameters.once.tablePrefix} sets it).
 */
public class OnceLiquibaseChange implements CustomTaskChange {

    private String tablePrefix = "once_";

    /** Set from the change's {@code tablePrefix} parameter. */
    public void setTablePrefix(String tablePrefix) {
        this.tablePrefix = tablePrefix;
    }

    @Override
    public void execute(Database database) throws CustomChangeException {
        if (!(database.getConnection() instanceof JdbcConnection jdbc)) {
            throw new CustomChangeException(
                    "once's migration needs a JDBC connection, but Liquibase has " + database.getConnection());
        }
        try {
            AutoCommit.run(jdbc.getUnderlyingConnection(), c -> Schema.migrate(c, tablePrefix));
        } catch (java.sql.SQLException | RuntimeException e) {
            throw new CustomChangeException("once schema migration (prefix '" + tablePrefix + "') failed: " + e, e);
        }
    }

    @Override
    public String getConfirmationMessage() {
        return "once schema (prefix " + tablePrefix + ") is current";
    }

    @Override
    public void setUp() {}

    @Override
    public void setFileOpener(ResourceAccessor resourceAccessor) {}

    @Override
    public ValidationErrors validate(Database database) {
        return new ValidationErrors();
    }
}
