package dev.once.core;

/** Runs a step of a jqwik action chain whose code throws checked exceptions, so a failure fails the chain as it is. */
final class Unchecked {

    /** A step that may throw. */
    interface Call {
        void run() throws Exception;
    }

    private Unchecked() {}

    static void call(Call c) {
        try {
            c.run();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
