package dev.once.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What a {@link Suite} gets: the PostgreSQL of this run, the measurement settings, and the
 * report it writes into. Result lines go to stdout at once, so a run can be followed and grepped.
 */
final class Run {

    /**
     * Measurement settings shared by every suite of a run: each configuration warms up, then runs
     * {@code measured} in total, in turns of {@code slice} interleaved with the configurations it
     * is compared with. {@code fingerprint} adds configurations of {@code once} that keep payload
     * fingerprints ({@code onMismatch(COUNT)}) to the core suite, next to the ones they cost against.
     * {@code quick} shrinks what each suite sizes by itself (correctness rounds, Kafka events,
     * retention rows) so a whole run fits in minutes: for checking a change, never the figures of record.
     * {@code publishers}, when not empty, limits the relay suite to those publishers' rows.
     */
    record Settings(
            Duration warmup,
            Duration measured,
            Duration slice,
            boolean fingerprint,
            boolean quick,
            List<String> publishers) {
        Settings(Duration warmup, Duration measured, Duration slice, boolean fingerprint) {
            this(warmup, measured, slice, fingerprint, false, List.of());
        }

        Settings {
            publishers = List.copyOf(publishers);
            if (warmup.isNegative() || measured.toMillis() < 1 || slice.toMillis() < 1) {
                throw new IllegalArgumentException("warm-up must be >= 0 and measured time and slice >= 1 ms, but were "
                        + warmup + ", " + measured + ", " + slice);
            }
        }
    }

    private final BenchPostgres postgres;
    private final Settings settings;
    private final List<String> lines = new ArrayList<>();
    private final Map<String, String> sections = new LinkedHashMap<>();

    Run(BenchPostgres postgres, Settings settings) {
        this.postgres = postgres;
        this.settings = settings;
    }

    BenchPostgres postgres() {
        return postgres;
    }

    Settings settings() {
        return settings;
    }

    /** Prints a result line ({@code BENCH …}, {@code CORRECTNESS …}) and keeps it for the report. */
    synchronized void line(String line) {
        System.out.println(line);
        System.out.flush();
        lines.add(line);
    }

    /** Progress for whoever watches the run; not part of the report. */
    static void progress(String message) {
        System.err.println("[once-bench] " + message);
    }

    synchronized void section(String title, String markdown) {
        sections.put(title, markdown);
    }

    synchronized List<String> lines() {
        return List.copyOf(lines);
    }

    synchronized Map<String, String> sections() {
        return new LinkedHashMap<>(sections);
    }

    static String bench(String name, String mode, int conns, Integer batch, double eventsPerSecond) {
        return "BENCH name=" + name + " mode=" + mode + " conns=" + conns + (batch == null ? "" : " batch=" + batch)
                + " events_per_s=" + Math.round(eventsPerSecond);
    }
}
