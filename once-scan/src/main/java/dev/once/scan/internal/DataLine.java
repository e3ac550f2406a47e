package dev.once.scan.internal;

import java.util.ArrayList;
import java.util.List;

/**
 * One line of a data file kept as text (the effect and entry catalogues, the corpus labels): its number in the file
 * (for errors that name it) and its text, stripped.
 */
public record DataLine(int number, String text) {

    /** The lines that hold data: numbered from 1, stripped, blank lines and {@code #} comments left out. */
    public static List<DataLine> of(List<String> lines) {
        List<DataLine> out = new ArrayList<>();
        int n = 0;
        for (String raw : lines) {
            n++;
            String line = raw.strip();
            if (!line.isEmpty() && !line.startsWith("#")) {
                out.add(new DataLine(n, line));
            }
        }
        return out;
    }

    /** The line's columns split by {@code ' | '}, stripped: exactly as many as {@code names} names, or an error. */
    String[] columns(String source, String... names) {
        String[] c = text.split(" \\| ", -1);
        if (c.length != names.length) {
            throw new IllegalStateException(source + ":" + number + ": expected " + names.length
                    + " columns split by ' | ' (" + String.join(" | ", names) + "), got " + c.length + ": " + text);
        }
        for (int i = 0; i < c.length; i++) {
            c[i] = c[i].strip();
        }
        return c;
    }
}
