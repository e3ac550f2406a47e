package dev.once.scan;

import java.util.Objects;

/**
 * A place in the scanned repository.
 *
 * @param file    path relative to the scanned root, with {@code /} separators
 * @param line    1-based line
 * @param column  1-based column
 * @param snippet the source line, trimmed
 * @param endLine the last line of what is located, {@code line} unless it spans more (a handler method
 *                whose annotations run over several lines above its name)
 */
public record Location(String file, int line, int column, String snippet, int endLine) {

    public Location {
        Objects.requireNonNull(file, "file");
        if (line < 1 || column < 1) {
            throw new IllegalArgumentException("line and column are 1-based, but were " + line + ":" + column);
        }
        if (endLine < line) {
            throw new IllegalArgumentException("endLine " + endLine + " is before line " + line);
        }
        snippet = snippet == null ? "" : snippet.strip();
    }

    /** A place on one line. */
    public Location(String file, int line, int column, String snippet) {
        this(file, line, column, snippet, line);
    }

    @Override
    public String toString() {
        return file + ":" + line;
    }
}
