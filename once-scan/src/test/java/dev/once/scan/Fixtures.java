package dev.once.scan;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/** The fixture corpus: one small project per pattern under src/test/resources/fixtures, each with its expected findings. */
final class Fixtures {

    static final Path ROOT = Path.of("src/test/resources/fixtures");

    /** One expected finding: rule id, file name, text on the reported line, and text its message must hold (or empty). */
    record Expected(String rule, String file, String text, String message) {
        boolean matches(Finding f) {
            return f.rule().id().equals(rule)
                    && f.location().file().endsWith("/" + file)
                    && f.location().snippet().contains(text)
                    && f.message().contains(message);
        }

        @Override
        public String toString() {
            return rule + " " + file + " '" + text + "'" + (message.isEmpty() ? "" : " saying '" + message + "'");
        }
    }

    private Fixtures() {}

    static List<Path> all() {
        try (Stream<Path> dirs = Files.list(ROOT)) {
            return dirs.filter(Files::isDirectory).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Path of(String name) {
        return ROOT.resolve(name);
    }

    static List<Expected> expected(Path fixture) {
        List<Expected> out = new ArrayList<>();
        try {
            for (String line : Files.readAllLines(fixture.resolve("expected-findings.txt"))) {
                if (line.isBlank() || line.startsWith("#")) {
                    continue;
                }
                // rule | file | text on the line [| text of the message]
                String[] parts = line.split("\\s*\\|\\s*", 4);
                out.add(new Expected(
                        parts[0].strip(),
                        parts[1].strip(),
                        parts[2].strip(),
                        parts.length > 3 ? parts[3].strip() : ""));
            }
        } catch (IOException e) {
            throw new UncheckedIOException("every fixture has an expected-findings.txt: " + fixture, e);
        }
        return out;
    }

    static ScanReport scan(Path fixture) {
        return ConsumerScan.builder().root(fixture).build().run();
    }
}
