package dev.once.cli.internal;

/** Exit statuses of the {@code once} command, quoted by its help and README. */
public final class ExitCodes {
    /** Success. */
    public static final int OK = 0;
    /** A check found a problem, e.g. {@code doctor} found duplicate business keys. */
    public static final int FINDINGS = 1;
    /** Bad arguments: unknown option, bad duration, bad dialect (picocli's own usage code). */
    public static final int USAGE = 2;
    /** The operation failed: database unreachable, SQL error. */
    public static final int FAILURE = 3;

    private ExitCodes() {}
}
