package dev.once.spring.boot.starter;

import dev.once.spring.boot.OnceAutoConfiguration;
import dev.once.spring.boot.internal.BootLine;
import org.springframework.boot.autoconfigure.AutoConfiguration;

/** Stops a Boot 3 application that has this Boot 4 starter, naming once-spring-boot3-starter. */
@AutoConfiguration(before = OnceAutoConfiguration.class)
public class OnceBoot4AutoConfiguration {

    OnceBoot4AutoConfiguration() {
        BootLine.require(4, "once-spring-boot-starter");
    }
}
