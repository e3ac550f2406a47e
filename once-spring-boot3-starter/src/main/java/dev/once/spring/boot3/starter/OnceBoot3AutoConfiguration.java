package dev.once.spring.boot3.starter;

import dev.once.spring.boot.OnceAutoConfiguration;
import dev.once.spring.boot.internal.BootLine;
import org.springframework.boot.autoconfigure.AutoConfiguration;

/** Stops a Boot 4 application that has this Boot 3 starter, naming once-spring-boot-starter. */
@AutoConfiguration(before = OnceAutoConfiguration.class)
public class OnceBoot3AutoConfiguration {

    OnceBoot3AutoConfiguration() {
        BootLine.require(3, "once-spring-boot3-starter");
    }
}
