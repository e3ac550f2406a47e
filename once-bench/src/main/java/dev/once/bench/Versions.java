package dev.once.bench;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/** Versions of the libraries on the class path, read from the pom.properties every Maven jar carries. */
final class Versions {

    private Versions() {
    }

    /** {@code group:artifact:version}, or {@code group:artifact} (version unknown) outside a jar. */
    static String of(String group, String artifact) {
        String resource = "/META-INF/maven/" + group + "/" + artifact + "/pom.properties";
        try (InputStream in = Versions.class.getResourceAsStream(resource)) {
            if (in != null) {
                Properties p = new Properties();
                p.load(in);
                return group + ":" + artifact + ":" + p.getProperty("version");
            }
        } catch (IOException e) {
            // fall through to the unversioned name
        }
        return group + ":" + artifact + " (version unknown)";
    }
}
