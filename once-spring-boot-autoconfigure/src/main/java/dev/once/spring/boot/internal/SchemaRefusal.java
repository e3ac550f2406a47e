package dev.once.spring.boot.internal;

import dev.once.Schema;
import dev.once.jdbc.Dialect;
import dev.once.spring.boot.OnceProperties;

/**
 * Why a start (OnceSchema) or the health check (OnceHealth, in the starters' indicators) finds the
 * schema unusable, with the four ways to fix it.
 */
public final class SchemaRefusal {

    private SchemaRefusal() {}

    public static String message(Schema.Status status, OnceProperties.Schema.Initialization mode, Dialect dialect) {
        return "the once schema is " + status.describe() + " and once.schema.initialize-schema is "
                + mode.name().toLowerCase(java.util.Locale.ROOT) + ", so nothing creates it. Fix one of: (1) set"
                + " once.schema.initialize-schema=always to migrate at startup; (2) with Flyway, add"
                + " org.springframework.boot:spring-boot-flyway (Boot 4) or org.flywaydb:flyway-core"
                + (dialect.name().equals("postgresql") ? " + flyway-database-postgresql" : " + flyway-mysql")
                + ": once's migration then runs in your Flyway history; (3) with Liquibase, include"
                + " classpath:db/changelog/once/changelog.xml in your changelog; (4) print the SQL with"
                + " Schema.script(...) or `once schema print` and run it yourself";
    }
}
