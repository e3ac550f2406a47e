package dev.once.cli.internal;

import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine;

/**
 * Parses durations written as a whole number and a unit ({@code 7d}, {@code 12h}, {@code 30m},
 * {@code 45s}) or ISO-8601 ({@code P7D}, {@code PT12H}). Used as a picocli converter, so a bad
 * value is a usage error that names the value and the expected form.
 */
public final class Durations implements CommandLine.ITypeConverter<Duration> {

    /** The accepted forms, quoted in error messages and help. */
    public static final String EXPECTED = "a positive whole number followed by d, h, m or s (7d, 12h, 30m, 45s), "
            + "or an ISO-8601 duration (P7D, PT12H)";

    private static final Pattern SHORT = Pattern.compile("(\\d{1,9})\\s*([dhms])");

    @Override
    public Duration convert(String value) {
        return parse(value);
    }

    /** @throws CommandLine.TypeConversionException naming the value and {@link #EXPECTED} */
    public static Duration parse(String value) {
        String v = value == null ? "" : value.strip().toLowerCase(Locale.ROOT);
        Duration d = null;
        Matcher m = SHORT.matcher(v);
        if (m.matches()) {
            long n = Long.parseLong(m.group(1));
            d = switch (m.group(2)) {
                case "d" -> Duration.ofDays(n);
                case "h" -> Duration.ofHours(n);
                case "m" -> Duration.ofMinutes(n);
                default -> Duration.ofSeconds(n);
            };
        } else if (v.startsWith("p")) {
            try {
                d = Duration.parse(v.toUpperCase(Locale.ROOT));
            } catch (DateTimeParseException e) {
                d = null;
            }
        }
        if (d == null || d.isZero() || d.isNegative()) {
            throw new CommandLine.TypeConversionException("'" + value + "' is not a duration: expected " + EXPECTED);
        }
        return d;
    }

    /** Writes a duration the way a person reads it: {@code 7d}, {@code 36h}, {@code 90s}. */
    public static String format(Duration d) {
        long s = d.getSeconds();
        if (s % 86_400 == 0) {
            return s / 86_400 + "d";
        }
        if (s % 3_600 == 0) {
            return s / 3_600 + "h";
        }
        if (s % 60 == 0) {
            return s / 60 + "m";
        }
        return s + "s";
    }
}
