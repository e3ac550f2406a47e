package dev.once.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.kafka.KafkaLedger.Event;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A poll loop that dies of an unexpected failure while its worker runs a batch: the loop waited for
 * the batch only as long as the consumer's close revoked the partitions ({@code revokeTimeout}), then
 * reported itself stopped, so a close returned (and the group gave the partitions to their next owner)
 * while the worker still applied the batch and committed its claims, overlapping the successor. The
 * failure here is thrown on the poll thread by the ack-gap hook ({@code afterDatabaseCommit}) when
 * the loop commits the offset of batch [a] right after handing batch [b] to the worker, whose handler
 * is held past the revoke timeout. Now the loop waits up to the close timeout, as a close does, for
 * its worker's batch before the consumer leaves the group and the loop reports stopped.
 */
class CloseAfterLoopFailureTest {

    /** How long b's handler is held after the loop failed, unless the close returns first (red). */
    private static final Duration HELD = Duration.ofSeconds(3);

    @Test
    void closeAfterTheLoopFailedReturnsOnlyOnceTheWorkersBatchSettled() throws Exception {
        TestKafka kafka = TestKafka.shared();
        String topic = kafka.createTopic("loopfail", 1);
        CountDownLatch aEntered = new CountDownLatch(1);
        CountDownLatch releaseA = new CountDownLatch(1);
        CountDownLatch bEntered = new CountDownLatch(1);
        CountDownLatch hookThrew = new CountDownLatch(1);
        CountDownLatch closeReturned = new CountDownLatch(1);
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        try (TestDatabase db = KafkaLedger.database()) {
            KafkaLedger.publish(kafka.bootstrapServers(), topic, List.of(new Event("a", 1, 0)));
            KafkaConsumerRunner runner = KafkaConsumerRunner.builder()
                    .kafkaProperties(KafkaLedger.consumerProperties(kafka, "loopfail-" + topic))
                    .topics(topic)
                    .dataSource(db.dataSource())
                    .consumer("ledger")
                    .meterRegistry(meters)
                    // The consumer's close revokes the partitions, and a revoke waits this long for the batch;
                    // a close waits up to the close timeout, and so must a loop that died.
                    .revokeTimeout(Duration.ofMillis(200))
                    .closeTimeout(Duration.ofSeconds(30))
                    .afterDatabaseCommit(offsets -> {
                        // a's offset, sent right after b went to the worker: the loop dies here.
                        if (!offsets.isEmpty() && hookThrew.getCount() > 0) {
                            hookThrew.countDown();
                            throw new IllegalStateException("injected failure on the poll thread");
                        }
                    })
                    .handler((d, tx) -> {
                        if (d.eventId().equals("a")) {
                            aEntered.countDown();
                            assertThat(releaseA.await(60, TimeUnit.SECONDS)).isTrue();
                        } else {
                            bEntered.countDown();
                            holdUntilCloseReturns(closeReturned);
                        }
                        KafkaLedger.CREDIT.handle(d, tx);
                    })
                    .build()
                    .start();
            try {
                assertThat(aEntered.await(60, TimeUnit.SECONDS)).isTrue();
                // b is fetched while a runs, so it is the batch the loop starts as soon as a ends.
                KafkaLedger.publish(kafka.bootstrapServers(), topic, List.of(new Event("b", 1, 0)));
                await().atMost(Duration.ofSeconds(60))
                        .until(() -> meters.get("once.kafka.records.polled")
                                        .counter()
                                        .count()
                                >= 2);
                releaseA.countDown();
                assertThat(bEntered.await(60, TimeUnit.SECONDS)).isTrue();
                assertThat(hookThrew.await(60, TimeUnit.SECONDS)).isTrue();
            } finally {
                runner.close();
            }
            // Read before b's handler is let go: what b's batch committed by the time close returned.
            long appliedAtClose = KafkaLedger.appliedRows(db);
            closeReturned.countDown();
            assertThat(appliedAtClose)
                    .as("b's batch settled (its effect committed) before close returned")
                    .isEqualTo(2);
            assertThat(runner.failure())
                    .get()
                    .extracting(Throwable::getMessage)
                    .isEqualTo("injected failure on the poll thread");
        }
    }

    /**
     * Holds b's handler for {@link #HELD}, or until the close returns: a close that returns first has
     * reported the loop stopped with this batch still running. Interrupts (the worker's shutdown) do not
     * end the hold: a handler may well ignore them.
     */
    private static void holdUntilCloseReturns(CountDownLatch closeReturned) {
        boolean interrupted = false;
        long end = System.nanoTime() + HELD.toNanos();
        while (true) {
            try {
                closeReturned.await(end - System.nanoTime(), TimeUnit.NANOSECONDS);
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
