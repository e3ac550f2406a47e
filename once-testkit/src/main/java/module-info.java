/**
 * The test kit: JUnit 5 contracts for idempotent handlers and broker adapters, fault-injecting
 * sources and network proxies, an embedded Kafka broker, and the once schema in every fresh test
 * database. The broker runs in a JVM of its own ({@code dev.once.testkit.internal}, not exported), on
 * the class path: its jars cannot be modules, and this module needs none of them.
 */
module dev.once.testkit {
    requires transitive dev.once.core;
    requires transitive dev.once.testsupport;
    requires transitive kafka.clients;
    requires static org.junit.jupiter.api; // tests bring JUnit; the once demo runs without it
    requires com.zaxxer.hikari;
    requires org.assertj.core;
    requires awaitility;
    requires static net.jqwik.api; // BrokerChain; a module whose tests use it brings jqwik
    requires static spring.boot; // SpringAckGap only, with the user's Spring Boot
    requires static spring.context;

    exports dev.once.testkit;
    exports dev.once.testkit.broker;
    exports dev.once.testkit.fault;
    exports dev.once.testkit.kafka;
    exports dev.once.testkit.spring;

    // JUnit runs the contracts' package-private test methods in a user's subclass
    opens dev.once.testkit to
            org.junit.platform.commons;
    opens dev.once.testkit.broker to
            org.junit.platform.commons;

    provides dev.once.testsupport.SchemaMigration with
            dev.once.testkit.OnceSchemaMigration;
}
