package dev.once.testsupport;

import java.util.concurrent.Executor;

/**
 * The executor for a test's concurrent tasks: each task on a thread of its own, so tasks that wait
 * for each other (a barrier, a held lock, a latch) all run at once on any machine. The default of
 * {@code CompletableFuture.supplyAsync(task)} is not that: it runs on the common pool, which has one
 * worker fewer than the machine has cores, and starts a thread per task only where that is one
 * worker or none; four tasks meeting at a barrier passed on two cores and timed out on four.
 */
public final class OwnThreads implements Executor {

    private static final OwnThreads INSTANCE = new OwnThreads();

    private OwnThreads() {}

    /** The executor; pass it as the second argument of {@code supplyAsync} / {@code runAsync}. */
    public static Executor each() {
        return INSTANCE;
    }

    /** Runs {@code task} on a new daemon thread (a stuck task never holds up the test JVM's exit). */
    @Override
    public void execute(Runnable task) {
        Thread t = new Thread(task, "test-task");
        t.setDaemon(true);
        t.start();
    }
}
