package dev.once.chaos;

import java.time.Duration;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * A counter of acknowledgements sampled every 50 ms, so a test can say how fast events went
 * before a fault and how long after its end the rate came back.
 */
final class Throughput implements AutoCloseable {

    private record Sample(long nanos, long acks) {}

    private final Deque<Sample> samples = new ConcurrentLinkedDeque<>();
    private final ScheduledExecutorService sampler = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "throughput-sampler");
        t.setDaemon(true);
        return t;
    });

    Throughput(LongSupplier acks) {
        sampler.scheduleAtFixedRate(
                () -> {
                    samples.addLast(new Sample(System.nanoTime(), acks.getAsLong()));
                    while (samples.size() > 2_000) {
                        samples.pollFirst();
                    }
                },
                0,
                50,
                TimeUnit.MILLISECONDS);
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

    @Override
    public void close() {
        sampler.shutdownNow();
    }
}
