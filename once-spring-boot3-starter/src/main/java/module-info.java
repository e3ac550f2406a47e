/**
 * The Spring Boot 3.5 starter of once: the Boot line check and the health indicator on Boot 3's
 * {@code spring-boot-actuator}. Spring Boot finds its auto-configurations through
 * {@code META-INF/spring/...AutoConfiguration.imports}, never through a {@code requires}: on the
 * module path an application {@code requires dev.once.spring.boot3.starter} (or adds it with
 * {@code --add-modules}) so that it is in the module graph at all.
 */
@SuppressWarnings("module") // "boot3": the name it had as an automatic module, kept
module dev.once.spring.boot3.starter {
    requires transitive dev.once.spring.boot.autoconfigure;
    requires static spring.boot.actuator;

    exports dev.once.spring.boot3.starter;

    // Spring instantiates the auto-configurations and calls their package-private @Bean methods
    opens dev.once.spring.boot3.starter to
            spring.core;
}
