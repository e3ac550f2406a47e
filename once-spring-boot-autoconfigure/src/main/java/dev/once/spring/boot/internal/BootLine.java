package dev.once.spring.boot.internal;

import org.springframework.boot.SpringBootVersion;

/**
 * The starters are per Boot line (once-spring-boot-starter for Boot 4, once-spring-boot3-starter for
 * Boot 3): the wrong one would fail later on a missing class, far from the cause. Each starter's own
 * auto-configuration calls {@link #require} first, so the application stops naming the fix.
 */
public final class BootLine {

    private BootLine() {}

    /**
     * @param major the Boot major version the calling starter is built for
     * @param starter the calling starter's artifact
     */
    public static void require(int major, String starter) {
        String version = SpringBootVersion.getVersion();
        // null when Boot's jar has no manifest (repackaged by hand): nothing to check against
        if (version == null || version.startsWith(major + ".")) {
            return;
        }
        String fix = version.startsWith("3.")
                ? "depend on dev.once:once-spring-boot3-starter instead (same version, same properties)"
                : version.startsWith("4.")
                        ? "depend on dev.once:once-spring-boot-starter instead (same version, same properties)"
                        : "once supports Spring Boot 3.5 (once-spring-boot3-starter) and 4 (once-spring-boot-starter)";
        throw new IllegalStateException("dev.once:" + starter + " is for Spring Boot " + major + ".x, but this"
                + " application runs Spring Boot " + version + ": " + fix);
    }
}
