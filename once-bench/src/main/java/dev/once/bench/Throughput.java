package dev.once.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

/**
 * Measures several configurations against each other, interleaved: every configuration's
 * workers start and warm up, then the configurations take turns in short slices, one at a time,
 * until each has run its measured time. On a shared machine whose disk and CPU load drift by
 * the minute, interleaving makes every configuration see the same conditions, so their ratios
 * hold even when the absolute figures move.
 */
final class Throughput {

    /** Events per worker are spread over this many accounts of the worker's own, as partitions would. */
    static final int ACCOUNTS_PER_WORKER = 100;

    /** One unit of work of one worker thread: processes some events and says how many. */
    @FunctionalInterface
    interface Step {
        int run() throws Exception;
    }

    /** Creates worker {@code index}'s step; a step that is {@link AutoCloseable} is closed at the end. */
    @FunctionalInterface
    interface StepFactory {
        Step create(int index) throws Exception;
    }

    /** One configuration: how many worker threads run its steps. */
    record Config(String label, int workers, StepFactory steps) {
    }

    private Throughput() {
    }

    /** Worker {@code worker}'s events: unique ids, spread over its own accounts. */
    static final class Events {
        private final String prefix;
        private final int worker;
        private long seq;

        Events(String prefix, int worker) {
            this.prefix = prefix + "-" + worker + "-";
            this.worker = worker;
        }

        Event next() {
            long n = seq++;
            return new Event(prefix + n, (long) worker * ACCOUNTS_PER_WORKER + n % ACCOUNTS_PER_WORKER, 1 + n % 7);
        }
    }

    /** Events per second of each configuration, in the order given. */
    static double[] measure(List<Config> configs, Duration warmup, Duration measured, Duration slice)
            throws Exception {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Gate> gates = new ArrayList<>();
        try {
            for (Config config : configs) {
                gates.add(new Gate(config, failure));
            }
            for (Gate g : gates) {
                g.runFor(warmup, false);
            }
            int slices = (int) Math.max(1, Math.ceil((double) measured.toNanos() / slice.toNanos()));
            for (int s = 0; s < slices; s++) {
                for (int k = 0; k < gates.size(); k++) {
                    // Rotate who goes first, so no configuration always follows the same one.
                    gates.get((s + k) % gates.size()).runFor(slice, true);
                    if (failure.get() != null) {
                        throw new IllegalStateException("a worker failed: " + failure.get(), failure.get());
                    }
                }
            }
        } finally {
            for (Gate g : gates) {
                g.stop();
            }
        }
        if (failure.get() != null) {
            throw new IllegalStateException("a worker failed: " + failure.get(), failure.get());
        }
        double[] rates = new double[gates.size()];
        for (int i = 0; i < rates.length; i++) {
            rates[i] = gates.get(i).rate();
        }
        return rates;
    }

    /** The workers of one configuration and the gate that lets them run only during its turns. */
    private static final class Gate {
        private final List<Thread> threads = new ArrayList<>();
        private final List<Throughput.Step> steps = new ArrayList<>();
        private final AtomicInteger busy = new AtomicInteger();
        private final LongAdder events = new LongAdder();
        private volatile boolean open;
        private volatile boolean counting;
        private volatile boolean stopped;
        private long nanos;

        Gate(Config config, AtomicReference<Throwable> failure) throws Exception {
            for (int i = 0; i < config.workers(); i++) {
                steps.add(config.steps().create(i));
            }
            for (int i = 0; i < config.workers(); i++) {
                Step step = steps.get(i);
                Thread t = new Thread(() -> loop(step, failure), "bench-" + config.label() + "-" + i);
                t.setDaemon(true);
                threads.add(t);
                t.start();
            }
        }

        private void loop(Step step, AtomicReference<Throwable> failure) {
            try {
                while (!stopped) {
                    // Announce first, then look: the coordinator closes, then waits for busy == 0, so a
                    // step never runs into another configuration's turn.
                    busy.incrementAndGet();
                    if (!open) {
                        busy.decrementAndGet();
                        synchronized (this) {
                            while (!open && !stopped) {
                                wait();
                            }
                        }
                        continue;
                    }
                    int n = step.run();
                    if (counting) {
                        events.add(n);
                    }
                    busy.decrementAndGet();
                }
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
                busy.set(0);
            }
        }

        void runFor(Duration d, boolean count) throws InterruptedException {
            counting = count;
            long start = System.nanoTime();
            synchronized (this) {
                open = true;
                notifyAll();
            }
            Thread.sleep(d.toMillis());
            open = false;
            while (busy.get() > 0) {
                Thread.sleep(0, 200_000);
            }
            if (count) {
                nanos += System.nanoTime() - start;
            }
            counting = false;
        }

        double rate() {
            return events.sum() / (nanos / 1e9);
        }

        void stop() throws Exception {
            synchronized (this) {
                stopped = true;
                notifyAll();
            }
            for (Thread t : threads) {
                t.join();
            }
            for (Step s : steps) {
                if (s instanceof AutoCloseable c) {
                    c.close();
                }
            }
        }
    }
}
