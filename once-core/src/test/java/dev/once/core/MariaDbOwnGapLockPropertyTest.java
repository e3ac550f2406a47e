package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.StreamPositions;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.tx.ManualTransactions;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;

/**
 * MariaDB: a claim that meets an id claimed before leaves a next-key lock on that inbox row and the gap before it
 * until its transaction ends (InnoDB, REPEATABLE READ). A caller's open transaction ({@link ManualTransactions}) that
 * processed deliveries of a consumer therefore locks gaps of its inbox; an engine of its own transactions called on
 * the same thread for a new id in such a gap waits for a lock only this thread can release, after the call returns:
 * unguarded ({@code ClaimsOnThread} knows the ids claimed, not the gaps met), bounded by the lock timeout. Generated:
 * ids committed before, the caller's deliveries (duplicates and new ones), the owned delivery (one {@code process}
 * or a one-element {@code processBatch}) and the caller's end. The oracle: the owned call answers DUPLICATE exactly
 * for an id committed before; IN_PROGRESS at once for an id the caller's transaction claimed (the guard); else
 * APPLIED, or, when it waited, an outcome not acknowledged (never DUPLICATE: nothing of the id committed) within the
 * lock timeout; after the caller's end, the id processed again is applied or a duplicate exactly as committed; the
 * inbox and the effects hold exactly what committed.
 *
 * <p>Seen (helper {@code edges}, MariaDB 10.11): once's own statements leave no gap lock an owned claim meets: a
 * duplicate met by {@code INSERT IGNORE} (one by one, batch, ordered) locks the row, not the gap before it, and 0 of
 * 100 generated cases waited. The wait comes from the caller's own locking read of the inbox ({@code FOR UPDATE}, a
 * move in the generator): 42 of 100 owned calls then waited, each answered IN_PROGRESS after the lock timeout
 * (MariaDB counts it in whole seconds: 1 s for 300 ms), never DUPLICATE for an id not committed, and applied once
 * after the caller ended. Its message names both possible holders, and this thread's open transaction by name when it
 * claimed events of the consumer (once knows those, {@code ClaimsOnThread}; a transaction that only read the inbox it
 * cannot tell from another delivery without asking the server).
 */
class MariaDbOwnGapLockPropertyTest {

    static final Duration LOCK_TIMEOUT = Duration.ofMillis(300);
    static final AtomicLong tries = new AtomicLong();
    static final AtomicLong waited = new AtomicLong();
    static final AtomicLong appliedBeside = new AtomicLong();
    private static TestDatabase mariadb;
    static final ManualTransactions MANUAL = new ManualTransactions();

    @AfterContainer
    static void stop() {
        if (mariadb != null) {
            mariadb.close();
        }
        System.out.println("CHAOS name=mariadb-own-gap-lock tries=" + tries.get() + " owned_waited=" + waited.get()
                + " owned_applied_beside=" + appliedBeside.get());
    }

    /** Ids committed before, the caller's deliveries, the owned delivery, batch or not, and the caller's commit. */
    record Case(
            Set<Integer> committed,
            List<Integer> caller,
            int callerMode,
            boolean rangeRead,
            int owned,
            int ownedMode,
            boolean commit) {
        @Override
        public String toString() {
            return "committed " + committed + ", caller " + CALLER_MODES[callerMode] + " " + caller
                    + (rangeRead ? " then reads the inbox FOR UPDATE" : "") + ", owned e"
                    + owned + " " + CALLER_MODES[ownedMode] + ", caller " + (commit ? "commits" : "rolls back");
        }
    }

    /** How the caller processes its deliveries: one by one, one batch, one ordered run (positions 0, 1, ...). */
    static final String[] CALLER_MODES = {"one by one", "batch", "in order"};

