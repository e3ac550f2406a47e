package dev.once.bench;

/**
 * One named part of the benchmark run ({@code core}, {@code peers}, {@code kafka}). A suite
 * prints its result lines through {@link Run#line} as it goes and adds one section to
 * BENCHMARKS.md through {@link Run#section}.
 */
interface Suite {

    /** The name given on the command line. */
    String name();

    void run(Run run) throws Exception;
}
