package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.IdempotentConsumerBuilder;
import dev.once.MismatchPolicy;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.PayloadMismatchException;
import dev.once.PermanentFailureException;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;

/**
 * {@link MismatchPolicy} where it meets what it does not own, as a generated stream on PostgreSQL and MariaDB:
 * one consumer name served by six builds at once (a rolling deploy changing the setting): set-wise
 * {@code FAIL_PERMANENT} with a {@link dev.once.BatchHandler}, per-event {@code COUNT}, {@code OFF}, {@code OFF} with
 * {@link ClaimTiming#AT_COMMIT}, and {@code FAIL_PERMANENT} per event and set-wise in the caller's transaction
 * ({@link ManualTransactions}: a savepoint before one item, then commit, rollback to that savepoint and commit, or
 * rollback); single deliveries and batches holding copies of an id with the same, another or an empty payload, and
 * poison deliveries (the handler fails for good after its effect) that an owned batch bisects away and that doom a
 * joined transaction. The model keeps, per event id, the payload applied and whether its claim kept a fingerprint
 * (not under {@code OFF}, not for an empty payload). The oracle after every step: each delivery's outcome is what the
 * model says (applied once by its first healthy delivery; a later copy a duplicate, or under {@code FAIL_PERMANENT} a
 * {@link PayloadMismatchException} when both it and the stored claim have a fingerprint and they differ; a copy
 * behind a poison first occurrence never acknowledged); each id's effect row, claim and outbox row are there exactly
 * when it was applied, once, with the payload applied; joined, the commit is refused exactly when a poison delivery
 * failed in the transaction, and what the listener hears at its end is APPLIED only for what committed and DUPLICATE
 * only for an id whose claim committed.
 *
 * <p>Found on its first run (shrunk, PostgreSQL): {@code strict-joined batch [e0:-, e0:-] savepoint before 0
 * rollback to savepoint, commit}: the copy heard DUPLICATE although its first occurrence's claim was rolled back
 * (then, MariaDB, the same across two {@code process} calls). Fixed in {@code JoinedMode}. With the fix's {@code
 * ClaimsOnThread.heldBy} forced false: red again; with in-batch copies compared with the stored fingerprint only
 * ({@code Settlement}): red, {@code strict-set batch [e0:a, e0:b]} expected FAILED_PERMANENT but was DUPLICATE.
 *
 * <p>Then (helper {@code edges}) the caller's rescue: each call in a savepoint of its own, rolled back to when it
 * failed, and the rest committed; and a savepoint set after the failure, rolled back to. Red before on both
 * databases ({@code ManualTransactions} kept the transaction rollback-only after the rollback to a savepoint before
 * the failure); with the mark cleared on any rollback to a savepoint, red on the one after it.
 */
class MismatchPropertyTest {

    static final int TRIES = 100;
    static final AtomicLong postgresSteps = new AtomicLong();
    static final AtomicLong mariadbSteps = new AtomicLong();
    /** Failed calls the caller rolled back to a savepoint before them, and rollbacks to one after a failure. */
    static final AtomicLong rescued = new AtomicLong();

    static final AtomicLong keptDoomed = new AtomicLong();
    private static TestDatabase postgres;
    private static TestDatabase mariadb;

    @AfterContainer
    static void stop() {
        if (postgres != null) {
            postgres.close();
        }
        if (mariadb != null) {
            mariadb.close();
        }
        System.out.println("CHAOS name=payload-mismatch steps=" + postgresSteps.get() + " db=postgres");
        System.out.println("CHAOS name=payload-mismatch steps=" + mariadbSteps.get() + " db=mariadb");
        System.out.println("CHAOS name=payload-mismatch rescued_by_savepoint=" + rescued.get()
                + " doomed_kept_by_later_savepoint=" + keptDoomed.get());
    }

    /** One delivery: an id among a few, and its payload: "" (none), "a", "b", or "poison" (the handler fails). */
    record Item(int id, String payload) {
        String eventId() {
            return "e" + id;
        }

        boolean poison() {
            return payload.equals("poison");
        }