    @Provide
    Arbitrary<Case> cases() {
        Arbitrary<Integer> id = Arbitraries.integers().between(0, 9);
        return Combinators.combine(
                        id.set().ofMaxSize(6),
                        id.list().ofMinSize(1).ofMaxSize(3),
                        Arbitraries.integers().between(0, 2),
                        Arbitraries.of(true, false),
                        id,
                        Arbitraries.integers().between(0, 2),
                        Arbitraries.of(true, false))
                .as(Case::new);
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = 100)
    void anOwnedClaimInAGapTheThreadsOpenTransactionLockedIsNeverADuplicate(@ForAll("cases") Case c) throws Exception {
        if (mariadb == null) {
            mariadb = TestMariaDb.shared().freshDatabase(4);
            mariadb.execute("CREATE TABLE effect (event_id varchar(40) NOT NULL)");
        }
        tries.incrementAndGet();
        try (Connection conn = mariadb.dataSource().getConnection();
                Statement s = conn.createStatement()) {
            s.execute("DELETE FROM effect");
            s.execute("DELETE FROM once_inbox");
            s.execute("DELETE FROM once_stream_position");
        }
        IdempotentConsumer owned = IdempotentConsumer.builder()
                .dataSource(mariadb.dataSource())
                .consumer("billing")
                .lockTimeout(LOCK_TIMEOUT)
                .handler(MariaDbOwnGapLockPropertyTest::apply)
                .build();
        IdempotentConsumer joined = IdempotentConsumer.builder()
                .transactions(MANUAL)
                .dialect(Dialects.MARIADB)
                .consumer("billing")
                .handler(MariaDbOwnGapLockPropertyTest::apply)
                .build();
        Set<String> committed = new TreeSet<>();
        for (int i : c.committed()) {
            assertThat(owned.process(delivery(i)).status()).isEqualTo(Status.APPLIED);
            committed.add("e" + i);
        }
        String x = "e" + c.owned();
        Set<String> claimedByCaller = new TreeSet<>();
        try (Connection conn = mariadb.dataSource().getConnection()) {
            conn.setAutoCommit(false);
            try (ManualTransactions.Scope scope = MANUAL.join(conn)) {
                List<Delivery> callers = c.caller().stream()
                        .map(MariaDbOwnGapLockPropertyTest::delivery)
                        .toList();
                List<Outcome> outcomes = new ArrayList<>();
                if (c.callerMode() == 0) {
                    callers.forEach(d -> outcomes.add(joined.process(d)));
                } else if (c.callerMode() == 1) {
                    outcomes.addAll(joined.processBatch(callers));
                } else {
                    List<java.math.BigInteger> positions = new ArrayList<>();
                    for (int k = 0; k < callers.size(); k++) {
                        positions.add(java.math.BigInteger.valueOf(k));
                    }
                    // a stream of its own per try: no position stands in its way
                    outcomes.addAll(joined.processInOrder(callers, new StreamPositions("s" + tries.get(), positions)));
                }
                for (int k = 0; k < callers.size(); k++) {
                    String id = callers.get(k).eventId();
                    boolean fresh = !committed.contains(id) && !claimedByCaller.contains(id);
                    assertThat(outcomes.get(k).status())
                            .as(c + ": the caller's " + id)
                            .isEqualTo(fresh ? Status.APPLIED : Status.DUPLICATE);
                    if (fresh) {
                        claimedByCaller.add(id);
                    }
                }
                long started = System.nanoTime();
                if (c.rangeRead()) {
                    // the caller's own locking read of the consumer's inbox: next-key locks on every row and gap
                    try (Statement s = conn.createStatement();
                            ResultSet rs = s.executeQuery(
                                    "SELECT event_id FROM once_inbox WHERE consumer = 'billing' FOR UPDATE")) {
                        while (rs.next()) {
                            rs.getString(1);
                        }
                    }
                }
                // the owned run's stream: another than the caller's, its row perhaps in a gap the caller locked
                Outcome o = c.ownedMode() == 0
                        ? owned.process(delivery(c.owned()))
                        : c.ownedMode() == 1
                                ? owned.processBatch(List.of(delivery(c.owned())))
                                        .get(0)
                                : owned.processInOrder(
                                                List.of(delivery(c.owned())),
                                                new StreamPositions(
                                                        "r" + tries.get(), List.of(java.math.BigInteger.ZERO)))
                                        .get(0);
                long ms = (System.nanoTime() - started) / 1_000_000;
                String what =
                        c + ": the owned call in the caller's open transaction answered " + o + " after " + ms + " ms";
                if (committed.contains(x) && !(c.rangeRead() && o.status() == Status.IN_PROGRESS)) {
                    // (the caller's locking read holds the committed row: the claim waits for it, IN_PROGRESS)
                    assertThat(o.status()).as(what).isEqualTo(Status.DUPLICATE);
                } else if (committed.contains(x)) {
                    waited.incrementAndGet();
                    assertNamesTheThreadsOwnTransaction(what, o, !claimedByCaller.isEmpty());
                } else if (claimedByCaller.contains(x)) {
                    assertThat(o.status())
                            .as(what + " (the caller holds its claim)")
                            .isEqualTo(Status.IN_PROGRESS);
                } else if (o.status() == Status.APPLIED) {
                    appliedBeside.incrementAndGet();
                    committed.add(x);
                } else {
                    waited.incrementAndGet();
                    assertNamesTheThreadsOwnTransaction(what, o, !claimedByCaller.isEmpty());
                    assertThat(o.shouldAcknowledge())
                            .as(what + ": nothing of " + x + " committed")
                            .isFalse();
                    assertThat(o.status()).as(what).isNotEqualTo(Status.DUPLICATE);
                    assertThat(ms)
                            .as(what + ": bounded by the lock timeout")
                            .isLessThan(LOCK_TIMEOUT.toMillis() + 10_000);
                }
                if (c.commit()) {
                    scope.commit();
                    committed.addAll(claimedByCaller);
                } else {
                    scope.rollback();
                }
            } finally {
                conn.setAutoCommit(true);
            }
        }
        Outcome again = owned.process(delivery(c.owned()));
        assertThat(again.status())
                .as(c + ": " + x + " again after the caller ended")
                .isEqualTo(committed.contains(x) ? Status.DUPLICATE : Status.APPLIED);
        committed.add(x);
        assertThat(rows("SELECT event_id FROM once_inbox WHERE consumer = 'billing'"))
                .as(c + ": claims")
                .containsExactlyInAnyOrderElementsOf(committed);
        assertThat(rows("SELECT event_id FROM effect"))
                .as(c + ": effects, once each")
                .containsExactlyInAnyOrderElementsOf(committed);
    }

