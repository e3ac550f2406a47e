package dev.once.spring.boot;

import dev.once.outbox.OutboxRelay;
import dev.once.outbox.OutboxStats;
import org.springframework.context.SmartLifecycle;

/**
 * The outbox relay as a {@code SmartLifecycle}: started with the application context, stopped with it
 * (graceful: {@code close()} waits for the batch in flight; a row it could not mark is sent again by the
 * next relay, with the same event id). Built when the bean is created, so a bad setting fails the start.
 * Thread-safe.
 */
public final class OnceRelayLifecycle implements SmartLifecycle {

    /**
     * A lower phase than the listener containers': started before and stopped after them, so the rows
     * the last listener calls commit are still sent (and a row left pending is sent by the next start).
     */
    public static final int PHASE = SmartLifecycle.DEFAULT_PHASE - 200;

    private final OutboxRelay.Builder builder;
    private volatile OutboxRelay relay;
    private volatile boolean running;

    OnceRelayLifecycle(OutboxRelay.Builder builder) {
        this.builder = builder;
        this.relay = builder.build();
    }

    /** The relay this lifecycle runs (a new one after a stop and a start). */
    public OutboxRelay relay() {
        return relay;
    }

    /** Pending rows, the age of the oldest and dead rows, read now. */
    public OutboxStats stats() {
        return relay.stats();
    }

    @Override
    public synchronized void start() {
        if (running) {
            return;
        }
        if (relay == null) {
            relay = builder.build();
        }
        relay.start();
        running = true;
    }

    @Override
    public synchronized void stop() {
        if (!running) {
            return;
        }
        running = false;
        relay.close(); // waits for the batch in flight; a row it could not mark is sent again later
        relay = null;
    }

    @Override
    public boolean isRunning() {
        return running;
    }

    @Override
    public int getPhase() {
        return PHASE;
    }
}
