package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.StaleFencingTokenException;
import dev.once.lease.Fence;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class LeaseFencingTest {

    private static final Duration TTL = Duration.ofSeconds(10);

    private TestDatabase db;
    private MutableClock clock;
    private Leases leases;

    @BeforeEach
    void setUp() {
        db = TestPostgres.shared().freshDatabase();
        db.execute("CREATE TABLE ledger_write (id bigserial PRIMARY KEY, round int NOT NULL, writer text NOT NULL,"
                + " token bigint NOT NULL)");
        clock = MutableClock.startingNow();
        leases = Leases.builder().dataSource(db.dataSource()).clock(clock).build();
    }

    @AfterEach
    void tearDown() {
        db.close();
    }

    @Test
    void everyAcquisitionIncrementsTheTokenAndAHeldLeaseIsRefused() {
        Lease first = leases.acquire("settlement", "a", TTL).orElseThrow();
        assertThat(first.token()).isEqualTo(1);
        assertThat(leases.acquire("settlement", "b", TTL))
                .as("held and unexpired: refused")
                .isEmpty();

        Lease renewed = leases.renew(first, TTL.multipliedBy(2)).orElseThrow();
        assertThat(renewed.token()).isEqualTo(1);
        assertThat(renewed.expiresAt()).isEqualTo(clock.instant().plus(TTL.multipliedBy(2)));

        assertThat(leases.release(renewed)).isTrue();
        Lease second = leases.acquire("settlement", "b", TTL).orElseThrow();
        assertThat(second.token()).as("released then acquired: next token").isEqualTo(2);

        clock.advance(TTL.plusMillis(1));
        Lease third = leases.acquire("settlement", "c", TTL).orElseThrow();
        assertThat(third.token()).as("expired then acquired: next token").isEqualTo(3);
        assertThat(leases.renew(second, TTL)).as("taken over: renewal refused").isEmpty();
        assertThat(leases.release(second)).as("taken over: release refused").isFalse();
        assertThat(leases.acquire("other", "a", TTL).orElseThrow().token())
                .as("tokens are per name")
                .isEqualTo(1);
    }

    @Test
    void concurrentAcquisitionsOfAFreeLeaseHaveExactlyOneWinner() throws Exception {
        for (int round = 0; round < 20; round++) {
            String name = "race-" + round;
            int threads = 8;
            java.util.concurrent.CyclicBarrier barrier = new java.util.concurrent.CyclicBarrier(threads);
            java.util.concurrent.atomic.AtomicInteger winners = new java.util.concurrent.atomic.AtomicInteger();
            Thread[] ts = new Thread[threads];
            for (int i = 0; i < threads; i++) {
                String owner = "w" + i;
                ts[i] = new Thread(() -> {
                    try {
                        barrier.await();
                        if (leases.acquire(name, owner, TTL).isPresent()) {
                            winners.incrementAndGet();
                        }
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                });
                ts[i].start();
            }
            for (Thread t : ts) {
                t.join();
            }
            assertThat(winners)
                    .as("exactly one of %d concurrent acquirers wins %s", threads, name)
                    .hasValue(1);
        }
    }

    /**
     * The holder is paused (a thread parked on a latch) past its lease's expiry; a rival acquires the
     * lease and writes; the holder resumes and writes with its old token. 500 rounds, 0 stale
     * writes may be accepted, and every rival write must be.
     */
    @Test
    void aHolderPausedPastItsLeaseCannotWriteAfterARivalTookOver() throws Exception {
        int rounds = 500;
        int staleRejected = 0;
        for (int round = 1; round <= rounds; round++) {
            Lease holder = leases.acquire("ledger", "holder", TTL)
                    .orElseThrow(() -> new AssertionError("the holder must get the lease at the start of each round"));
            CountDownLatch resume = new CountDownLatch(1);
            AtomicReference<Throwable> holderOutcome = new AtomicReference<>();
            int r = round;
            Thread paused = new Thread(() -> {
                try {
                    resume.await(); // the pause: GC, SIGSTOP, a slow dependency
                    write(r, "holder", holder.token());
                } catch (Throwable t) {
                    holderOutcome.set(t);
                }
            });
            paused.start();

            clock.advance(TTL.plusMillis(1));
            Lease rival = leases.acquire("ledger", "rival", TTL)
                    .orElseThrow(() -> new AssertionError("the rival must get the expired lease"));
            assertThat(rival.token()).isGreaterThan(holder.token());
            write(round, "rival", rival.token());

            resume.countDown();
            paused.join(TimeUnit.SECONDS.toMillis(30));
            if (holderOutcome.get() instanceof StaleFencingTokenException e) {
                assertThat(e.newest()).isEqualTo(rival.token());
                staleRejected++;
            } else if (holderOutcome.get() != null) {
                throw new AssertionError("unexpected failure of the stale write", holderOutcome.get());
            }
            assertThat(leases.release(rival)).isTrue();
        }
        assertThat(db.queryLong("SELECT count(*) FROM ledger_write WHERE writer = 'holder'"))
                .as("stale writes accepted")
                .isZero();
        assertThat(staleRejected)
                .as("stale writes rejected with StaleFencingTokenException")
                .isEqualTo(rounds);
        assertThat(db.queryLong("SELECT count(*) FROM ledger_write WHERE writer = 'rival'"))
                .as("current holder's writes accepted")
                .isEqualTo(rounds);
    }

    @Test
    void aHolderThatWritesBeforeTheTakeoverIsAcceptedAndEqualTokensPass() throws Exception {
        Lease holder = leases.acquire("ledger", "holder", TTL).orElseThrow();
        write(1, "holder", holder.token());
        write(2, "holder", holder.token());
        assertThat(db.queryLong("SELECT count(*) FROM ledger_write")).isEqualTo(2);
        assertThatThrownBy(() -> write(3, "older", holder.token() - 1)).isInstanceOf(StaleFencingTokenException.class);
        assertThat(db.queryLong("SELECT count(*) FROM ledger_write"))
                .as("rejected write rolled back")
                .isEqualTo(2);
    }

    private void write(int round, String writer, long token) throws SQLException {
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try {
                Fence.check(c, "ledger", token);
                try (PreparedStatement ps =
                        c.prepareStatement("INSERT INTO ledger_write (round, writer, token) VALUES (?, ?, ?)")) {
                    ps.setInt(1, round);
                    ps.setString(2, writer);
                    ps.setLong(3, token);
                    ps.executeUpdate();
                }
                c.commit();
            } catch (SQLException | RuntimeException e) {
                c.rollback();
                throw e;
            } finally {
                c.setAutoCommit(true);
            }
        }
    }
}
