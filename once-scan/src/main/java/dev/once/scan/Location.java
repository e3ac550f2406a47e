package dev.once.scan;

import java.util.Objects;

/**
 * A place in the scanned repository.
 *
 * @param file    path relative to the scanned root, with {@code /} separators
 * @param line    1-based line
 * @param column  1-based column
 * @param snippet the source line, trimmed
 */
public record Location(String file, int line, int column, String snippet) {

    public Location {
        Objects.requireNonNull(file, "file");
        if (line < 1 || column < 1) {
            throw new IllegalArgumentException("line and column are 1-based, but were " + line + ":" + column);
        }
        snippet = snippet == null ? "" : snippet.strip();
    }

    @Override
    public String toString() {
        return file + ":" + line;
    }
}
