package dev.once.cli.internal;

/**
 * An error the command reports in one line, without a stack trace, with its exit status. The
 * message names the bad value and what was expected.
 */
public final class Failure extends RuntimeException {

    private final int exitCode;

    public Failure(int exitCode, String message, Throwable cause) {
        super(message, cause);
        this.exitCode = exitCode;
    }

    public static Failure usage(String message) {
        return new Failure(ExitCodes.USAGE, message, null);
    }

    public static Failure failed(String message, Throwable cause) {
        return new Failure(ExitCodes.FAILURE, message, cause);
    }

    public int exitCode() {
        return exitCode;
    }
}
