// open: Spring reads and instantiates the application's configuration reflectively
open module app {
    requires dev.once.spring;
    requires org.postgresql.jdbc;
    requires org.apache.commons.logging; // Spring logs through it; Spring's automatic modules cannot say so
    requires java.naming; // PGSimpleDataSource is Referenceable; the driver, an automatic module, cannot say so
}
