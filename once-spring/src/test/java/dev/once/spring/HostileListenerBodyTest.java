package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.once.ClaimTiming;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.dao.DataAccessException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * An {@link IdempotentListener} body that does what a real body may do behind once's back, on the
 * connection Spring bound: catch a failed statement and go on, delete its own claim (through
 * {@code JdbcTemplate} or the driver's unwrapped connection), send ROLLBACK as SQL, mark the transaction
 * rollback-only from an inner {@code REQUIRED} step, roll back a savepoint of its own, run {@code NESTED}
 * steps, register a {@code beforeCommit} synchronization that writes or fails. Generated deliveries (each event delivered
 * one to three times, each delivery its own body) go through the listener one by one; the oracle comes
 * from the steps alone: a delivery whose body has a poisoned step throws (the container does not
 * acknowledge it) and leaves nothing; the first clean delivery of an event commits exactly its body's
 * writes and its claim; every later delivery is a duplicate that returns without running the body.
 *
 * <p>This is the test of the claim check that once leaves to Spring's commit (and, with nothing else
 * due before the commit, folds into it), and of the confinement that lets the default listener skip it
 * (the body's JdbcTemplate reaching once's guarded connection): a check skipped when the guard did not
 * see everything lets a deleted claim commit, and the next copy apply again.
 */
class HostileListenerBodyTest {

    /** What a body may do, in order. */
    enum Step {
        CREDIT,
        /** A statement fails, the body catches Spring's exception and goes on: the transaction is aborted. */
        FAIL_CAUGHT,
        /** A NESTED step writes, then fails; the body catches it and goes on (rolled back to its savepoint). */
        NESTED_FAIL,
        /** A NESTED step that writes and commits into the outer transaction. */
        NESTED_CREDIT,
        /**
         * A REQUIRES_NEW step that writes a note in a transaction of its own (suspending the listener's, whose
         * connection must come back as it was): the note stays whatever the delivery does, the ledger is untouched.
         */
        REQUIRES_NEW_NOTE,
        /** A savepoint set on the raw connection, a write, a rollback to it: Spring hears of none of it. */
        RAW_SAVEPOINT_GHOST,
        /** The body deletes its own claim row. */
        DELETE_CLAIM,
        /** ROLLBACK as SQL through JdbcTemplate, the exception caught: the claim must not be lost unseen. */
        RAW_ROLLBACK,
        /** An inner REQUIRED step writes and marks the transaction rollback-only: nothing of it may commit. */
        INNER_ROLLBACK_ONLY,
        /** The driver's own connection unwrapped (as for pgjdbc's CopyManager), the claim deleted through it. */
        UNWRAPPED_DELETE_CLAIM,
        /** The driver's own connection unwrapped, a ledger row written through it (it commits with the claim). */
        UNWRAPPED_CREDIT,
        /** A synchronization whose beforeCommit writes a ledger row (it must commit with the claim). */
        BEFORE_COMMIT_CREDIT,
        /** A synchronization, run after once's in beforeCommit, that fails: the commit must not happen. */
        BEFORE_COMMIT_FAIL,
        /** A synchronization that only hears of the commit (an event listener's): no reason not to fold. */
        AFTER_COMMIT_NOTE,
        /** An outbox row through the injected OnceOutbox: it commits with the delivery, or not at all. */
        OUTBOX,
        /**
         * An outbox row through the injected OnceOutbox inside a REQUIRES_NEW step: it commits with that step,
         * whatever the delivery does (once's state of the listener's transaction must be set aside meanwhile).
         */
        REQUIRES_NEW_OUTBOX,
        /** A write that breaks a deferred unique constraint: the COMMIT itself fails. */
        DEFERRED_VIOLATION,
        THROW;

        boolean poisons() {
            return this == FAIL_CAUGHT
                    || this == DELETE_CLAIM
                    || this == RAW_ROLLBACK
                    || this == INNER_ROLLBACK_ONLY
                    || this == UNWRAPPED_DELETE_CLAIM
                    || this == BEFORE_COMMIT_FAIL
                    || this == DEFERRED_VIOLATION
                    || this == THROW;
        }

