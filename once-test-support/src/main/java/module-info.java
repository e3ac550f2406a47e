/**
 * Real databases and processes for tests, without the engine: embedded or external PostgreSQL and
 * MariaDB, a fresh database per test, child JVMs to kill or pause, a clock tests move by hand, an
 * application run on the module path. The schema a fresh database gets is a {@code SchemaMigration}
 * service (the test kit provides once's).
 */
module dev.once.testsupport {
    requires transitive java.sql;
    requires java.compiler; // ModulePathApp compiles the application with javac
    requires com.zaxxer.hikari;
    requires transitive embedded.postgres; // TestPostgres hands out its EmbeddedPostgres
    requires static org.junit.jupiter.api; // tests bring JUnit; a main program (the once demo) runs without it
    requires static net.jqwik.api; // StateMachines; a module whose tests use it brings jqwik
    requires org.postgresql.jdbc; // the driver TestPostgres connects with, by URL

    exports dev.once.testsupport;

    uses dev.once.testsupport.SchemaMigration;
}
