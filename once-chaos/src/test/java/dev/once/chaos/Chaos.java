package dev.once.chaos;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * Sizes and figures of the fault tests. Every test prints one {@code CHAOS name=… rounds=…
 * lost=… applied_twice=… …} line per scenario (on stdout and appended to {@value #LINES}, which
 * {@link ReliabilityReport} turns into RELIABILITY.md). Counts are the CI sizes times
 * {@value #SCALE_PROPERTY} (default 1), which the report command raises.
 */
final class Chaos {

    static final String SCALE_PROPERTY = "once.chaos.scale";
    static final String LINES = "target/chaos/chaos-lines.txt";

    private Chaos() {}

    /** {@code ciCount} times the scale. */
    static int scaled(int ciCount) {
        return (int) Math.max(1, Math.round(ciCount * scale()));
    }

    /**
     * {@code ciCount} at the default scale, else {@code reportCount} times the scale: a count cut for the
     * README's test command (its faults start after a fraction of the events, so they still meet traffic)
     * leaves the report's figures as large as before.
     */
    static int scaled(int ciCount, int reportCount) {
        double scale = scale();
        return scale == 1 ? ciCount : (int) Math.max(1, Math.round(reportCount * scale));
    }

    private static double scale() {
        return Double.parseDouble(
                System.getProperty(SCALE_PROPERTY, System.getenv().getOrDefault("ONCE_CHAOS_SCALE", "1")));
    }

    /** A figure being built: name, rounds, lost, applied twice, then any extra fields in order. */
    static Figure figure(String name) {
        return new Figure(name);
    }

    static final class Figure {
        private final Map<String, Object> fields = new LinkedHashMap<>();

        private Figure(String name) {
            fields.put("name", name);
            fields.put("rounds", 0);
            fields.put("lost", 0);
            fields.put("applied_twice", 0);
        }

        Figure rounds(long n) {
            return put("rounds", n);
        }

        Figure lost(long n) {
            return put("lost", n);
        }

        Figure appliedTwice(long n) {
            return put("applied_twice", n);
        }

        Figure put(String key, Object value) {
            fields.put(key, value instanceof Double d ? String.format(Locale.ROOT, "%.2f", d) : value);
            return this;
        }

        /** Marks a deliberate break (the test showing it can fail); null for the real thing. */
        Figure broken(String what) {
            return what == null ? this : put("break", what);
        }

        long get(String key) {
            return Long.parseLong(String.valueOf(fields.get(key)));
        }

        /** Prints the line and records it for the report. */
        Figure print() {
            StringBuilder line = new StringBuilder("CHAOS");
            fields.forEach((k, v) -> line.append(' ').append(k).append('=').append(v));
            String text = line.toString();
            System.out.println(text);
            try {
                Path file = Path.of(LINES);
                Files.createDirectories(file.getParent());
                Files.writeString(
                        file,
                        text + System.lineSeparator(),
                        StandardCharsets.UTF_8,
                        StandardOpenOption.CREATE,
                        StandardOpenOption.APPEND);
            } catch (IOException e) {
                throw new UncheckedIOException("could not record " + text, e);
            }
            return this;
        }
    }
}