        boolean credits() {
            return this == CREDIT || this == NESTED_CREDIT || this == BEFORE_COMMIT_CREDIT || this == UNWRAPPED_CREDIT;
        }
    }

    /**
     * One delivery: its body's steps, and whether it goes through the listener that claims at commit
     * (the same consumer, as in a rolling deploy that switches the setting), whose body runs for a copy
     * too and must leave nothing of it. That listener's steps never delete the claim: with the claim at
     * commit there is none to check before the commit, and a copy's body deleting the committed claim
     * would let its own commit apply again; the annotation's contract forbids touching once's tables.
     */
    record Delivery(String eventId, List<Step> steps, boolean atCommit) {
        boolean poisoned() {
            return steps.stream().anyMatch(Step::poisons);
        }

        long credits() {
            return steps.stream().filter(Step::credits).count();
        }

        long count(Step step) {
            return steps.stream().filter(s -> s == step).count();
        }
    }

    static TestDatabase db;
    static AnnotationConfigApplicationContext context;
    static JdbcTemplate jdbc;
    static Body body;
    static final List<String> statements = new CopyOnWriteArrayList<>();
    static final List<String> committedNotes = new CopyOnWriteArrayList<>();
    static final List<String> outcomes = new CopyOnWriteArrayList<>();
    /**
     * REQUIRES_NEW_OUTBOX steps whose inner transaction committed, per event, counted by the body when the step
     * returned (a step after a caught failure may not get that far: the listener's aborted transaction refuses
     * the next statement).
     */
    static final Map<String, Long> separateRowsCommitted = new java.util.concurrent.ConcurrentHashMap<>();

    @BeforeContainer
    static void start() {
        db = TestPostgres.shared().freshDatabase(2);
        db.execute("CREATE TABLE ledger (event_id text NOT NULL, step text NOT NULL)");
        db.execute("CREATE TABLE note (event_id text NOT NULL, step text NOT NULL)");
        db.execute(
                "CREATE TABLE once_per_tx (k text, CONSTRAINT once_per_tx_k UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)");
        context = new AnnotationConfigApplicationContext(Config.class);
        jdbc = context.getBean(JdbcTemplate.class);
        body = context.getBean(Body.class);
    }

