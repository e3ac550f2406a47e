package dev.once.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.spring.boot.internal.BootLine;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootVersion;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** Each starter refuses the other Boot line at startup, naming the artifact to use; its own line starts. */
class BootLineTest {

    static final String VERSION = SpringBootVersion.getVersion();
    static final boolean BOOT3 = VERSION.startsWith("3.");

    @Test
    void theOtherLinesStarterIsRefusedNamingThisLinesStarter() {
        int other = BOOT3 ? 4 : 3;
        String otherStarter = BOOT3 ? "once-spring-boot-starter" : "once-spring-boot3-starter";
        String thisStarter = BOOT3 ? "dev.once:once-spring-boot3-starter" : "dev.once:once-spring-boot-starter";
        assertThatThrownBy(() -> BootLine.require(other, otherStarter))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("is for Spring Boot " + other + ".x")
                .hasMessageContaining("runs Spring Boot " + VERSION)
                .hasMessageContaining("depend on " + thisStarter + " instead");
    }

    @Test
    void thisLinesStarterStarts() throws Exception {
        Class<?> own = Class.forName(
                BOOT3
                        ? "dev.once.spring.boot3.starter.OnceBoot3AutoConfiguration"
                        : "dev.once.spring.boot.starter.OnceBoot4AutoConfiguration");
        assertThatCode(() -> BootLine.require(BOOT3 ? 3 : 4, "this")).doesNotThrowAnyException();
        new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(own))
                .run(context -> assertThat(context).hasNotFailed());
    }
}
