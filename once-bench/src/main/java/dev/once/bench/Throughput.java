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
    record Config(String label, int workers, StepFactory steps) {}

    /**
     * A configuration's result: events/s over all its turns, and in each turn; and the CPU time
     * and heap bytes its worker threads spent per event while measured (the client's share of the
     * cost, which a loaded machine moves far less than the rate).
     */
    record Rate(double eventsPerSecond, double[] perSlice, double cpuMicrosPerEvent, double bytesPerEvent) {

        /**
         * The median over turns of this rate divided by {@code other}'s in the same round of turns:
         * adjacent in time, so a robust ratio when the machine's load moves.
         */
        double pairedRatio(Rate other) {
            double[] r = new double[Math.min(perSlice.length, other.perSlice.length)];
            for (int i = 0; i < r.length; i++) {
                r[i] = perSlice[i] / other.perSlice[i];
            }
            java.util.Arrays.sort(r);
            return r.length % 2 == 1 ? r[r.length / 2] : (r[r.length / 2 - 1] + r[r.length / 2]) / 2;
        }
    }

    private Throughput() {}

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

    /** The rate of each configuration, in the order given. */
    static List<Rate> measure(List<Config> configs, Duration warmup, Duration measured, Duration slice)
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
        List<Rate> rates = new ArrayList<>();
        for (Gate g : gates) {
            rates.add(g.rate());
        }
        return rates;
    }

    /** The workers of one configuration and the gate that lets them run only during its turns. */
    private static final class Gate {
        private static final com.sun.management.ThreadMXBean THREADS =
                (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        private final LongAdder cpuNanos = new LongAdder();
        private final LongAdder allocated = new LongAdder();
        private final List<Thread> threads = new ArrayList<>();
        private final List<Throughput.Step> steps = new ArrayList<>();
        private final AtomicInteger busy = new AtomicInteger();
        private final LongAdder events = new LongAdder();
        private volatile boolean open;
        private volatile boolean counting;
        private volatile boolean stopped;
        private final List<Double> perSlice = new ArrayList<>();
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
                    boolean measuring = counting;
                    long cpu = measuring ? THREADS.getCurrentThreadCpuTime() : 0;
                    long bytes = measuring ? THREADS.getCurrentThreadAllocatedBytes() : 0;
                    int n = step.run();
                    if (measuring && counting) {
                        cpuNanos.add(THREADS.getCurrentThreadCpuTime() - cpu);
                        allocated.add(THREADS.getCurrentThreadAllocatedBytes() - bytes);
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
            long before = events.sum();
            Thread.sleep(d.toMillis());
            open = false;
            while (busy.get() > 0) {
                Thread.sleep(0, 200_000);
            }
            if (count) {
                long elapsed = System.nanoTime() - start;
                nanos += elapsed;
                perSlice.add((events.sum() - before) / (elapsed / 1e9));
            }
            counting = false;
        }

        Rate rate() {
            long n = Math.max(1, events.sum());
            return new Rate(
                    events.sum() / (nanos / 1e9),
                    perSlice.stream().mapToDouble(Double::doubleValue).toArray(),
                    cpuNanos.sum() / 1e3 / n,
                    (double) allocated.sum() / n);
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
