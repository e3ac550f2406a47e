package dev.once.bench;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;

/**
 * Versions of the libraries the benchmark runs against, as once-bench/pom.xml resolved them
 * (written into {@code versions.properties} at build time: several peers are built with Gradle
 * and carry no pom.properties, and the shaded jar drops their manifests).
 */
final class Versions {

    private static final Properties VERSIONS = load();

    private Versions() {}

    /** {@code group:artifact:version} for an artifact listed in versions.properties. */
    static String of(String group, String artifact) {
        return group + ":" + artifact + ":" + version(artifact);
    }

    static String version(String artifact) {
        String v = VERSIONS.getProperty(artifact);
        if (v == null) {
            throw new IllegalArgumentException("versions.properties has no entry for '" + artifact + "'");
        }
        return v;
    }

    private static Properties load() {
        Properties p = new Properties();
        try (InputStream in = Versions.class.getResourceAsStream("versions.properties")) {
            if (in == null) {
                throw new IllegalStateException("dev/once/bench/versions.properties is missing from the class path");
            }
            p.load(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return p;
    }
}
