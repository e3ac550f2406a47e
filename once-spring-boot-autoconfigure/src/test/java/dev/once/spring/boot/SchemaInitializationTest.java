package dev.once.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Schema;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.diagnostics.FailureAnalyzer;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.io.support.SpringFactoriesLoader;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The once tables the Spring way: a missing or outdated schema stops the start with the fix in the message
 * (and the health indicator says so when it goes missing later), {@code once.schema.initialize-schema}
 * follows Boot's {@code embedded | always | never}, and Flyway and Liquibase apply once's migrations in
 * the application's own history, with the same result as {@code Schema.migrate}. Real PostgreSQL, a schema
 * of its own per case.
 */
class SchemaInitializationTest {

    static final String BASE = TestPostgres.shared().jdbcUrl();
    final List<String> schemas = new ArrayList<>();

    @AfterEach
    void drop() throws Exception {
        for (String s : schemas) {
            admin("DROP SCHEMA IF EXISTS " + s + " CASCADE");
        }
    }

    static void admin(String sql) throws Exception {
        try (Connection c = DriverManager.getConnection(BASE);
                Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    /** A new, empty schema; the JDBC URL that makes it the current one. */
    String emptySchema() throws Exception {
        String schema = "once_init_" + ProcessHandle.current().pid() + "_" + System.nanoTime();
        admin("CREATE SCHEMA " + schema);
        schemas.add(schema);
        return BASE + (BASE.contains("?") ? "&" : "?") + "currentSchema=" + schema;
    }

    static ApplicationContextRunner app(String url, Class<?>... more) {
        List<Class<?>> configurations = new ArrayList<>(List.of(
                Boot.DATA_SOURCE, Boot.DATA_SOURCE_TRANSACTION_MANAGER, OnceAutoConfiguration.class, Boot.ONCE_HEALTH));
        configurations.addAll(List.of(more));
        return new ApplicationContextRunner()
                .withClassLoader(new FilteredClassLoader(
                        "org.springframework.kafka", "dev.once.kafka", "dev.once.http", "io.micrometer.tracing"))
                .withConfiguration(AutoConfigurations.of(configurations.toArray(Class<?>[]::new)))
                .withPropertyValues("spring.datasource.url=" + url, "once.retention.enabled=false");
    }

    static ApplicationContextRunner withoutFlyway(ApplicationContextRunner runner) {
        return runner.withClassLoader(new FilteredClassLoader(
                "org.springframework.kafka",
                "dev.once.kafka",
                "dev.once.http",
                "io.micrometer.tracing",
                "org.flywaydb",
                "liquibase"));
    }

    static String failure(org.springframework.context.ApplicationContext context) {
        Throwable t = ((org.springframework.boot.test.context.assertj.AssertableApplicationContext) context)
                .getStartupFailure();
        StringBuilder b = new StringBuilder();
        for (; t != null; t = t.getCause()) {
            b.append(t.getMessage()).append('\n');
        }
        return b.toString();
    }

    @Test
    void aMissingSchemaStopsTheStartNamingTheFix() throws Exception {
        withoutFlyway(app(emptySchema())).run(context -> {
            assertThat(context).hasFailed();
            assertThat(failure(context))
                    .contains("the once schema is missing (no table once_inbox")
                    .contains("once.schema.initialize-schema=always")
                    .contains("spring-boot-flyway")
                    .contains("classpath:db/changelog/once/changelog.xml");
        });
    }

    @Test
    void bootsFailureReportLeadsWithTheFix() throws Exception {
        // as Boot finds them (Boot's own analyzers want constructor arguments: left out here)
        List<FailureAnalyzer> analyzers = SpringFactoriesLoader.forDefaultResourceLocation()
                .load(FailureAnalyzer.class, SpringFactoriesLoader.FailureHandler.handleMessage((m, e) -> {}));
        assertThat(analyzers).as("registered for Boot").hasAtLeastOneElementOfType(OnceFailureAnalyzer.class);
        withoutFlyway(app(emptySchema())).run(context -> {
            Throwable failure = context.getStartupFailure();
            FailureAnalysis analysis = analyzers.stream()
                    .map(a -> a.analyze(failure))
                    .filter(java.util.Objects::nonNull)
                    .findFirst()
                    .orElseThrow();
            assertThat(analysis.getDescription())
                    .startsWith("once refused to start: the once schema is missing (no table once_inbox")
                    .contains("once.schema.initialize-schema=always");
        });
    }

    @Test
    void anOutdatedSchemaStopsTheStartNamingTheVersions() throws Exception {
        String url = emptySchema();
        Db db = database(url);
        int latest = Schema.migrate(db.dataSource());
        db.execute("DELETE FROM once_schema_version WHERE version = " + latest);
        withoutFlyway(app(url)).run(context -> {
            assertThat(context).hasFailed();
            assertThat(failure(context))
                    .contains("the once schema is outdated (at V" + (latest - 1) + ", this once needs V" + latest + ")")
                    .contains("once.schema.initialize-schema=always");
        });
        db.close();
    }

    @Test
    void initializeSchemaAlwaysCreatesTheTablesAndTheFormerMigrateTrueIsTheSame() throws Exception {
        for (String setting : List.of("once.schema.initialize-schema=always", "once.schema.migrate=true")) {
            withoutFlyway(app(emptySchema())).withPropertyValues(setting).run(context -> {
                assertThat(context).as(setting).hasNotFailed();
                assertThat(context.getBean(OnceSchema.class).applied()).isPositive();
                assertThat(context.getBean(OnceSchema.class).status().isCurrent())
                        .isTrue();
            });
        }
    }

    @Test
    void badSchemaSettingsAreRefusedByName() throws Exception {
        String url = emptySchema();
        withoutFlyway(app(url))
                .withPropertyValues("once.schema.initialize-schema=sometimes")
                .run(context -> {
                    assertThat(context).hasFailed();
                    assertThat(failure(context))
                            .contains("once.schema.initialize-schema")
                            .contains("sometimes");
                });
        withoutFlyway(app(url))
                .withPropertyValues("once.schema.initialize-schema=never", "once.schema.migrate=true")
                .run(context -> {
                    assertThat(context).hasFailed();
                    assertThat(failure(context))
                            .contains("once.schema.migrate=true contradicts once.schema.initialize-schema=never");
                });
    }

    @Test
    void theHealthIndicatorIsDownWhenTheSchemaFallsBehind() throws Exception {
        withoutFlyway(app(emptySchema()))
                .withPropertyValues("once.schema.initialize-schema=always")
                .run(context -> {
                    assertThat(Boot.health(context).status()).isEqualTo("UP");
                    assertThat(Boot.health(context).details()).containsEntry("schema", "current (V" + latest() + ")");
                    new JdbcTemplate(context.getBean(DataSource.class))
                            .update("DELETE FROM once_schema_version WHERE version = ?", latest());
                    var down = Boot.health(context);
                    assertThat(down.status()).isEqualTo("DOWN");
                    assertThat(down.details().get("schema").toString()).startsWith("outdated");
                    assertThat(down.details().get("fix").toString()).contains("once.schema.initialize-schema=always");
                });
    }

    @Test
    void flywayAppliesOncesMigrationInTheApplicationsOwnHistory() throws Exception {
        String url = emptySchema();
        ApplicationContextRunner flyway =
                app(url, Boot.FLYWAY).withPropertyValues("spring.flyway.locations=classpath:db/migration/apptest");
        flyway.run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(OnceSchema.class).status().isCurrent()).isTrue();
        });
        flyway.run(context -> assertThat(context)
                .as("a second start finds everything applied")
                .hasNotFailed());
        Db db = database(url);
        assertThat(db.queryLong("SELECT count(*) FROM flyway_schema_history WHERE version = '1' AND success"))
                .as("the application's own V1 ran beside once's migration")
                .isEqualTo(1);
        assertThat(db.queryLong("SELECT count(*) FROM flyway_schema_history WHERE version IS NULL"
                        + " AND description = 'once schema (prefix once_)' AND success"))
                .isEqualTo(1);
        assertThat(tables(url)).isEqualTo(tables(migratedBySchemaMigrate()));
        db.close();
    }

    @Test
    void liquibaseAppliesOncesChangelogInTheApplicationsOwnHistory() throws Exception {
        String url = emptySchema();
        ApplicationContextRunner liquibase = app(url, Boot.LIQUIBASE)
                .withClassLoader(new FilteredClassLoader(
                        "org.springframework.kafka",
                        "dev.once.kafka",
                        "dev.once.http",
                        "io.micrometer.tracing",
                        "org.flywaydb"))
                .withPropertyValues("spring.liquibase.change-log=classpath:db/changelog/apptest.xml");
        liquibase.run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(OnceSchema.class).status().isCurrent()).isTrue();
        });
        liquibase.run(context -> assertThat(context)
                .as("a second start finds everything applied")
                .hasNotFailed());
        Db db = database(url);
        assertThat(db.queryLong("SELECT count(*) FROM databasechangelog WHERE id = 'once-schema'"))
                .isEqualTo(1);
        assertThat(tables(url)).isEqualTo(tables(migratedBySchemaMigrate()));
        db.close();
    }

    static int latest() {
        return Schema.migrations(dev.once.jdbc.Dialects.byName("postgresql"), "once_").stream()
                .mapToInt(Schema.Migration::version)
                .max()
                .orElseThrow();
    }

    String migratedBySchemaMigrate() throws Exception {
        String url = emptySchema();
        Db db = database(url);
        Schema.migrate(db.dataSource());
        db.close();
        return url;
    }

    /** The once tables as the catalog describes them: columns with types, nullability and defaults; indexes; versions. */
    static List<String> tables(String url) throws Exception {
        List<String> rows = new ArrayList<>();
        try (Connection c = DriverManager.getConnection(url);
                Statement s = c.createStatement()) {
            try (ResultSet rs = s.executeQuery("SELECT table_name, column_name, data_type, is_nullable,"
                    + " coalesce(column_default, ''), coalesce(character_maximum_length, 0)"
                    + " FROM information_schema.columns WHERE table_schema = current_schema()"
                    + " AND table_name LIKE 'once\\_%' ORDER BY table_name, column_name")) {
                while (rs.next()) {
                    rows.add(rs.getString(1) + "." + rs.getString(2) + " " + rs.getString(3) + " null="
                            + rs.getString(4) + " default=" + rs.getString(5) + " len=" + rs.getInt(6));
                }
            }
            try (ResultSet rs = s.executeQuery("SELECT indexname, replace(indexdef, schemaname || '.', '')"
                    + " FROM pg_indexes WHERE schemaname = current_schema() AND tablename LIKE 'once\\_%'"
                    + " ORDER BY indexname")) {
                while (rs.next()) {
                    rows.add("index " + rs.getString(1) + ": " + rs.getString(2));
                }
            }
            try (ResultSet rs = s.executeQuery("SELECT version, name FROM once_schema_version ORDER BY version")) {
                while (rs.next()) {
                    rows.add("version " + rs.getInt(1) + " " + rs.getString(2));
                }
            }
        }
        assertThat(rows).as("once tables at " + url).isNotEmpty();
        return rows;
    }

    /** The schema at {@code url}, through plain JDBC. */
    record Db(DataSource dataSource) {
        void execute(String sql) {
            new JdbcTemplate(dataSource).execute(sql);
        }

        long queryLong(String sql) {
            return new JdbcTemplate(dataSource).queryForObject(sql, Long.class);
        }

        void close() {}
    }

    static Db database(String url) {
        return new Db(new org.springframework.jdbc.datasource.DriverManagerDataSource(url));
    }
}
