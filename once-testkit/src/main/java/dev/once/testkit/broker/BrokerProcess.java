package dev.once.testkit.broker;

import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One process of a broker adapter's state machine ({@link BrokerWorld}): its client, engine and
 * consumer, which the world's supervisor replaces once it is {@link #dead}. The crash in the ack gap:
 * {@link #armCrash} arms it, and the adapter's hook at the process's next commit asks {@link
 * #crashesNow} and, when it answers true, kills the process there, before it acknowledges.
 *
 * <p>Thread-safety: {@link #armCrash}, {@link #crashesNow} and {@link #crashed} from any thread;
 * {@link #close} from the chain's thread.
 */
public abstract class BrokerProcess {

    /** {@code a<k>} or {@code b<k>}: the role and the world's count of processes started. */
    public final String name;

    private final AtomicBoolean crashArmed = new AtomicBoolean();
    private volatile boolean crashed;
    private boolean closed;

    protected BrokerProcess(String name) {
        this.name = name;
    }

    /** The process dies at its next commit, before it acknowledges what it committed. */
    public final void armCrash() {
        crashArmed.set(true);
    }

    /** Whether the armed crash strikes now (true once per arming): the caller kills the process. */
    public final boolean crashesNow() {
        if (crashArmed.compareAndSet(true, false)) {
            crashed = true;
            return true;
        }
        return false;
    }

    /** Whether the armed crash struck: the process is dead, whatever its threads still do. */
    public final boolean crashed() {
        return crashed;
    }

    /** Whether it died (the armed crash) or its consumer stopped on its own: the supervisor replaces it. */
    public final boolean dead() {
        return crashed || !running();
    }

    /** Whether its consumer runs. */
    protected abstract boolean running();

    /** Why its consumer stopped, when it stopped on its own (the supervisor's entry in the move log). */
    public Optional<Throwable> failure() {
        return Optional.empty();
    }

    /** Stops it and lets go of its client; once, later calls do nothing. */
    public final void close() {
        if (closed) {
            return;
        }
        closed = true;
        stop();
    }

    /** Stops its consumer and lets go of its client. */
    protected abstract void stop();
}