        Delivery delivery() {
            return Delivery.of(eventId(), payload);
        }

        @Override
        public String toString() {
            return eventId() + ":" + (payload.isEmpty() ? "-" : payload);
        }
    }

    /**
     * Which build processes the step, and whether as one {@code processBatch} or one {@code process} per item. The
     * joined build runs the step in a caller's transaction ({@link ManualTransactions}) with a savepoint set before
     * item {@code savepointAt} (one by one: where the loop stopped, after the failure that doomed the transaction,
     * when it stopped before that item; batch: before it, or {@code savepointAt == items.size()} after it; none past
     * that), and {@code end}: 0 commit, 1 rollback to that savepoint then commit, 2 rollback. With {@code rescue} the
     * caller also processes each item (or the batch) inside a savepoint of its own, rolls back to it when the call
     * failed and goes on (JDBC's and Spring's NESTED way to keep the rest of the transaction), and releases it
     * otherwise.
     */
    record Step(int build, boolean batch, List<Item> items, int savepointAt, int end, boolean rescue) {
        @Override
        public String toString() {
            return BUILDS[build]
                    + (batch ? " batch " : " one by one ")
                    + items
                    + (build >= JOINED
                            ? (rescue ? " each in a savepoint rolled back to when it fails," : "")
                                    + (savepointAt < items.size()
                                            ? " savepoint before " + savepointAt
                                            : batch && savepointAt == items.size() ? " savepoint after the batch" : "")
                                    + " " + ENDS[end]
                            : "");
        }
    }

    static final String[] BUILDS = {"strict-set", "count", "off", "off-at-commit", "strict-joined", "strict-set-joined"
    };
    static final String[] ENDS = {"commit", "rollback to savepoint, commit", "rollback"};
    static final int JOINED = 4;

    @Provide
    Arbitrary<List<Step>> streams() {
        Arbitrary<Item> item = Combinators.combine(
                        Arbitraries.integers().between(0, 4),
                        Arbitraries.frequency(
                                net.jqwik.api.Tuple.of(1, ""),
                                net.jqwik.api.Tuple.of(4, "a"),
                                net.jqwik.api.Tuple.of(3, "b"),
                                net.jqwik.api.Tuple.of(2, "poison")))
                .as(Item::new);
        Arbitrary<Step> step = Combinators.combine(
                        Arbitraries.integers().between(0, BUILDS.length - 1),
                        Arbitraries.of(true, false),
                        item.list().ofMinSize(1).ofMaxSize(7),
                        Arbitraries.integers().between(0, 7),
                        Arbitraries.integers().between(0, 2),
                        Arbitraries.of(true, false))
                .as(Step::new);
        return step.list().ofMinSize(1).ofMaxSize(10);
    }

    @Property(tries = TRIES)
    void postgresMismatches(@ForAll("streams") List<Step> stream) throws Exception {
        if (postgres == null) {
            postgres = effects(TestPostgres.shared().freshDatabase(4));
        }
        run(postgres, Dialects.POSTGRESQL, stream);
        postgresSteps.addAndGet(stream.size());
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = TRIES)
    void mariadbMismatches(@ForAll("streams") List<Step> stream) throws Exception {
        if (mariadb == null) {
            mariadb = effects(TestMariaDb.shared().freshDatabase(4));
        }
        run(mariadb, Dialects.MARIADB, stream);
        mariadbSteps.addAndGet(stream.size());
    }

    /** Shrunk from the first red run: a copy in a joined batch heard DUPLICATE after its first occurrence rolled back. */
    @Example
    void aCopyInAJoinedBatchWhoseFirstOccurrenceRolledBack() throws Exception {
        if (postgres == null) {
            postgres = effects(TestPostgres.shared().freshDatabase(4));
        }
        run(
                postgres,
                Dialects.POSTGRESQL,
                List.of(new Step(JOINED, true, List.of(new Item(0, ""), new Item(0, "")), 0, 1, false)));
    }

