// open: Spring reads and instantiates the application's configuration reflectively. The starter is not
// required: Spring Boot finds it through its imports file (the test adds it with --add-modules).
open module app {
    requires dev.once.spring.boot.autoconfigure;
    requires org.postgresql.jdbc;
    requires java.naming; // PGSimpleDataSource is Referenceable; the driver, an automatic module, cannot say so
}
