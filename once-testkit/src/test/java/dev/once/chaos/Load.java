package dev.once.chaos;

import dev.once.Delivery;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;

/**
 * Worker threads draining a {@link Broker} through a consumer (acknowledge when it returns true,
 * redeliver otherwise), and the acknowledgement rate sampled every 50 ms, so a test can say how
 * long after a fault the throughput came back.
 */
final class Load implements AutoCloseable {

    private record Sample(long nanos, long acks) {}

    private final Broker broker;
    private final List<Thread> workers = new ArrayList<>();
    private final Deque<Sample> samples = new ConcurrentLinkedDeque<>();
    private final ScheduledExecutorService sampler = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "load-sampler");
        t.setDaemon(true);
        return t;
    });
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private volatile boolean stop;

    Load(Broker broker, int threads, Predicate<Delivery> consumer) {
        this.broker = broker;
        sampler.scheduleAtFixedRate(
                () -> {
                    samples.addLast(new Sample(System.nanoTime(), broker.acks()));
                    while (samples.size() > 2_000) {
                        samples.pollFirst();
                    }
                },
                0,
                50,
                TimeUnit.MILLISECONDS);
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(
                    () -> {
                        try {
                            while (!stop) {
                                Delivery d = broker.poll(50);
                                if (d == null) {
                                    continue;
                                }
                                if (consumer.test(d)) {
                                    broker.ack(d);
                                } else {
                                    broker.redeliver(d);
                                }
                            }
                        } catch (Throwable e) {
                            failure.compareAndSet(null, e);
                        }
                    },
                    "load-worker-" + i);
            t.setDaemon(true);
            t.start();
            workers.add(t);
        }
    }

    /** Acknowledgements per second over the last {@code window}, from the samples. */
    double rate(Duration window) {
        Sample last = samples.peekLast();
        if (last == null) {
            return 0;
        }
        Sample from = null;
        for (var it = samples.descendingIterator(); it.hasNext(); ) {
            Sample s = it.next();
            from = s;
            if (last.nanos() - s.nanos() >= window.toNanos()) {
                break;
            }
        }
        long nanos = last.nanos() - from.nanos();
        return nanos == 0 ? 0 : (last.acks() - from.acks()) * 1e9 / nanos;
    }

    /**
     * The start of the first {@code window} after {@code afterNanos} whose rate was at least
     * {@code rate} per second, in {@link System#nanoTime()} terms; -1 while there is none yet.
     */
    long recoveredAt(long afterNanos, double rate, Duration window) {
        List<Sample> after =
                samples.stream().filter(s -> s.nanos() >= afterNanos).toList();
        for (int i = 0, j = 0; i < after.size(); i++) {
            while (j < after.size() && after.get(j).nanos() - after.get(i).nanos() < window.toNanos()) {
                j++;
            }
            if (j == after.size()) {
                return -1;
            }
            Sample a = after.get(i);
            Sample b = after.get(j);
            if ((b.acks() - a.acks()) * 1e9 / (b.nanos() - a.nanos()) >= rate) {
                return a.nanos();
            }
        }
        return -1;
    }

    /** A worker's unexpected exception, rethrown. */
    void check() {
        Throwable t = failure.get();
        if (t != null) {
            throw new AssertionError("a load worker failed: " + t, t);
        }
    }

    @Override
    public void close() throws InterruptedException {
        stop = true;
        for (Thread t : workers) {
            t.join(30_000);
        }
        sampler.shutdownNow();
    }

    Broker broker() {
        return broker;
    }
}
