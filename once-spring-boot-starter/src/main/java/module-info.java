/**
 * The Spring Boot 4 starter of once: the Boot line check and the health indicator on Boot 4's
 * {@code spring-boot-health}. Spring Boot finds its auto-configurations through
 * {@code META-INF/spring/...AutoConfiguration.imports}, never through a {@code requires}: on the
 * module path an application {@code requires dev.once.spring.boot.starter} (or adds it with
 * {@code --add-modules}) so that it is in the module graph at all.
 */
module dev.once.spring.boot.starter {
    requires transitive dev.once.spring.boot.autoconfigure;
    requires static spring.boot.health;

    exports dev.once.spring.boot.starter;

    // Spring instantiates the auto-configurations and calls their package-private @Bean methods
    opens dev.once.spring.boot.starter to
            spring.core;
}
