package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.StaleFencingTokenException;
import dev.once.lease.Fence;
import dev.once.lease.Lease;
import dev.once.lease.Leases;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link Leases} and {@link Fence} with the one writer they protect, on a real database; one subclass
 * per database, each ~20 lines. Time is a {@link MutableClock} shared by every caller.
 */
abstract class LeaseScenarios {

    static final Duration TTL = Duration.ofSeconds(10);

    TestDatabase db;
    MutableClock clock;
    Leases leases;

    /** A new database with the once tables, its pool large enough for {@link #RACERS} connections. */
    abstract TestDatabase freshDatabase();

    /** The ledger the fenced writes go to: ledger_write (id, round int, writer, token bigint), in this dialect. */
    abstract String ledgerTable();

    static final int RACERS = 8;

    @BeforeEach
    void setUp() {
        db = freshDatabase();
        db.execute(ledgerTable());
        clock = MutableClock.startingNow();
        leases = Leases.builder().dataSource(db.dataSource()).clock(clock).build();
    }

    @AfterEach
    void tearDown() {
        if (db != null) { // null when setUp skipped the test: no MariaDB
            db.close();
        }
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
            int threads = RACERS;
            CyclicBarrier barrier = new CyclicBarrier(threads);
            AtomicInteger winners = new AtomicInteger();
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
     * lease and writes; the holder resumes and writes with its old token. 0 stale writes may be
     * accepted, and every rival write must be. 20 rounds, not more: the latch orders every round the
     * same way (the rival's write, then the holder's), so a round adds only a higher token; 500 cost
     * 15 s on MariaDB and showed nothing the first round does not (a no-op fence check: red at round 1).
     */
    @Test
    void aHolderPausedPastItsLeaseCannotWriteAfterARivalTookOver() throws Exception {
        int rounds = 20;
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

    /**
     * The holder asking again at the same instant with the same time to live: the row a refusal
     * leaves is then exactly the row an acquisition would have written, so only the statement itself
     * can tell the two apart (MariaDB's {@code INSERT … ON DUPLICATE KEY UPDATE … RETURNING} returns
     * the row either way).
     */
    @Test
    void theHolderAskingAgainIsRefusedUntilItsLeaseExpires() {
        Lease held = leases.acquire("settlement", "a", TTL).orElseThrow();
        assertThat(leases.acquire("settlement", "a", TTL))
                .as("held by a and unexpired: refused to a as to anyone")
                .isEmpty();
        clock.advance(TTL);
        Lease again = leases.acquire("settlement", "a", TTL)
                .orElseThrow(() -> new AssertionError("expired: a acquires it again"));
        assertThat(again.token()).as("a new acquisition, a new token").isEqualTo(held.token() + 1);
    }

    /**
     * A lease lapses at its expiry to the microsecond, which is what both databases keep (MariaDB's
     * datetime(6) truncates, PostgreSQL rounds): the holder's {@link Lease#expiredAt} and a rival's
     * acquisition agree one nanosecond before the expiry and at it, for a clock and a time to live
     * with nanoseconds neither database stores.
     */
    @Test
    void aLeaseLapsesAtItsExpiryToTheMicrosecondAndItsHolderAgrees() {
        clock.advance(Duration.ofNanos(999_999));
        Lease held = leases.acquire("settlement", "a", TTL.plusNanos(1_500)).orElseThrow();
        assertThat(held.expiresAt())
                .as("the expiry as stored")
                .isEqualTo(held.expiresAt().truncatedTo(ChronoUnit.MICROS));

        clock.advance(Duration.between(clock.instant(), held.expiresAt()).minusNanos(1));
        assertThat(held.expiredAt(clock.instant())).as("1 ns before the expiry").isFalse();
        assertThat(leases.acquire("settlement", "b", TTL))
                .as("1 ns before the expiry the holder still holds it")
                .isEmpty();

        clock.advance(Duration.ofNanos(1));
        assertThat(held.expiredAt(clock.instant())).as("at the expiry").isTrue();
        assertThat(leases.acquire("settlement", "b", TTL))
                .as("at the expiry a rival acquires it")
                .hasValueSatisfying(l -> assertThat(l.token()).isEqualTo(2));
    }

    /**
     * Epochs of {@link #RACERS} threads racing for one lease behind a barrier, the clock moved to the
     * winner's expiry after each, so every race after the first is for an expired lease (taken over,
     * where the first race inserts): exactly one winner per epoch, its token one more than the last
     * epoch's; then the new winner's fenced write is accepted and every earlier winner's is refused by
     * the storage.
     */
    @Test
    void racersForAnExpiredLeaseHaveOneWinnerPerEpochAndEarlierWinnersAreFenced() throws Exception {
        int epochs = 15;
        List<Lease> earlier = new ArrayList<>();
        for (int epoch = 1; epoch <= epochs; epoch++) {
            List<Lease> won = race("ledger");
            assertThat(won).as("winners of epoch %d", epoch).hasSize(1);
            Lease winner = won.get(0);
            assertThat(winner.token())
                    .as("the token of epoch %d: one more than the last epoch's", epoch)
                    .isEqualTo(epoch);
            write(epoch, "winner", winner.token());
            for (Lease stale : earlier) {
                int e = epoch;
                assertThatThrownBy(() -> write(e, "stale", stale.token()))
                        .as("epoch %d: the write of %s", epoch, stale)
                        .isInstanceOfSatisfying(
                                StaleFencingTokenException.class,
                                x -> assertThat(x.newest()).isEqualTo(winner.token()));
            }
            earlier.add(winner);
            clock.advance(Duration.between(clock.instant(), winner.expiresAt()));
        }
        assertThat(db.queryLong("SELECT count(*) FROM ledger_write WHERE writer = 'stale'"))
                .as("stale writes accepted")
                .isZero();
        assertThat(db.queryLong("SELECT count(*) FROM ledger_write WHERE writer = 'winner'"))
                .as("each epoch's winner's write accepted")
                .isEqualTo(epochs);
    }

    /** {@link #RACERS} threads acquire {@code name} at once, as owners r0, r1, ...; returns the leases won. */
    List<Lease> race(String name) throws Exception {
        CyclicBarrier barrier = new CyclicBarrier(RACERS);
        List<Optional<Lease>> outcomes = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        Thread[] ts = new Thread[RACERS];
        for (int i = 0; i < RACERS; i++) {
            String owner = "r" + i;
            ts[i] = new Thread(() -> {
                try {
                    barrier.await();
                    Optional<Lease> outcome = leases.acquire(name, owner, TTL);
                    synchronized (outcomes) {
                        outcomes.add(outcome);
                    }
                } catch (Throwable t) {
                    synchronized (failures) {
                        failures.add(t);
                    }
                }
            });
            ts[i].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        assertThat(failures).as("acquisitions that failed").isEmpty();
        return outcomes.stream().flatMap(Optional::stream).toList();
    }

    void write(int round, String writer, long token) throws SQLException {
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
