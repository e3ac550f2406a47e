package dev.once.chaos;

import static org.awaitility.Awaitility.await;

import dev.once.Delivery;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;

/**
 * Worker threads draining a {@link Broker} through a consumer (acknowledge when it returns true,
 * redeliver otherwise), with the acknowledgement rate sampled ({@link Throughput}), so a test can
 * say how long after a fault the throughput came back.
 */
final class Load implements AutoCloseable {

    private final Broker broker;
    private final List<Thread> workers = new ArrayList<>();
    private final Throughput throughput;
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private volatile boolean stop;

    Load(Broker broker, int threads, Predicate<Delivery> consumer) {
        this.broker = broker;
        this.throughput = new Throughput(broker::acks);
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

    /** Acknowledgements per second over the last {@code window}. */
    double rate(Duration window) {
        return throughput.rate(window);
    }

    Throughput throughput() {
        return throughput;
    }

    /** See {@link Throughput#recoveredAt}. */
    long recoveredAt(long afterNanos, double rate, Duration window) {
        return throughput.recoveredAt(afterNanos, rate, window);
    }

    /**
     * Waits until every published delivery was acknowledged. Fails at once, with its exception,
     * when a worker died: the delivery it held is then neither acknowledged nor redelivered, so the
     * broker can never drain, and the wait would end in a timeout that does not say why.
     */
    void awaitDrained(String what, Duration atMost) {
        await(what).atMost(atMost).failFast("a load worker died", this::check).until(broker::drained);
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
        throughput.close();
    }

    Broker broker() {
        return broker;
    }
}
