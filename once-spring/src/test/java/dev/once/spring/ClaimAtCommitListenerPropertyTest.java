package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariDataSource;
import dev.once.ClaimTiming;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
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
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * {@code @IdempotentListener(claimTiming = AT_COMMIT)} in the transaction the listener begins for each delivery,
 * against what a caller may do around it: generated deliveries of three events, each body a few steps (credit,
 * outbox row, a statement of its own that fails and is caught, a synchronization that watches the outcome, a write
 * that breaks a deferred constraint so the COMMIT itself is refused, a throw), each delivery possibly met by a
 * concurrent copy that holds the event's claim when this one's claim goes out and then commits, rolls back, or
 * outlives this delivery's connection, terminated on the server while its claim waits. The oracle comes from the
 * steps alone: a delivery applies when its event was not claimed, no copy committed, and its body is clean; only
 * then does it commit its credits and outbox rows, does a synchronization hear {@code afterCommit} and
 * {@code STATUS_COMMITTED}, and is the outcome APPLIED. It returns (the container acknowledges) exactly when it
 * applied or its event's claim was committed before its own claim went out; it throws otherwise, and leaves nothing.
 *
 * <p>And what it costs on the wire ({@link WireRoundTrips}): a fresh delivery's claim rides in the COMMIT's round
 * trip, two round trips where the claim-first listener makes three.
 */
class ClaimAtCommitListenerPropertyTest {

    static final String CONSUMER = "at-commit";
    static final List<String> EVENTS = List.of("e1", "e2", "e3");

    /** What a body does, in order. */
    enum Step {
        CREDIT,
        OUTBOX,
        /** A statement of the body's own fails; the body catches the SQLException and goes on. */
        CATCH_OWN_FAILURE,
        /** A synchronization that only watches: afterCommit, afterCompletion's status (the body's first step). */
        OBSERVE,
        /** A write that breaks a deferred unique constraint: the COMMIT is refused by the server. */
        DEFERRED_VIOLATION,
        THROW;

        /** The body never gets its claim sent and committed. */
        boolean poisons() {
            return this == CATCH_OWN_FAILURE || this == DEFERRED_VIOLATION || this == THROW;
        }

        /** The body fails before its claim goes out (no wait on a copy's claim). */
        boolean failsBeforeClaim() {
            return this == CATCH_OWN_FAILURE || this == THROW;
        }
    }

    /** A copy of the event in another transaction, holding the event's claim when this delivery starts. */
    enum Copy {
        NONE,
        /** Commits once this delivery's claim waits for it (or once this delivery ended, if it never claims). */
        COMMITS,
        /** Rolls back likewise. */
        ROLLS_BACK,
        /** This delivery's connection is terminated while its claim waits; the copy then rolls back. */
        KILLS_WAITER
    }

    record Delivery(String eventId, List<Step> steps, Copy copy) {
        boolean poisoned() {
            return steps.stream().anyMatch(Step::poisons);
        }

        boolean reachesClaim() {
            return steps.stream().noneMatch(Step::failsBeforeClaim);
        }

        long count(Step step) {
            return steps.stream().filter(s -> s == step).count();
        }
    }

    static TestDatabase db;
    static HikariDataSource wire;
    static AnnotationConfigApplicationContext context;
    static JdbcTemplate jdbc;
    static Listener listener;
    static final List<String> outcomes = new CopyOnWriteArrayList<>();
    static final List<String> heard = new CopyOnWriteArrayList<>();
    static ExecutorService caller;

    @BeforeContainer
    static void start() {
        db = TestPostgres.shared().freshDatabase(2);
        db.execute("CREATE TABLE ledger (event_id text NOT NULL, step text NOT NULL)");
        db.execute(
                "CREATE TABLE once_per_tx (k text, CONSTRAINT once_per_tx_k UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)");
        wire = WireRoundTrips.dataSource(db.dataSource(), 4);
        context = new AnnotationConfigApplicationContext(Config.class);
        jdbc = context.getBean(JdbcTemplate.class);
        listener = context.getBean(Listener.class);
        caller = Executors.newSingleThreadExecutor();
    }

