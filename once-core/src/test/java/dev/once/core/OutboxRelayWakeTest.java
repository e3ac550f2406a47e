package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.once.RetryPolicy;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Receipt;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;

/**
 * A started relay waits no longer than the earliest moment it knows work is due: its poll interval (an hour here), the
 * earliest retry of a pending row, or its backoff after a failed batch. Before, a row rescheduled for 200 ms later and
 * the rows of a batch whose connection died waited for the poll interval: nothing notifies when a retry falls due, and
 * the notifications drained for a failed batch are gone.
 */
class OutboxRelayWakeTest {

    private static final Duration HOUR = Duration.ofHours(1);
    private static final RetryPolicy FAST = RetryPolicy.builder()
            .initialDelay(Duration.ofMillis(200))
            .maxDelay(Duration.ofMillis(200))
            .jitter(RetryPolicy.Jitter.NONE)
            .maxRetries(5)
            .build();

    @Test
    void aRowWhoseSendFailedOnceIsSentAtItsRetryNotAtThePoll() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(5)) {
            retriedAtItsRetry(db, false);
        }
    }

    // The relay has found no row waiting and waits; a commit's NOTIFY wakes it, the send fails: that batch's retry is
    // what it waits for next, not what it knew before the commit (nothing).
    @Test
    void aRowCommittedWhileTheRelayWaitsAndWhoseSendFailsIsSentAtItsRetry() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(5)) {
            retriedAtItsRetry(db, true);
        }
    }

    // MariaDB has no LISTEN: its relay only polls, and a retry waited for the poll interval there too.
    @Test
    void aRowWhoseSendFailedOnceIsSentAtItsRetryNotAtThePollOnMariaDb() throws Exception {
        try (TestDatabase db = TestMariaDb.shared().freshDatabase(5)) {
            retriedAtItsRetry(db, false);
        }
    }

    /** @param idleFirst whether a row is sent first, so that the relay waits before the row that fails is committed */
    private static void retriedAtItsRetry(TestDatabase db, boolean idleFirst) throws Exception {
        List<String> sends = new CopyOnWriteArrayList<>();
        AtomicBoolean failed = new AtomicBoolean();
        try (OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .pollInterval(HOUR)
                .retryPolicy(FAST)
                .meterRegistry(new SimpleMeterRegistry())
                .publisher(m -> {
                    sends.add(m.eventId());
                    if (m.eventId().startsWith("test:retried") && failed.compareAndSet(false, true)) {
                        throw PublishFailure.retryable("down for a moment", Receipt.NONE, null);
                    }
                    return Receipt.NONE;
                })
                .build()) {
            if (idleFirst) {
                relay.start();
                OutboxRows.add(db.dataSource(), Clock.systemUTC(), "idle", "k", "0");
                await().atMost(Duration.ofSeconds(10))
                        .untilAsserted(() -> assertThat(sends).hasSize(1));
            }
            OutboxRows.add(db.dataSource(), Clock.systemUTC(), "retried", "k", "1");
            if (!idleFirst) {
                relay.start();
            }
            int rows = idleFirst ? 2 : 1;
            await().atMost(Duration.ofSeconds(10))
                    .untilAsserted(() -> assertThat(sends).hasSize(rows + 1));
            await().atMost(Duration.ofSeconds(10))
                    .until(() -> db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent'") == rows);
        }
        assertThat(sends).endsWith("test:retried#1", "test:retried#1");
    }

    @Test
    void theRowsOfABatchWhoseConnectionWasTerminatedAreSentWithoutWaitingForThePoll() throws Exception {
        try (TestDatabase db = TestPostgres.shared().freshDatabase(5)) {
            // The batch's backend: the one whose open transaction locked rows of the outbox.
            batchConnectionKilled(
                    db,
                    () -> db.queryLong("SELECT count(pg_terminate_backend(pid)) FROM (SELECT DISTINCT pid FROM pg_locks"
                            + " WHERE relation = 'once_outbox'::regclass AND mode = 'RowShareLock'"
                            + " AND pid <> pg_backend_pid()) b"));
        }
    }

    // The same wait on MariaDB, whose relay only polls: the batch was tried again after the poll interval.
    @Test
    void theRowsOfABatchWhoseConnectionWasKilledAreSentWithoutWaitingForThePollOnMariaDb() throws Exception {
        try (TestDatabase db = TestMariaDb.shared().freshDatabase(5)) {
            // The batch's connection: the one with an open InnoDB transaction in this database (other tests' are in
            // theirs).
            batchConnectionKilled(db, () -> {
                long id = db.queryLong("SELECT t.trx_mysql_thread_id FROM information_schema.innodb_trx t"
                        + " JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id"
                        + " WHERE p.db = DATABASE() AND p.id <> CONNECTION_ID() LIMIT 1");
                db.execute("KILL CONNECTION " + id);
                return 1;
            });
        }
    }

    /** @param kill kills the connection of the batch in flight, returns how many it killed */
    private static void batchConnectionKilled(TestDatabase db, LongSupplier kill) throws Exception {
        List<String> sends = new CopyOnWriteArrayList<>();
        AtomicBoolean killed = new AtomicBoolean();
        AtomicLong terminated = new AtomicLong();
        try (OutboxRelay relay = OutboxRelay.builder()
                .dataSource(db.dataSource())
                .pollInterval(HOUR)
                .meterRegistry(new SimpleMeterRegistry())
                .publisher(m -> {
                    sends.add(m.eventId());
                    if (killed.compareAndSet(false, true)) {
                        terminated.set(kill.getAsLong());
                    }
                    return Receipt.NONE;
                })
                .build()) {
            OutboxRows.add(db.dataSource(), Clock.systemUTC(), "killed", "k", "1");
            relay.start();
            await().atMost(Duration.ofSeconds(10))
                    .untilAsserted(() -> assertThat(sends).hasSize(2));
            await().atMost(Duration.ofSeconds(10))
                    .until(() -> db.queryLong("SELECT count(*) FROM once_outbox WHERE status = 'sent'") == 1);
        }
        assertThat(terminated).hasValue(1);
        assertThat(sends).containsExactly("test:killed#1", "test:killed#1");
    }
}
