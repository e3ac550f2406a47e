package dev.once.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * The four fault cases, run the same way against every {@link Subject}: a broker that
 * redelivers whatever was not acknowledged, and faults injected at the same point for each.
 * Every round credits an account of its own by 1, so after a case the balances say exactly how
 * many times each event's effect was applied: more than expected is applied twice, less is lost.
 */
final class Correctness {

    static final String SEQUENTIAL_DUPLICATE = "sequential_duplicate";
    static final String CRASH_AFTER_COMMIT = "crash_after_commit";
    static final String CONCURRENT_DUPLICATE = "concurrent_duplicate";
    static final String IDENTICAL_PAYLOADS = "identical_payloads";
    /**
     * Beyond the four cases of the issue: the process dies after the subject's dedupe step and
     * before the effect commits. It tells claim-in-the-same-transaction designs from the ones
     * that record the id in a transaction of its own.
     */
    static final String CRASH_BEFORE_COMMIT = "crash_before_commit";

    static final List<String> CASES = List.of(
            SEQUENTIAL_DUPLICATE, CRASH_AFTER_COMMIT, CONCURRENT_DUPLICATE, IDENTICAL_PAYLOADS, CRASH_BEFORE_COMMIT);

    /** Concurrent deliveries of the same event per round, released together by a barrier. */
    static final int THREADS = 8;
    /** Rounds of the concurrent case; the issue fixes it at 1,000 and fewer are not a result. */
    static final int CONCURRENT_ROUNDS = 1_000;
    /** Rounds of each of the three other cases. */
    static final int ROUNDS = 200;
    /** Deliveries of one event before the harness's broker gives up on it (a dead letter). */
    static final int MAX_DELIVERIES = 20;

    /** One case's tally for one subject. */
    record Result(String subject, String kase, int rounds, long appliedTwice, long lost) {
        String line() {
            return "CORRECTNESS name=" + subject + " case=" + kase + " applied_twice=" + appliedTwice + " lost=" + lost;
        }
    }

    private final BenchPostgres postgres;
    private final int rounds;
    private final int concurrentRounds;

    Correctness(BenchPostgres postgres) {
        this(postgres, false);
    }

    /** {@code quick}: a tenth of the rounds, to check a change; not a result. */
    Correctness(BenchPostgres postgres, boolean quick) {
        this.postgres = postgres;
        this.rounds = quick ? ROUNDS / 10 : ROUNDS;
        this.concurrentRounds = quick ? CONCURRENT_ROUNDS / 10 : CONCURRENT_ROUNDS;
    }

    int rounds() {
        return rounds;
    }

    int concurrentRounds() {
        return concurrentRounds;
    }

    List<Result> runAll(Subject.Kind kind) throws Exception {
        List<Result> results = new ArrayList<>();
        for (String kase : CASES) {
            results.add(run(kind, kase));
        }
        return results;
    }

    Result run(Subject.Kind kind, String kase) throws Exception {
        int rounds = kase.equals(CONCURRENT_DUPLICATE) ? concurrentRounds : this.rounds;
        try (BenchPostgres.Db db = postgres.freshDatabase(THREADS * 2)) {
            kind.createStore(db.dataSource());
            long[] expected = new long[rounds];
            Subject subject = kind.open(db.dataSource());
            try {
                switch (kase) {
                    case SEQUENTIAL_DUPLICATE -> {
                        // Delivered, acknowledged, then delivered again (a producer resend, a replay).
                        for (int r = 0; r < rounds; r++) {
                            Event e = new Event("seq-" + r, r, 1);
                            deliverUntilAcked(subject, e);
                            deliverUntilAcked(subject, e);
                            expected[r] = 1;
                        }
                    }
                    case CRASH_AFTER_COMMIT -> {
                        // The consumer finishes (its transaction committed), then the process dies before
                        // the ack: the ack is lost, the process restarts with empty memory, the broker
                        // redelivers.
                        for (int r = 0; r < rounds; r++) {
                            Event e = new Event("crash-" + r, r, 1);
                            try {
                                subject.deliver(e);
                            } catch (Exception ignored) {
                                // whatever the outcome, the ack never reaches the broker
                            }
                            subject = restart(kind, subject, db);
                            deliverUntilAcked(subject, e);
                            expected[r] = 1;
                        }
                    }
                    case CRASH_BEFORE_COMMIT -> {
                        // The process dies inside the handler, after the subject's dedupe step, before the
                        // effect commits; it restarts and the broker redelivers.
                        for (int r = 0; r < rounds; r++) {
                            Event e = new Event("dies-" + r, r, 1);
                            Faults.crashBeforeEffect(e.id());
                            try {
                                subject.deliver(e);
                            } catch (Exception | Faults.ProcessCrash ignored) {
                                // the process is gone; nothing acknowledged
                            }
                            subject = restart(kind, subject, db);
                            deliverUntilAcked(subject, e);
                            expected[r] = 1;
                        }
                    }
                    case CONCURRENT_DUPLICATE -> concurrent(subject, rounds, expected);
                    case IDENTICAL_PAYLOADS -> {
                        // Two separate payments of the same amount to the same account: both must count.
                        for (int r = 0; r < rounds; r++) {
                            deliverUntilAcked(subject, new Event("pay-" + r + "-a", r, 1));
                            deliverUntilAcked(subject, new Event("pay-" + r + "-b", r, 1));
                            expected[r] = 2;
                        }
                    }
                    default ->
                        throw new IllegalArgumentException("no case named '" + kase + "', expected one of " + CASES);
                }
            } finally {
                subject.close();
            }
            long[] balances = db.balances(rounds);
            long twice = 0;
            long lost = 0;
            for (int r = 0; r < rounds; r++) {
                twice += Math.max(0, balances[r] - expected[r]);
                lost += Math.max(0, expected[r] - balances[r]);
            }
            return new Result(kind.name(), kase, rounds, twice, lost);
        }
    }

    private static Subject restart(Subject.Kind kind, Subject subject, BenchPostgres.Db db) throws Exception {
        subject.close();
        return kind.open(db.dataSource());
    }

    /**
     * {@value #THREADS} threads deliver the same event at once, behind a barrier, as happens when a
     * visibility timeout or a rebalance hands a message to a second consumer while the first still
     * works on it. Every copy that is not acknowledged is redelivered afterwards.
     */
    private static void concurrent(Subject subject, int rounds, long[] expected) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        try {
            for (int r = 0; r < rounds; r++) {
                Event e = new Event("concurrent-" + r, r, 1);
                CyclicBarrier barrier = new CyclicBarrier(THREADS);
                List<Future<Boolean>> copies = new ArrayList<>(THREADS);
                for (int t = 0; t < THREADS; t++) {
                    copies.add(pool.submit(() -> {
                        barrier.await();
                        try {
                            return subject.deliver(e);
                        } catch (Exception failure) {
                            return false;
                        }
                    }));
                }
                for (Future<Boolean> copy : copies) {
                    if (!copy.get()) {
                        deliverUntilAcked(subject, e);
                    }
                }
                expected[r] = 1;
            }
        } finally {
            pool.shutdownNow();
        }
    }

    /** The broker: redeliver until acknowledged, up to {@value #MAX_DELIVERIES} deliveries. */
    static boolean deliverUntilAcked(Subject subject, Event e) {
        for (int attempt = 1; attempt <= MAX_DELIVERIES; attempt++) {
            try {
                if (subject.deliver(e)) {
                    return true;
                }
            } catch (Exception failure) {
                // not acknowledged: the broker redelivers
            }
        }
        return false;
    }
}
