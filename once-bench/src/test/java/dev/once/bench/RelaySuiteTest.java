package dev.once.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class RelaySuiteTest {

    /** The bound loops and relays measure threads working side by side: none may wait for another to end. */
    @Test
    void runAllRunsEveryTaskAtOnce() throws Exception {
        int n = 4;
        CountDownLatch started = new CountDownLatch(n);
        Callable<Void> task = () -> {
            started.countDown();
            if (!started.await(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("the tasks did not all run at once");
            }
            return null;
        };
        RelaySuite.runAll(List.of(task, task, task, task));
        assertThat(started.getCount()).isZero();
    }

    /** A failed loop fails the run, but only once every thread has ended (their channels are closed after it). */
    @Test
    void runAllThrowsTheFirstFailureInListOrderOnceAllEnded() {
        CountDownLatch lastRan = new CountDownLatch(1);
        AtomicInteger ended = new AtomicInteger();
        List<Callable<Void>> tasks = List.of(
                () -> {
                    try {
                        lastRan.await(30, TimeUnit.SECONDS);
                        throw new IOException("first in the list");
                    } finally {
                        ended.incrementAndGet();
                    }
                },
                () -> {
                    ended.incrementAndGet();
                    throw new IllegalStateException("first to fail");
                },
                () -> {
                    ended.incrementAndGet();
                    lastRan.countDown();
                    return null;
                });
        assertThatThrownBy(() -> RelaySuite.runAll(tasks))
                .isInstanceOf(IOException.class)
                .hasMessage("first in the list");
        assertThat(ended).hasValue(3);
    }
}
