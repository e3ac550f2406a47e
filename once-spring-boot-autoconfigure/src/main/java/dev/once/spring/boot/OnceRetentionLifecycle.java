package dev.once.spring.boot;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import org.springframework.context.SmartLifecycle;

/**
 * Runs the inbox, outbox and stream position pruners on one daemon thread, every {@code once.retention.interval}.
 * Thread-safe.
 */
public final class OnceRetentionLifecycle implements SmartLifecycle {

    /** How a pruner is put on a schedule ({@code InboxPruner::schedule}, {@code OutboxPruner::schedule}). */
    @FunctionalInterface
    public interface Schedulable {
        ScheduledFuture<?> schedule(ScheduledExecutorService executor, Duration interval);
    }

    private final List<Schedulable> pruners;
    private final Duration interval;
    private ScheduledExecutorService executor;
    private final List<ScheduledFuture<?>> scheduled = new ArrayList<>();

    OnceRetentionLifecycle(List<Schedulable> pruners, Duration interval) {
        this.pruners = List.copyOf(pruners);
        this.interval = interval;
    }

    @Override
    public synchronized void start() {
        if (executor != null) {
            return;
        }
        executor = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "once-pruner");
            t.setDaemon(true);
            return t;
        });
        for (Schedulable p : pruners) {
            scheduled.add(p.schedule(executor, interval));
        }
    }

    @Override
    public synchronized void stop() {
        if (executor == null) {
            return;
        }
        scheduled.forEach(f -> f.cancel(false));
        scheduled.clear();
        executor.shutdown();
        executor = null;
    }

    @Override
    public synchronized boolean isRunning() {
        return executor != null;
    }
}
