module app {
    requires dev.once.kafka;
    requires org.postgresql.jdbc;
    requires java.naming; // PGSimpleDataSource is Referenceable; the driver, an automatic module, cannot say so
}
