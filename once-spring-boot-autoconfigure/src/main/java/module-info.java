/**
 * The Spring Boot auto-configuration of once, shared by the Boot 3 and Boot 4 starters. Spring Boot's
 * jars are automatic modules: reading one reads them all, so the classes whose module differs between
 * the lines ({@code @DependsOnDatabaseInitialization}: spring-boot on Boot 3, spring-boot-sql on Boot 4)
 * are found on either. The optional integrations are {@code requires static}: each is used only when
 * its library is present.
 */
@SuppressWarnings("module") // the starters are not in this module's graph when it compiles
module dev.once.spring.boot.autoconfigure {
    requires transitive dev.once.spring;
    requires transitive spring.boot;
    requires transitive spring.boot.autoconfigure;
    requires org.slf4j;
    requires static spring.boot.sql;
    requires static spring.boot.actuator;
    requires static spring.boot.actuator.autoconfigure;
    requires static micrometer.tracing;
    requires static dev.once.http;
    requires static dev.once.kafka;
    requires static spring.kafka;
    requires static jakarta.servlet;
    requires static flyway.core; // no Automatic-Module-Name: its file name's
    requires static liquibase.core;

    exports dev.once.spring.boot;
    // what the starters' own auto-configurations share (the Boot line check, the health report)
    exports dev.once.spring.boot.internal to
            dev.once.spring.boot.starter,
            dev.once.spring.boot3.starter;

    // Spring instantiates the auto-configurations and calls their package-private @Bean methods
    opens dev.once.spring.boot to
            spring.core;
}
