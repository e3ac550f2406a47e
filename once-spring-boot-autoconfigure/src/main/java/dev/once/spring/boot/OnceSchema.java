package dev.once.spring.boot;

import dev.once.InvalidConfigurationException;
import dev.once.Schema;
import dev.once.jdbc.Dialects;
import dev.once.spring.boot.internal.SchemaRefusal;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The once tables as this start found (and, with {@code once.schema.initialize-schema=always}, migrated)
 * them. Beans that touch the tables are created after it, and after Flyway and Liquibase, so a missing or
 * outdated schema stops the start here, with the fix in the message, instead of failing every delivery.
 *
 * @param applied migrations applied by this start (0 when the schema was current or once does not migrate)
 * @param status  what the database holds after this start's migration, if any
 */
public record OnceSchema(int applied, Schema.Status status) {

    private static final Logger log = LoggerFactory.getLogger(OnceSchema.class);

    /**
     * Migrates when the mode says so, then checks.
     *
     * @throws InvalidConfigurationException when the tables are missing or older than this once needs,
     *         naming the property, the Flyway set-up and the Liquibase changelog that fix it
     */
    static OnceSchema initialize(DataSource dataSource, OnceProperties properties) {
        String prefix = properties.getTablePrefix();
        OnceProperties.Schema.Initialization mode = properties.getSchema().initialization();
        int applied = mode == OnceProperties.Schema.Initialization.ALWAYS ? Schema.migrate(dataSource, prefix) : 0;
        Schema.Status status = Schema.status(dataSource, prefix);
        if (status.isUnversioned()) {
            // Tables copied into a migration tool by hand before the starter shipped its own migration:
            // their version cannot be read, so the start goes on, and says so once.
            log.warn(
                    "once schema is {}: its version cannot be checked (the tables were made from the scripts"
                            + " outside once's own migration); make sure every migration of dev/once/jdbc/{}/"
                            + "migrations.list is applied",
                    status.describe(),
                    Dialects.detect(dataSource).name());
        } else if (!status.isCurrent()) {
            throw new InvalidConfigurationException(SchemaRefusal.message(status, mode, Dialects.detect(dataSource)));
        }
        return new OnceSchema(applied, status);
    }
}