    @AfterContainer
    static void stop() {
        if (context != null) {
            context.close();
        }
        if (db != null) {
            db.close();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    static class Config {
        @Bean
        DataSource dataSource() {
            return recording(db.dataSource());
        }

        @Bean
        JdbcTransactionManager transactionManager(DataSource ds) {
            return new JdbcTransactionManager(ds);
        }

        @Bean
        JdbcTemplate jdbcTemplate(DataSource ds) {
            return new JdbcTemplate(ds);
        }

        @Bean
        OnceSpring once(DataSource ds, JdbcTransactionManager tm) {
            return OnceSpring.builder()
                    .dataSource(ds)
                    .transactionManager(tm)
                    .outcomeListener((d, o) -> outcomes.add(d.eventId() + " " + o.status()))
                    .build();
        }

        @Bean
        Body body(JdbcTemplate jdbc, JdbcTransactionManager tm, DataSource ds, Inner inner, OnceSpring once) {
            Body b = new Body(jdbc, tm, ds);
            b.inner = inner;
            b.outbox = once.outbox();
            return b;
        }

        @Bean
        Inner inner(JdbcTemplate jdbc) {
            return new Inner(jdbc);
        }
    }

    /** A listener of another consumer that a body calls, as a service another listener reuses. */
    public static class Inner {
        final JdbcTemplate jdbc;

        Inner(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @IdempotentListener(consumer = "inner", eventId = "#p0")
        public void credit(String eventId) {
            jdbc.update("INSERT INTO ledger VALUES (?, 'inner')", eventId);
        }
    }

    /** The listener: runs the delivery's steps on the transaction Spring opened for it. */
    public static class Body {
        final JdbcTemplate jdbc;
        final TransactionTemplate nested;
        final TransactionTemplate required;
        final TransactionTemplate requiresNew;
        final DataSource ds;
        Inner inner;
        OnceOutbox outbox;

        Body(JdbcTemplate jdbc, JdbcTransactionManager tm, DataSource ds) {
            this.jdbc = jdbc;
            this.nested = new TransactionTemplate(tm);
            this.nested.setPropagationBehavior(TransactionDefinition.PROPAGATION_NESTED);
            this.required = new TransactionTemplate(tm);
            this.requiresNew = new TransactionTemplate(tm);
            this.requiresNew.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRES_NEW);
            this.ds = ds;
        }

        @IdempotentListener(consumer = "hostile", eventId = "#p0")
        public void on(String eventId, Step[] steps) throws SQLException {
            run(eventId, steps);
        }

        @IdempotentListener(consumer = "hostile", eventId = "#p0", claimTiming = ClaimTiming.AT_COMMIT)
        public void onAtCommit(String eventId, Step[] steps) throws SQLException {
            run(eventId, steps);
        }

        /** Credits, then calls another consumer's listener with the same event, in this listener's transaction. */
        @IdempotentListener(consumer = "hostile", eventId = "#p0")
        public void creditThenCallInner(String eventId, boolean innerThrows) {
            credit(eventId, "outer");
            inner.credit(eventId);
            if (innerThrows) {
                throw new IllegalStateException("the outer body fails after the inner listener applied");
            }
        }

        /** Credits, then waits for the other copy to have credited too, so both claims meet at the commit. */
        @IdempotentListener(consumer = "hostile", eventId = "#p0", claimTiming = ClaimTiming.AT_COMMIT)
        public void creditThenMeet(String eventId, CyclicBarrier meet) throws Exception {
            credit(eventId, "met");
            meet.await(30, TimeUnit.SECONDS);
        }

        private void run(String eventId, Step[] steps) throws SQLException {
            for (int i = 0; i < steps.length; i++) {
                String at = i + ":" + steps[i];
                switch (steps[i]) {
                    case CREDIT -> credit(eventId, at);
                    case FAIL_CAUGHT -> {
                        try {
                            jdbc.queryForObject("SELECT 1 / 0", Integer.class);
                        } catch (DataAccessException expected) {
                            // swallowed: the body goes on in an aborted transaction
                        }
                    }
                    case NESTED_FAIL -> {
                        try {
                            nested.executeWithoutResult(s -> {
                                credit(eventId, at + " undone");
                                throw new IllegalStateException("nested step fails");
                            });
                        } catch (IllegalStateException expected) {
                            // the step is given up with its savepoint
                        }
                    }
                    case NESTED_CREDIT -> nested.executeWithoutResult(s -> credit(eventId, at));
                    case REQUIRES_NEW_NOTE ->
                        requiresNew.executeWithoutResult(
                                s -> jdbc.update("INSERT INTO note VALUES (?, ?)", eventId, at));
                    case RAW_SAVEPOINT_GHOST -> {
                        Connection c = DataSourceUtils.getConnection(ds);
                        Savepoint sp = c.setSavepoint();
                        credit(eventId, at + " ghost");
                        c.rollback(sp);
                        c.releaseSavepoint(sp);
                    }
                    case DELETE_CLAIM -> jdbc.update("DELETE FROM once_inbox WHERE event_id = ?", eventId);
                    case RAW_ROLLBACK -> {
                        try {
                            jdbc.execute("ROLLBACK");
                        } catch (RuntimeException refused) {
                            // swallowed: the body goes on as if it had not tried
                        }
                    }
                    case INNER_ROLLBACK_ONLY ->
                        required.executeWithoutResult(s -> {
                            credit(eventId, at + " inner");
                            s.setRollbackOnly();
                        });
                    case UNWRAPPED_DELETE_CLAIM ->
                        throughTheDriver("DELETE FROM once_inbox WHERE event_id = ?", eventId);
                    case UNWRAPPED_CREDIT -> throughTheDriver("INSERT INTO ledger VALUES (?, '" + at + "')", eventId);
                    case BEFORE_COMMIT_CREDIT ->
                        TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                            @Override
                            public void beforeCommit(boolean readOnly) {
                                credit(eventId, at);
                            }
                        });
                    case BEFORE_COMMIT_FAIL ->
                        TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                            @Override
                            public int getOrder() {
                                return Ordered.LOWEST_PRECEDENCE;
                            }

                            @Override
                            public void beforeCommit(boolean readOnly) {
                                throw new IllegalStateException("a beforeCommit step fails");
                            }
                        });
                    case AFTER_COMMIT_NOTE ->
                        TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                            @Override
                            public void afterCommit() {
                                committedNotes.add(eventId);
                            }
                        });
                    case OUTBOX -> outbox.add("topic", eventId + ":body", new byte[] {1}, Map.of(), at + ":" + eventId);
                    case REQUIRES_NEW_OUTBOX -> {
                        requiresNew.executeWithoutResult(s -> {
                            try {
                                outbox.add(
                                        "topic",
                                        eventId + ":new",
                                        new byte[] {1},
                                        Map.of(),
                                        UUID.randomUUID().toString());
                            } catch (SQLException e) {
                                throw new IllegalStateException(e);
                            }
                        });
                        separateRowsCommitted.merge(eventId, 1L, Long::sum);
                    }
                    case DEFERRED_VIOLATION -> {
                        String k = UUID.randomUUID().toString();
                        jdbc.update("INSERT INTO once_per_tx VALUES (?), (?)", k, k);
                    }
                    case THROW -> throw new IllegalStateException("the body fails");
                }
            }
        }

        /** Runs {@code sql} on the driver's own connection, unwrapped from the one Spring's transaction holds. */
        private void throughTheDriver(String sql, String eventId) throws SQLException {
            Connection driver =
                    (Connection) DataSourceUtils.getConnection(ds).unwrap(org.postgresql.PGConnection.class);
            try (var ps = driver.prepareStatement(sql)) {
                ps.setString(1, eventId);
                ps.executeUpdate();
            }
        }

        private void credit(String eventId, String step) {
            jdbc.update("INSERT INTO ledger VALUES (?, ?)", eventId, step);
        }
    }

    /** Through the listener's proxy, as the container calls it. */
    private static void deliver(Delivery d) throws SQLException {
        Step[] steps = d.steps().toArray(Step[]::new);
        if (d.atCommit()) {
            body.onAtCommit(d.eventId(), steps);
        } else {
            body.on(d.eventId(), steps);
        }
    }

    @Provide
    Arbitrary<List<Delivery>> deliveries() {
        Arbitrary<List<Step>> steps = Arbitraries.of(Step.class)
                .list()
                .ofMaxSize(4)
                // poisoned bodies less often than clean ones, so that most events get applied
                .filter(s -> s.stream().filter(Step::poisons).count() <= 1);
        Arbitrary<Delivery> one = Combinators.combine(
                        Arbitraries.of("e1", "e2", "e3"), steps, Arbitraries.of(false, true))
                .as(Delivery::new)
                .filter(d -> !d.atCommit()
                        || (!d.steps().contains(Step.DELETE_CLAIM)
                                && !d.steps().contains(Step.UNWRAPPED_DELETE_CLAIM)));
        return one.list().ofMinSize(1).ofMaxSize(8);
    }

    @Property(tries = 60)
    void everyDeliveryEndsAsItsStepsSay(@ForAll("deliveries") List<Delivery> deliveries) {
        jdbc.update("DELETE FROM ledger");
        jdbc.update("DELETE FROM once_inbox");
        jdbc.update("DELETE FROM once_outbox");
        Map<String, Delivery> applied = new HashMap<>();
        separateRowsCommitted.clear();
        for (Delivery d : deliveries) {
            boolean duplicate = applied.containsKey(d.eventId());
            outcomes.clear();
            if (duplicate || !d.poisoned()) {
                assertThatCode(() -> deliver(d))
                        .as("%s after %s: acknowledged", d, applied.keySet())
                        .doesNotThrowAnyException();
                applied.putIfAbsent(d.eventId(), d);
            } else {
                assertThatThrownBy(() -> deliver(d))
                        .as("%s: not acknowledged", d)
                        .isNotNull();
            }
            assertThat(outcomes)
                    .as("what the outcome listener heard of %s (applied before: %s)", d, duplicate)
                    .hasSize(1)
                    .allMatch(o -> o.startsWith(d.eventId() + " "));
            assertThat(outcomes.get(0).endsWith(" APPLIED"))
                    .as("%s is reported APPLIED (heard: %s) exactly when its work committed", d, outcomes)
                    .isEqualTo(!duplicate && !d.poisoned());
            for (String e : List.of("e1", "e2", "e3")) {
                Delivery first = applied.get(e);
                assertThat(jdbc.queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, e))
                        .as("ledger rows of %s after %s (applied by %s)", e, d, first)
                        .isEqualTo(first == null ? 0 : first.credits());
                assertThat(jdbc.queryForObject("SELECT count(*) FROM once_inbox WHERE event_id = ?", Long.class, e))
                        .as("claims of %s after %s", e, d)
                        .isEqualTo(first == null ? 0 : 1);
                assertThat(jdbc.queryForObject(
                                "SELECT count(*) FROM once_outbox WHERE msg_key = ?", Long.class, e + ":body"))
                        .as("outbox rows of %s's applied body after %s", e, d)
                        .isEqualTo(first == null ? 0 : first.count(Step.OUTBOX));
                assertThat(jdbc.queryForObject(
                                "SELECT count(*) FROM once_outbox WHERE msg_key = ?", Long.class, e + ":new"))
                        .as("outbox rows of %s's REQUIRES_NEW steps after %s", e, d)
                        .isEqualTo(separateRowsCommitted.getOrDefault(e, 0L));
            }
        }
    }

    /**
     * The default listener transaction (JdbcTransactionManager, nothing else due before the commit) sends
     * the claim, the body's statements and the COMMIT, as a hand-written listener does: the body ran
     * confined to once's guarded connection, which saw nothing that could cost the claim, so there is no
     * check. When the guard saw something (a caught failure, a savepoint of the body's own) or another
     * synchronization's beforeCommit is due, the check is back.
     */
    @Example
    void theDefaultListenerSendsNoCheckWhenItsGuardSawEverything() throws SQLException {
        jdbc.update("DELETE FROM once_inbox");
        statements.clear();
        body.on("confined", new Step[] {Step.CREDIT});
        assertThat(statements).hasSize(2);
        assertThat(statements.get(0)).contains("INSERT INTO").contains("once_inbox");
        assertThat(statements.get(1)).startsWith("INSERT INTO ledger");
        statements.clear();
        body.on("noted", new Step[] {Step.CREDIT, Step.AFTER_COMMIT_NOTE});
        assertThat(statements)
                .as("a synchronization that only hears of the commit changes nothing")
                .hasSize(2);
        assertThat(committedNotes).contains("noted");
        statements.clear();
        body.on("nested", new Step[] {Step.CREDIT, Step.NESTED_FAIL});
        assertThat(statements)
                .as("a NESTED step rolled back to its savepoint, seen by the guard: it cannot undo the claim made"
                        + " before it")
                .noneMatch(s -> s.startsWith("SELECT 1 / count(*)"));
        statements.clear();
        body.on("unwrapped", new Step[] {Step.CREDIT, Step.UNWRAPPED_CREDIT});
        assertThat(statements)
                .as("the body took the driver's own connection: the check is back, folded with the COMMIT")
                .last()
                .asString()
                .startsWith("SELECT 1 / count(*)")
                .endsWith("; COMMIT");
        statements.clear();
        body.on("alone", new Step[] {Step.CREDIT, Step.BEFORE_COMMIT_CREDIT});
        assertThat(statements)
                .as("another synchronization's beforeCommit is due: the check is a statement of its own")
                .noneMatch(s -> s.endsWith("; COMMIT"))
                .anyMatch(s -> s.startsWith("SELECT 1 / count(*)"));
    }

    /**
     * In a transaction of its own the default listener's claim is the transaction's first statement, so it
     * is the plain insert (cheaper on the server than ON CONFLICT): a copy's insert fails on the inbox's
     * key, its transaction rolls back and the copy is acknowledged as a duplicate. In a caller's
     * transaction the claim keeps ON CONFLICT: a duplicate there must leave the caller's work standing.
     */
    @Example
    void inItsOwnTransactionACopysPlainClaimFailsAndTheCopyIsAcknowledged() throws SQLException {
        jdbc.update("DELETE FROM once_inbox");
        jdbc.update("DELETE FROM ledger");
        statements.clear();
        body.on("plain", new Step[] {Step.CREDIT});
        assertThat(statements.get(0)).contains("once_inbox").doesNotContain("ON CONFLICT");
        assertThatCode(() -> body.on("plain", new Step[] {Step.CREDIT}))
                .as("a copy is acknowledged")
                .doesNotThrowAnyException();
        assertThat(outcomes).containsSubsequence("plain APPLIED", "plain DUPLICATE");
        TransactionTemplate caller = new TransactionTemplate(context.getBean(JdbcTransactionManager.class));
        caller.executeWithoutResult(s -> {
            jdbc.update("INSERT INTO ledger VALUES ('callers-own', 'work')");
            statements.clear();
            try {
                body.on("plain", new Step[] {Step.CREDIT});
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            assertThat(statements.get(0)).contains("once_inbox").contains("ON CONFLICT DO NOTHING");
        });
        assertThat(jdbc.queryForList("SELECT event_id FROM ledger ORDER BY event_id", String.class))
                .as("one credit, and the caller's own row, which the duplicate inside its transaction left standing")
                .containsExactly("callers-own", "plain");
    }

    /**
     * The listener that claims at commit sends the body's statements and then the claim with the COMMIT:
     * two round trips where the default makes three; a copy's claim finds the id taken, its body's write
     * rolls back, and it is acknowledged after one read of the inbox.
     */
    @Example
    void theClaimAtCommitRidesInTheCommitsRoundTrip() throws SQLException {
        jdbc.update("DELETE FROM once_inbox");
        jdbc.update("DELETE FROM ledger");
        statements.clear();
        body.onAtCommit("at-commit", new Step[] {Step.CREDIT});
        assertThat(statements).hasSize(2);
        assertThat(statements.get(0)).startsWith("INSERT INTO ledger");
        assertThat(statements.get(1)).contains("once_inbox").endsWith("; COMMIT");
        statements.clear();
        assertThatCode(() -> body.onAtCommit("at-commit", new Step[] {Step.CREDIT}))
                .as("a copy is acknowledged")
                .doesNotThrowAnyException();
        assertThat(statements).hasSize(3).last().asString().startsWith("SELECT event_id FROM");
        assertThat(outcomes)
                .as("what the metrics and the outcome listener hear")
                .containsSubsequence("at-commit APPLIED", "at-commit DUPLICATE");
        assertThat(jdbc.queryForObject("SELECT count(*) FROM ledger WHERE event_id = 'at-commit'", Long.class))
                .isEqualTo(1);
    }

    /**
     * Two copies whose bodies both ran before either claimed: one commits, the other's claim waits for it,
     * finds the id taken, rolls its credit back and is acknowledged. Round after round.
     */
    @Example
    void copiesAtOnceApplyOnce() throws Exception {
        jdbc.update("DELETE FROM once_inbox");
        jdbc.update("DELETE FROM ledger");
        var pool = java.util.concurrent.Executors.newFixedThreadPool(2);
        try {
            for (int round = 0; round < 20; round++) {
                String id = "met-" + round;
                CyclicBarrier meet = new CyclicBarrier(2);
                var a = pool.submit(() -> {
                    body.creditThenMeet(id, meet);
                    return null;
                });
                var b = pool.submit(() -> {
                    body.creditThenMeet(id, meet);
                    return null;
                });
                a.get(60, TimeUnit.SECONDS);
                b.get(60, TimeUnit.SECONDS); // both acknowledged: neither threw
                assertThat(jdbc.queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, id))
                        .as("credits of %s", id)
                        .isEqualTo(1);
                assertThat(jdbc.queryForObject("SELECT count(*) FROM once_inbox WHERE event_id = ?", Long.class, id))
                        .isEqualTo(1);
            }
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * A confined body that calls another consumer's listener: the inner claim and credit run on the outer's
     * guarded connection and commit with it (the outer's check runs: its guard saw the inner claim name the
     * inbox); when the outer body then fails, both roll back; copies of either are duplicates afterwards.
     */
    @Example
    void aListenerCalledFromAConfinedBodyCommitsWithIt() {
        jdbc.update("DELETE FROM once_inbox");
        jdbc.update("DELETE FROM ledger");
        assertThatThrownBy(() -> body.creditThenCallInner("nest", true)).isNotNull();
        assertThat(jdbc.queryForObject("SELECT count(*) FROM ledger", Long.class))
                .isZero();
        assertThat(jdbc.queryForObject("SELECT count(*) FROM once_inbox", Long.class))
                .isZero();
        body.creditThenCallInner("nest", false);
        body.creditThenCallInner("nest", false);
        context.getBean(Inner.class).credit("nest");
        assertThat(jdbc.queryForList("SELECT step FROM ledger ORDER BY step", String.class))
                .containsExactly("inner", "outer");
        assertThat(jdbc.queryForList("SELECT consumer FROM once_inbox ORDER BY consumer", String.class))
                .containsExactly("hostile", "inner");
    }

    /**
     * Inside a transaction the caller began, the listener that claims at commit claims first: a copy found
     * at the caller's commit would roll the caller's own work back.
     */
    @Example
    void inTheCallersTransactionTheClaimComesFirst() {
        jdbc.update("DELETE FROM once_inbox");
        jdbc.update("DELETE FROM ledger");
        TransactionTemplate caller = new TransactionTemplate(context.getBean(JdbcTransactionManager.class));
        caller.executeWithoutResult(s -> {
            jdbc.update("INSERT INTO ledger VALUES ('callers-own', 'work')");
            statements.clear();
            try {
                body.onAtCommit("joined", new Step[] {Step.CREDIT});
                body.onAtCommit("joined", new Step[] {Step.CREDIT});
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
            assertThat(statements.get(0)).contains("once_inbox").contains("ON CONFLICT DO NOTHING");
        });
        assertThat(jdbc.queryForObject("SELECT count(*) FROM ledger", Long.class))
                .as("the caller's row and one credit")
                .isEqualTo(2);
    }

    /**
     * A listener whose COMMIT fails (a deferred constraint the body broke) is not acknowledged, and the outcome
     * listener hears it was not applied: in the transaction of its own that once commits without a
     * synchronization of its own with Spring, and when the body registered one (Spring tells once then).
     */
    @Example
    void aListenerWhoseCommitFailsIsReportedNotApplied() {
        jdbc.update("DELETE FROM once_inbox");
        for (Step[] steps : List.of(
                new Step[] {Step.CREDIT, Step.DEFERRED_VIOLATION},
                new Step[] {Step.CREDIT, Step.DEFERRED_VIOLATION, Step.AFTER_COMMIT_NOTE})) {
            outcomes.clear();
            assertThatThrownBy(() -> body.on("deferred", steps)).isInstanceOf(DataAccessException.class);
            assertThat(outcomes).as("%s", List.of(steps)).containsExactly("deferred FAILED_RETRYABLE");
        }
        assertThat(committedNotes).doesNotContain("deferred");
        assertThat(jdbc.queryForObject("SELECT count(*) FROM once_inbox", Long.class))
                .isZero();
    }

    /** A DataSource whose connections record the SQL of every statement they prepare. */
    static DataSource recording(DataSource target) {
        InvocationHandler ds = (proxy, method, args) -> {
            Object result = invoke(target, method, args);
            if (result instanceof Connection c) {
                return Proxy.newProxyInstance(
                        HostileListenerBodyTest.class.getClassLoader(),
                        new Class<?>[] {Connection.class},
                        (p, m, a) -> {
                            if (m.getName().startsWith("prepare") && a != null && a[0] instanceof String sql) {
                                statements.add(sql);
                            }
                            return invoke(c, m, a);
                        });
            }
            return result;
        };
        return (DataSource) Proxy.newProxyInstance(
                HostileListenerBodyTest.class.getClassLoader(), new Class<?>[] {DataSource.class}, ds);
    }

    private static Object invoke(Object target, java.lang.reflect.Method m, Object[] args) throws Throwable {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}