    /** The same, one process call per copy: the second finds the claim the first made in the same transaction. */
    @Example
    void aCopyInAJoinedTransactionWhoseFirstRolledBack() throws Exception {
        if (postgres == null) {
            postgres = effects(TestPostgres.shared().freshDatabase(4));
        }
        run(
                postgres,
                Dialects.POSTGRESQL,
                List.of(new Step(JOINED, false, List.of(new Item(0, "a"), new Item(0, "a")), 0, 2, false)));
        run(
                postgres,
                Dialects.POSTGRESQL,
                List.of(new Step(JOINED, false, List.of(new Item(1, "a"), new Item(1, "a")), 1, 1, false)));
    }

    /**
     * A caller keeps the rest of its transaction: the poison delivery's call is rolled back to the savepoint set
     * right before it, and the deliveries before and after it commit (both databases). A rollback to a savepoint
     * set after the failure undoes none of it: the commit is still refused.
     */
    @Example
    void aFailedCallRolledBackToASavepointBeforeItLeavesTheRestToCommit() throws Exception {
        if (postgres == null) {
            postgres = effects(TestPostgres.shared().freshDatabase(4));
        }
        if (mariadb == null) {
            mariadb = effects(TestMariaDb.shared().freshDatabase(4));
        }
        List<Item> items = List.of(new Item(0, "a"), new Item(1, "poison"), new Item(2, "a"));
        for (Step step :
                List.of(new Step(JOINED, false, items, 7, 0, true), new Step(JOINED, false, items, 2, 1, false))) {
            run(postgres, Dialects.POSTGRESQL, List.of(step));
            run(mariadb, Dialects.MARIADB, List.of(step));
        }
    }

    private static TestDatabase effects(TestDatabase db) {
        return db.execute("CREATE TABLE effect (event_id varchar(40) NOT NULL, payload varchar(40) NOT NULL)");
    }

    /** What the inbox holds for an id: the payload applied, and whether its claim kept a fingerprint. */
    record Stored(String payload, boolean fingerprinted) {}