    @AfterContainer
    static void stop() {
        if (caller != null) {
            caller.shutdownNow();
        }
        if (context != null) {
            context.close();
        }
        if (wire != null) {
            wire.close();
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
            return wire;
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
        Listener listener(JdbcTemplate jdbc, DataSource ds, OnceSpring once) {
            return new Listener(jdbc, ds, once.outbox());
        }
    }

    /** The listeners: the same body, the claim at commit or first. */
    public static class Listener {
        final JdbcTemplate jdbc;
        final DataSource ds;
        final OnceOutbox outbox;

        Listener(JdbcTemplate jdbc, DataSource ds, OnceOutbox outbox) {
            this.jdbc = jdbc;
            this.ds = ds;
            this.outbox = outbox;
        }

        @IdempotentListener(consumer = CONSUMER, eventId = "#p0", claimTiming = ClaimTiming.AT_COMMIT)
        public void atCommit(String eventId, Step[] steps) throws SQLException {
            run(eventId, steps);
        }

        @IdempotentListener(consumer = "first", eventId = "#p0")
        public void claimFirst(String eventId, Step[] steps) throws SQLException {
            run(eventId, steps);
        }

        private void run(String eventId, Step[] steps) throws SQLException {
            for (int i = 0; i < steps.length; i++) {
                String at = i + ":" + steps[i];
                switch (steps[i]) {
                    case CREDIT -> jdbc.update("INSERT INTO ledger VALUES (?, ?)", eventId, at);
                    case OUTBOX ->
                        outbox.add(
                                "topic",
                                eventId,
                                new byte[] {1},
                                Map.of(),
                                UUID.randomUUID().toString());
                    case CATCH_OWN_FAILURE -> {
                        try (Statement s = DataSourceUtils.getConnection(ds).createStatement()) {
                            s.execute("SELECT 1 / 0");
                        } catch (SQLException expected) {
                            // caught: the body goes on in an aborted transaction
                        }
                    }
                    case OBSERVE ->
                        TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                            @Override
                            public void afterCommit() {
                                heard.add(eventId + " afterCommit");
                            }

                            @Override
                            public void afterCompletion(int status) {
                                heard.add(eventId + " afterCompletion " + status);
                            }
                        });
                    case DEFERRED_VIOLATION -> {
                        String k = UUID.randomUUID().toString();
                        jdbc.update("INSERT INTO once_per_tx VALUES (?), (?)", k, k);
                    }
                    case THROW -> throw new IllegalStateException("the body fails");
                }
            }
        }
    }

    @Provide
    Arbitrary<List<Delivery>> deliveries() {
        Arbitrary<List<Step>> steps = Arbitraries.of(Step.class)
                .filter(s -> s != Step.OBSERVE)
                .list()
                .ofMaxSize(4)
                // poisoned bodies less often than clean ones, so that most events get applied
                .filter(s -> s.stream().filter(Step::poisons).count() <= 1);
        Arbitrary<Copy> copy = Arbitraries.frequencyOf(
                net.jqwik.api.Tuple.of(4, Arbitraries.just(Copy.NONE)),
                net.jqwik.api.Tuple.of(1, Arbitraries.just(Copy.COMMITS)),
                net.jqwik.api.Tuple.of(1, Arbitraries.just(Copy.ROLLS_BACK)),
                net.jqwik.api.Tuple.of(1, Arbitraries.just(Copy.KILLS_WAITER)));
        return Combinators.combine(Arbitraries.of(EVENTS), Arbitraries.of(false, true), steps, copy)
                // a synchronization registered first: steps after a caught failure may not run (the aborted
                // transaction refuses their statements), this one always does
                .as((e, observed, s, c) -> new Delivery(e, observed ? withObserverFirst(s) : s, c))
                .list()
                .ofMinSize(1)
                .ofMaxSize(8);
    }

    private static List<Step> withObserverFirst(List<Step> steps) {
        List<Step> all = new ArrayList<>(steps.size() + 1);
        all.add(Step.OBSERVE);
        all.addAll(steps);
        return all;
    }

    @Property(tries = 40)
    void everyDeliveryEndsAsItsStepsAndItsCopySay(@ForAll("deliveries") List<Delivery> deliveries) throws Exception {
        jdbc.update("DELETE FROM ledger");
        jdbc.update("DELETE FROM once_inbox");
        jdbc.update("DELETE FROM once_outbox");
        // per event: the delivery that applied it, or a copy (then no body's writes): absent while unclaimed
        Map<String, Delivery> appliedBy = new HashMap<>();
        Map<String, Boolean> claimed = new HashMap<>();
        for (Delivery d : deliveries) {
            boolean before = claimed.getOrDefault(d.eventId(), false);
            // a copy can only hold a claim nobody committed
            Copy copy = before ? Copy.NONE : d.copy();
            boolean copyCommitted = copy == Copy.COMMITS;
            boolean applies = !before && !d.poisoned() && (copy == Copy.NONE || copy == Copy.ROLLS_BACK);
            // committed before this delivery's claim went out: a copy that commits meets its waiting claim
            boolean acknowledged = applies || before || (copyCommitted && d.reachesClaim());
            outcomes.clear();
            heard.clear();
            Throwable thrown = deliver(d, copy);
            String what = d + " (claimed before: " + before + ", copy: " + copy + ")";
            assertThat(thrown == null)
                    .as(
                            "%s returns (the container acknowledges) exactly when it applied or a copy had; thrown: %s",
                            what, thrown)
                    .isEqualTo(acknowledged);
            if (applies) {
                appliedBy.put(d.eventId(), d);
            }
            if (applies || copyCommitted) {
                claimed.put(d.eventId(), true);
            }
            assertThat(outcomes)
                    .as("what the outcome listener heard of %s", what)
                    .hasSize(1);
            assertThat(outcomes.get(0))
                    .as("what the outcome listener heard of %s", what)
                    .isIn(
                            applies
                                    ? List.of(d.eventId() + " APPLIED")
                                    : acknowledged
                                            ? List.of(d.eventId() + " DUPLICATE")
                                            : List.of(
                                                    d.eventId() + " FAILED_RETRYABLE",
                                                    d.eventId() + " FAILED_PERMANENT"));
            if (d.count(Step.OBSERVE) > 0) {
                assertThat(heard)
                        .as("what the body's synchronization heard of %s", what)
                        .containsExactlyElementsOf(
                                applies
                                        ? List.of(
                                                d.eventId() + " afterCommit",
                                                d.eventId() + " afterCompletion "
                                                        + TransactionSynchronization.STATUS_COMMITTED)
                                        : List.of(d.eventId() + " afterCompletion "
                                                + (heard.toString()
                                                                        .contains("afterCompletion "
                                                                                + TransactionSynchronization
                                                                                        .STATUS_UNKNOWN)
                                                                && copy == Copy.KILLS_WAITER
                                                        ? TransactionSynchronization.STATUS_UNKNOWN
                                                        : TransactionSynchronization.STATUS_ROLLED_BACK)));
            }
            for (String e : EVENTS) {
                Delivery first = appliedBy.get(e);
                assertThat(count("SELECT count(*) FROM ledger WHERE event_id = ?", e))
                        .as("ledger rows of %s after %s (applied by %s)", e, what, first)
                        .isEqualTo(first == null ? 0 : first.count(Step.CREDIT));
                assertThat(count("SELECT count(*) FROM once_outbox WHERE msg_key = ?", e))
                        .as("outbox rows of %s after %s (applied by %s)", e, what, first)
                        .isEqualTo(first == null ? 0 : first.count(Step.OUTBOX));
                assertThat(count("SELECT count(*) FROM once_inbox WHERE event_id = ?", e))
                        .as("claims of %s after %s", e, what)
                        .isEqualTo(claimed.getOrDefault(e, false) ? 1 : 0);
            }
        }
    }

    private static long count(String sql, String eventId) {
        return jdbc.queryForObject(sql, Long.class, eventId);
    }

    /**
     * Calls the listener with {@code d} on the caller's thread, {@code copy} holding the event's claim meanwhile;
     * returns what the call threw, or null.
     */
    private static Throwable deliver(Delivery d, Copy copy) throws Exception {
        Step[] steps = d.steps().toArray(Step[]::new);
        try (Connection holder = copy == Copy.NONE ? null : db.dataSource().getConnection();
                Connection watch = db.dataSource().getConnection()) {
            int holderPid = 0;
            if (holder != null) {
                holder.setAutoCommit(false);
                try (PreparedStatement ps = holder.prepareStatement(
                        "INSERT INTO once_inbox (consumer, event_id, processed_at) VALUES (?, ?, now())")) {
                    ps.setString(1, CONSUMER);
                    ps.setString(2, d.eventId());
                    ps.executeUpdate();
                }
                holderPid = pid(holder);
            }
            Future<?> call = caller.submit(() -> {
                listener.atCommit(d.eventId(), steps);
                return null;
            });
            if (holder != null) {
                int held = holderPid;
                Integer[] waiter = new Integer[1];
                await().atMost(Duration.ofSeconds(60))
                        .pollInterval(Duration.ofMillis(5))
                        .until(() -> call.isDone() || (waiter[0] = waiterOn(watch, held)) != null);
                if (waiter[0] != null && copy == Copy.KILLS_WAITER) {
                    try (PreparedStatement ps = watch.prepareStatement("SELECT pg_terminate_backend(?)")) {
                        ps.setInt(1, waiter[0]);
                        ps.execute();
                    }
                }
                if (copy == Copy.COMMITS) {
                    holder.commit();
                } else {
                    holder.rollback();
                }
            }
            try {
                call.get(60, TimeUnit.SECONDS);
                return null;
            } catch (java.util.concurrent.ExecutionException e) {
                return e.getCause();
            }
        }
    }

    private static int pid(Connection c) throws SQLException {
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT pg_backend_pid()")) {
            rs.next();
            return rs.getInt(1);
        }
    }

    // The backend whose statement waits for the holder's lock (the listener's claim), or null.
    private static Integer waiterOn(Connection watch, int holderPid) throws SQLException {
        try (PreparedStatement ps =
                watch.prepareStatement("SELECT pid FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))")) {
            ps.setInt(1, holderPid);
            try (ResultSet rs = ps.executeQuery()) {
                return rs.next() ? rs.getInt(1) : null;
            }
        }
    }

    /**
     * A fresh delivery's claim rides in the COMMIT's round trip: the body's statement (with the BEGIN), then the
     * claim and the COMMIT; the claim-first listener makes three. Counted on the wire, the pool's validation of an
     * idle connection (an empty query) left out.
     */
    @Example
    void aFreshDeliveryMakesTwoRoundTripsWithTheClaimInTheCommits() throws SQLException {
        for (int i = 0; i < 8; i++) { // past pgjdbc's prepareThreshold: statements the server has prepared
            WireRoundTrips.reset();
            listener.atCommit("trips-" + i, new Step[] {Step.CREDIT});
            List<String> trips = statements();
            assertThat(trips)
                    .as("round trips of fresh delivery %s: %s", i, trips)
                    .hasSize(2);
            assertThat(trips.get(0))
                    .as("the first: BEGIN and the body's statement")
                    .contains("BEGIN");
            assertThat(trips.get(1)).as("the second: the claim and the COMMIT").startsWith("2 statements");
            if (!trips.get(1).equals("2 statements")) { // the SQL text travels until the server has it prepared
                assertThat(trips.get(1)).contains("once_inbox").endsWith("COMMIT");
            }
            WireRoundTrips.reset();
            listener.claimFirst("trips-" + i, new Step[] {Step.CREDIT});
            assertThat(statements())
                    .as("the claim-first listener's round trips")
                    .hasSize(3);
        }
    }

    // this thread's round trips, without the pool's validation of an idle connection (pgjdbc's isValid: an empty query)
    private static List<String> statements() {
        return WireRoundTrips.trips().stream()
                .filter(t -> !t.equals("1 statement: "))
                .toList();
    }
}