    /**
     * The wait's IN_PROGRESS names the lock's possible holders: another delivery, or another transaction of this
     * thread, and, when this thread's open transaction claimed events of the consumer, that one by name (it
     * cannot end before the call returns: acknowledging nothing is right, waiting again on this thread is not).
     */
    private static void assertNamesTheThreadsOwnTransaction(String what, Outcome o, boolean callerClaimed) {
        assertThat(o.status()).as(what).isEqualTo(Status.IN_PROGRESS);
        String message = o.failure().getMessage();
        assertThat(message).as(what).contains("another delivery of it", "another transaction of this thread");
        if (callerClaimed) {
            assertThat(message)
                    .as(what + ": this thread's open transaction claimed events of 'billing'")
                    .contains("this thread has a transaction open that claimed events of consumer 'billing'");
        } else {
            assertThat(message).as(what).doesNotContain("this thread has a transaction open");
        }
    }

    private static Delivery delivery(int i) {
        return Delivery.of("e" + i, "p");
    }

    private static void apply(Delivery d, dev.once.Tx tx) throws SQLException {
        try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO effect VALUES (?)")) {
            ps.setString(1, d.eventId());
            ps.executeUpdate();
        }
    }

    private static List<String> rows(String sql) throws SQLException {
        List<String> out = new ArrayList<>();
        try (Connection c = mariadb.dataSource().getConnection();
                PreparedStatement ps = c.prepareStatement(sql);
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(rs.getString(1));
            }
        }
        return out;
    }
}