    private static void run(TestDatabase db, Dialect dialect, List<Step> stream) throws Exception {
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement()) {
            s.execute("DELETE FROM effect");
            s.execute("DELETE FROM once_inbox");
            s.execute("DELETE FROM once_outbox");
        }
        IdempotentConsumer[] builds = {
            builder(db, MismatchPolicy.FAIL_PERMANENT)
                    .batchHandler(MismatchPropertyTest::setWise)
                    .build(),
            builder(db, MismatchPolicy.COUNT)
                    .handler(MismatchPropertyTest::apply)
                    .build(),
            builder(db, MismatchPolicy.OFF).handler(MismatchPropertyTest::apply).build(),
            builder(db, MismatchPolicy.OFF)
                    .claimTiming(ClaimTiming.AT_COMMIT)
                    .handler(MismatchPropertyTest::apply)
                    .build()
        };
        MismatchPolicy[] policies = {
            MismatchPolicy.FAIL_PERMANENT,
            MismatchPolicy.COUNT,
            MismatchPolicy.OFF,
            MismatchPolicy.OFF,
            MismatchPolicy.FAIL_PERMANENT,
            MismatchPolicy.FAIL_PERMANENT
        };
        Map<String, Stored> stored = new HashMap<>();
        List<String> done = new ArrayList<>();
        for (Step step : stream) {
            done.add(step.toString());
            String when = "after " + done;
            MismatchPolicy policy = policies[step.build()];
            if (step.build() >= JOINED) {
                joined(db, dialect, step, stored, when);
            } else {
                List<Outcome> outcomes = new ArrayList<>();
                if (step.batch()) {
                    outcomes.addAll(builds[step.build()].processBatch(
                            step.items().stream().map(Item::delivery).toList()));
                } else {
                    for (Item i : step.items()) {
                        outcomes.add(builds[step.build()].process(i.delivery()));
                    }
                }
                expect(step.items(), step.batch(), policy, stored, outcomes, false, when);
            }
            check(db, stored, when);
        }
    }

    /**
     * Checks {@code outcomes} of {@code items} against {@code view} (what the transaction sees as claimed) and
     * moves {@code view} on; within a batch, copies of an id compare with its first occurrence. Joined, a poison
     * delivery fails the whole transaction (nothing is split off). Returns whether a poison delivery was claimed.
     */
    private static boolean expect(
            List<Item> items,
            boolean batch,
            MismatchPolicy policy,
            Map<String, Stored> view,
            List<Outcome> outcomes,
            boolean joined,
            String when) {
        Map<String, Boolean> firstFailed = new HashMap<>();
        boolean joinedBatchFails = joined
                && batch
                && items.stream()
                        .anyMatch(i -> i.poison()
                                && !view.containsKey(i.eventId())
                                && items.stream()
                                        .filter(j -> j.eventId().equals(i.eventId()))
                                        .findFirst()
                                        .orElseThrow()
                                        .poison());
        boolean poisoned = false;
        for (int k = 0; k < outcomes.size(); k++) {
            Item i = items.get(k);
            Outcome o = outcomes.get(k);
            String what = when + ": outcome of item " + k + " (" + i + "): " + o;
            Stored before = view.get(i.eventId());
            if (batch && Boolean.TRUE.equals(firstFailed.get(i.eventId()))) {
                assertThat(o.shouldAcknowledge())
                        .as(what + " (a copy of a first occurrence that failed)")
                        .isFalse();
                continue;
            }
            if (before == null && joinedBatchFails) {
                assertThat(o.shouldAcknowledge())
                        .as(what + " (claimed in a joined batch that failed)")
                        .isFalse();
                firstFailed.put(i.eventId(), true);
                poisoned = true;
                continue;
            }
            if (before == null) {
                if (i.poison()) {
                    assertThat(o.status()).as(what).isEqualTo(Status.FAILED_PERMANENT);
                    assertThat(o.failure()).as(what).isInstanceOf(PermanentFailureException.class);
                    firstFailed.put(i.eventId(), true);
                    poisoned = true;
                    continue;
                }
                assertThat(o.status()).as(what).isEqualTo(Status.APPLIED);
                view.put(
                        i.eventId(),
                        new Stored(
                                i.payload(),
                                policy != MismatchPolicy.OFF && !i.payload().isEmpty()));
                firstFailed.put(i.eventId(), false);
                continue;
            }
            firstFailed.putIfAbsent(i.eventId(), false);
            boolean mismatch = before.fingerprinted()
                    && !i.payload().isEmpty()
                    && !i.payload().equals(before.payload());
            if (policy == MismatchPolicy.FAIL_PERMANENT && mismatch) {
                assertThat(o.status()).as(what).isEqualTo(Status.FAILED_PERMANENT);
                assertThat(o.failure()).as(what).isInstanceOf(PayloadMismatchException.class);
            } else {
                assertThat(o.status()).as(what).isEqualTo(Status.DUPLICATE);
            }
        }
        return poisoned;
    }

    /**
     * A step in the caller's transaction: the items processed, a savepoint before one of them (or the batch),
     * then the step's end. A poison delivery dooms the transaction (the scope's commit refuses it); one by one,
     * nothing more is processed after it. What the listener hears when the transaction ends: APPLIED only for a
     * delivery whose claim and effect committed, and an acknowledged outcome (APPLIED or DUPLICATE) only for an
     * id whose claim stands committed, with a payload that is no mismatch of the one applied.
     */
    private static void joined(TestDatabase db, Dialect dialect, Step step, Map<String, Stored> stored, String when)
            throws Exception {
        List<String> heard = new ArrayList<>();
        IdempotentConsumerBuilder b = IdempotentConsumer.builder()
                .transactions(MANUAL)
                .dialect(dialect)
                .consumer("billing")
                .onMismatch(MismatchPolicy.FAIL_PERMANENT)
                .outcomeListener((d, o) -> heard.add(d.eventId() + ":" + d.payloadText() + "=" + o.status()));
        IdempotentConsumer consumer = (step.build() == JOINED
                        ? b.handler(MismatchPropertyTest::apply)
                        : b.batchHandler(MismatchPropertyTest::setWise))
                .build();
        Map<String, Stored> view = new HashMap<>(stored);
        Map<String, Stored> atSavepoint = null;
        Savepoint savepoint = null;
        boolean doomed = false;
        // whether the savepoint was set before the failure that doomed the transaction: a rollback to it undoes all
        // the failed call did, and the transaction may commit what came before
        boolean savepointBeforeDoom = false;
        int processed = 0;
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope scope = MANUAL.join(c)) {
                if (step.batch()) {
                    if (step.savepointAt() < step.items().size()) {
                        savepoint = scope.setSavepoint();
                        atSavepoint = new HashMap<>(view);
                    }
                    Map<String, Stored> beforeBatch = new HashMap<>(view);
                    Savepoint rescue = step.rescue() ? scope.setSavepoint() : null;
                    List<Outcome> outcomes = consumer.processBatch(
                            step.items().stream().map(Item::delivery).toList());
                    processed = step.items().size();
                    doomed = expect(step.items(), true, MismatchPolicy.FAIL_PERMANENT, view, outcomes, true, when);
                    savepointBeforeDoom = doomed && savepoint != null;
                    if (rescue != null) {
                        view = rescued(scope, rescue, doomed, view, beforeBatch, when);
                        doomed = false;
                    }
                    if (step.savepointAt() == step.items().size()) {
                        savepoint = scope.setSavepoint();
                        atSavepoint = new HashMap<>(view);
                    }
                } else {
                    for (int k = 0; k < step.items().size() && !doomed; k++) {
                        if (k == step.savepointAt()) {
                            savepoint = scope.setSavepoint();
                            atSavepoint = new HashMap<>(view);
                        }
                        Map<String, Stored> beforeItem = new HashMap<>(view);
                        Savepoint rescue = step.rescue() ? scope.setSavepoint() : null;
                        Outcome o = consumer.process(step.items().get(k).delivery());
                        processed++;
                        doomed = expect(
                                List.of(step.items().get(k)),
                                false,
                                MismatchPolicy.FAIL_PERMANENT,
                                view,
                                List.of(o),
                                true,
                                when);
                        savepointBeforeDoom = doomed && savepoint != null;
                        if (rescue != null) {
                            view = rescued(scope, rescue, doomed, view, beforeItem, when + " (item " + k + ")");
                            doomed = false;
                        }
                    }
                    if (savepoint == null && step.savepointAt() < step.items().size()) {
                        // the loop stopped (doomed) before the item: the caller sets its savepoint after the failure
                        savepoint = scope.setSavepoint();
                        atSavepoint = new HashMap<>(view);
                    }
                }
                assertThat(scope.rollbackOnly())
                        .as(when + ": the transaction is rollback-only exactly when a poison delivery failed in it"
                                + " (and was not rolled back to a savepoint before it)")
                        .isEqualTo(doomed);
                CallerTransactionEnd.Ended ended = CallerTransactionEnd.end(
                        scope,
                        step.end(),
                        savepoint,
                        doomed,
                        savepointBeforeDoom,
                        when,
                        "failure",
                        rescued,
                        keptDoomed);
                if (ended.how() == CallerTransactionEnd.COMMIT_FROM_SAVEPOINT) {
                    view = atSavepoint;
                }
                if (ended.committed()) {
                    stored.clear();
                    stored.putAll(view);
                }
            } finally {
                c.setAutoCommit(true);
            }
        }
        assertThat(heard)
                .as(when + ": one outcome heard per delivery processed")
                .hasSize(processed);
        for (String h : heard) {
            String id = h.substring(0, h.indexOf(':'));
            String payload = h.substring(h.indexOf(':') + 1, h.indexOf('='));
            String status = h.substring(h.indexOf('=') + 1);
            Stored s = stored.get(id);
            if (status.equals("APPLIED")) {
                assertThat(s)
                        .as(when + ": heard " + h + ": applied and committed")
                        .isNotNull();
                assertThat(s.payload()).as(when + ": heard " + h).isEqualTo(payload);
            }
            if (status.equals("DUPLICATE")) {
                assertThat(s)
                        .as(when + ": heard " + h + ": acknowledged as a duplicate, but no claim of " + id
                                + " committed (lost if this copy is the one acknowledged)")
                        .isNotNull();
            }
        }
    }

    /**
     * The caller's rescue savepoint after its call: rolled back to when the call failed (the transaction must then
     * no longer be rollback-only, and what the call did is gone: {@code before}), else released ({@code view}).
     */
    private static Map<String, Stored> rescued(
            ManualTransactions.Scope scope,
            Savepoint rescue,
            boolean failed,
            Map<String, Stored> view,
            Map<String, Stored> before,
            String when)
            throws SQLException {
        if (!failed) {
            scope.releaseSavepoint(rescue);
            return view;
        }
        scope.rollback(rescue);
        rescued.incrementAndGet();
        assertThat(scope.rollbackOnly())
                .as(when + ": rollback-only after the rollback to the savepoint set right before the failed call,"
                        + " which undid all it did")
                .isFalse();
        return before;
    }

    static final ManualTransactions MANUAL = new ManualTransactions();

    private static IdempotentConsumerBuilder builder(TestDatabase db, MismatchPolicy policy) {
        return IdempotentConsumer.builder()
                .dataSource(db.dataSource())
                .consumer("billing")
                .onMismatch(policy);
    }

    /** The set-wise handler: one batch insert for every event claimed, one outbox row each; fails for good on poison. */
    private static void setWise(List<Delivery> claimed, dev.once.BatchTx tx) throws SQLException {
        try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO effect VALUES (?, ?)")) {
            for (Delivery d : claimed) {
                ps.setString(1, d.eventId());
                ps.setString(2, d.payloadText());
                ps.addBatch();
                tx.outbox(d).add("out", null, row(d), null, null);
            }
            ps.executeBatch();
        }
        for (Delivery d : claimed) {
            if (d.payloadText().equals("poison")) {
                throw new PermanentFailureException("poison " + d.eventId());
            }
        }
    }

    private static void apply(Delivery d, dev.once.Tx tx) throws SQLException {
        try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO effect VALUES (?, ?)")) {
            ps.setString(1, d.eventId());
            ps.setString(2, d.payloadText());
            ps.executeUpdate();
        }
        tx.outbox().add("out", null, row(d), null, null);
        if (d.payloadText().equals("poison")) {
            throw new PermanentFailureException("poison " + d.eventId());
        }
    }

    private static byte[] row(Delivery d) {
        return (d.eventId() + "=" + d.payloadText()).getBytes(StandardCharsets.UTF_8);
    }

    private static void check(TestDatabase db, Map<String, Stored> stored, String when) throws SQLException {
        Map<String, String> expected = new HashMap<>();
        stored.forEach((id, s) -> expected.put(id, s.payload()));
        assertThat(pairs(db, "SELECT event_id, payload FROM effect"))
                .as(when + ": effects, each applied event once with its payload")
                .containsExactlyInAnyOrderElementsOf(expected.entrySet().stream()
                        .map(e -> e.getKey() + "=" + e.getValue())
                        .toList());
        assertThat(pairs(db, "SELECT payload FROM once_outbox"))
                .as(when + ": outbox rows, one per applied event")
                .containsExactlyInAnyOrderElementsOf(expected.entrySet().stream()
                        .map(e -> e.getKey() + "=" + e.getValue())
                        .toList());
        assertThat(pairs(db, "SELECT event_id FROM once_inbox"))
                .as(when + ": claims, one per applied event")
                .containsExactlyInAnyOrderElementsOf(expected.keySet());
    }

    private static List<String> pairs(TestDatabase db, String sql) throws SQLException {
        List<String> out = new ArrayList<>();
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement ps = c.prepareStatement(sql);
                ResultSet rs = ps.executeQuery()) {
            int n = rs.getMetaData().getColumnCount();
            while (rs.next()) {
                StringBuilder b = new StringBuilder();
                for (int k = 1; k <= n; k++) {
                    Object v = rs.getObject(k);
                    b.append(k > 1 ? "=" : "")
                            .append(v instanceof byte[] bytes ? new String(bytes, StandardCharsets.UTF_8) : v);
                }
                out.add(b.toString());
            }
        }
        return out;
    }
}
