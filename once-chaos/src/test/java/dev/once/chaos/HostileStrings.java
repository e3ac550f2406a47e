package dev.once.chaos;

import java.text.Normalizer;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.Set;

/**
 * Generated hostile identifiers (S3): SQL metacharacters and injection attempts, quotes, NUL and
 * other control characters, terminal escapes, right-to-left and zero-width marks, lone UTF-16
 * surrogates, combining sequences, lengths at and past the limits, 10 kB strings — and near
 * twins of each (a trailing space, another case, a different lone surrogate, the decomposed
 * form), because a store that folds two distinct ids into one loses an event.
 */
final class HostileStrings {

    private static final String[] FRAGMENTS = {
        "'",
        "''",
        "\"",
        "`",
        "\\",
        ";",
        "--",
        "/*",
        "*/",
        "%",
        "_",
        "$1",
        "?",
        ":name",
        "${prefix}",
        "' OR '1'='1",
        "'); DROP TABLE once_inbox; --",
        "\" OR \"\"=\"",
        "\0",
        "\n",
        "\r\n",
        "\t",
        "\u001b[31m",
        "\u0007",
        "\u202E",
        "\u200F",
        "\u200B",
        "\uFEFF",
        "\u00A0",
        "\u00e9",
        "e\u0301",
        "\uD83D\uDE00",
        "\uD800",
        "\uDFFF",
        "\u0130",
        "\u00DF",
        "\uFF21\uFF22",
        " ",
        "A",
        "a",
        "z",
        "0",
        "<script>",
        "&amp;",
        "{\"a\":1}",
        "%s%n",
        "\u0000\u0000",
    };

    private HostileStrings() {}

    /** {@code count} distinct strings, reproducible from {@code seed}. */
    static List<String> generate(int count, long seed) {
        Random random = new Random(seed);
        Set<String> out = new LinkedHashSet<>();
        int i = 0;
        while (out.size() < count) {
            String base = base(random, i++);
            out.add(base);
            for (String twin : twins(base)) {
                if (out.size() < count) {
                    out.add(twin);
                }
            }
        }
        return new ArrayList<>(out);
    }

    private static String base(Random random, int i) {
        int kind = random.nextInt(100);
        if (kind < 4) {
            return "x".repeat(255 + random.nextInt(2)); // at and one past the 255 limit
        }
        if (kind < 7) {
            return fragments(random, 2) + "y".repeat(10_000); // 10 kB
        }
        if (kind < 10) {
            return FRAGMENTS[random.nextInt(FRAGMENTS.length)]; // a fragment alone (blank, NUL, quote…)
        }
        return fragments(random, 1 + random.nextInt(4)) + "-" + i; // unique, hostile around it
    }

    private static String fragments(Random random, int n) {
        StringBuilder b = new StringBuilder();
        for (int k = 0; k < n; k++) {
            b.append(FRAGMENTS[random.nextInt(FRAGMENTS.length)]);
        }
        return b.toString();
    }

    private static List<String> twins(String base) {
        if (base.length() > 300) {
            return List.of();
        }
        return List.of(
                base + " ",
                base.toUpperCase(Locale.ROOT),
                base + "\uD800",
                base + "\uDBFF",
                Normalizer.normalize(base + "\u00e9", Normalizer.Form.NFD));
    }

    /** A printable form for reports: Java escapes for everything outside printable ASCII, cut at 60 characters. */
    static String show(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length() && b.length() < 60; i++) {
            char c = s.charAt(i);
            if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
                b.append(c);
            } else {
                b.append(String.format("\\u%04x", (int) c));
            }
        }
        return b.append(s.length() > 60 ? "…(" + s.length() + " chars)" : "")
                .append('"')
                .toString();
    }
}
