package dev.once.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import javax.sql.DataSource;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.Transformer;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.orm.jpa.LocalContainerEntityManagerFactoryBean;
import org.springframework.orm.jpa.vendor.HibernateJpaVendorAdapter;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.transaction.support.DefaultTransactionDefinition;

/**
 * The caller's Spring transaction as a state machine (issue 19): random sequences of begin with
 * propagation REQUIRED, NESTED or REQUIRES_NEW, commit, rollback and setRollbackOnly on the innermost
 * scope, {@link OnceOutbox#add} (one message, or more than the writer buffers), and {@code process}/{@code processBatch} of a consumer that joins the
 * transaction (a handler writing a ledger row and an outbox row), fresh events and redeliveries, with an
 * outcome listener, through {@code DataSourceTransactionManager} ({@code JdbcTransactionManager}) and
 * {@code JpaTransactionManager} (Hibernate) on PostgreSQL (MariaDB: the subclass). The oracle is the input: a model replays
 * Spring's propagation rules on the scopes; what committed must be applied once, its outbox rows
 * present once and its processing reported APPLIED once; what rolled back (a whole transaction or a
 * NESTED step) must be absent and reported once as not applied. Tries per transaction manager:
 * {@value #TRIES} (CI); {@code -Donce.springTx.tries=N} runs N chains in each try.
 */
class SpringCallerTransactionPropertyTest {

    static final int TRIES = 15;
    static final int REPEATS = Integer.getInteger("once.springTx.tries", 1);
    static final AtomicLong sequences = new AtomicLong();

    private static TestDatabase db;
    private static Setup jdbcSetup;
    private static Setup jpaSetup;
    private static LocalContainerEntityManagerFactoryBean emf;

    @AfterContainer
    static void stop() {
        if (emf != null) {
            emf.destroy();
        }
        if (db != null) {
            db.close();
        }
        // A subclass on another database runs after this container in the same JVM: it starts afresh.
        emf = null;
        db = null;
        jdbcSetup = null;
        jpaSetup = null;
        System.out.println("SpringCallerTransactionPropertyTest: sequences=" + sequences.getAndSet(0)
                + " lost=0 phantom=0 wrong_outcomes=0");
    }

    /** One transaction manager with its OnceSpring, consumer and the outcomes heard. */
    record Setup(PlatformTransactionManager tm, OnceSpring once, IdempotentConsumer consumer, List<String> heard) {
        static Setup of(PlatformTransactionManager tm, DataSource ds) {
            List<String> heard = new ArrayList<>();
            OnceSpring once = OnceSpring.builder()
                    .dataSource(ds)
                    .transactionManager(tm)
                    .outcomeListener((d, o) -> heard.add(d.eventId() + "=" + o.tag()))
                    .build();
            JdbcTemplate jdbc = new JdbcTemplate(ds);
            IdempotentConsumer consumer = once.consumer("prop", (d, tx) -> {
                jdbc.update("INSERT INTO ledger VALUES (?)", d.eventId());
                tx.outbox().add("effects", d.eventId(), d.payload(), Map.of(), null);
            });
            return new Setup(tm, once, consumer, heard);
        }
    }

    /** The database the properties run on; {@link SpringCallerTransactionPropertyMariaDbTest} overrides it. */
    TestDatabase freshDatabase() {
        return TestPostgres.shared().freshDatabase(6);
    }

    private void database() {
        if (db == null) {
            db = freshDatabase();
            db.execute("CREATE TABLE ledger (event_id varchar(200) NOT NULL)");
        }
    }

    @Property(tries = TRIES)
    void dataSourceTransactionManager(@ForAll("chains") ActionChain<World> chain) {
        database();
        if (jdbcSetup == null) {
            jdbcSetup = Setup.of(new JdbcTransactionManager(db.dataSource()), db.dataSource());
        }
        run(chain, jdbcSetup);
    }

    /** Without NESTED: Hibernate's JpaDialect offers no savepoints on this setup ("JpaDialect does not support savepoints"). */
    @Property(tries = TRIES)
    void jpaTransactionManager(@ForAll("jpaChains") ActionChain<World> chain) {
        database();
        if (jpaSetup == null) {
            emf = new LocalContainerEntityManagerFactoryBean();
            emf.setDataSource(db.dataSource());
            emf.setPackagesToScan(dev.once.spring.jpa.Payment.class.getPackageName());
            emf.setJpaVendorAdapter(new HibernateJpaVendorAdapter());
            emf.afterPropertiesSet();
            JpaTransactionManager tm = new JpaTransactionManager(emf.getObject());
            jpaSetup = Setup.of(tm, db.dataSource());
        }
        run(chain, jpaSetup);
    }

    private static void run(ActionChain<World> chain, Setup setup) {
        for (int i = 0; i < REPEATS; i++) {
            World.next = new World(setup);
            World w = chain.run();
            w.end();
            w.check();
            sequences.incrementAndGet();
        }
    }

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        return moves(true);
    }

    @Provide
    Arbitrary<ActionChain<World>> jpaChains() {
        return moves(false);
    }

    private static Arbitrary<ActionChain<World>> moves(boolean nested) {
        net.jqwik.api.state.ActionChainArbitrary<World> chain = ActionChain.<World>startWith(() -> World.next)
                .withAction(3, when(w -> w.scopes.size() < 5, "begin REQUIRED", w -> w.begin(Kind.REQUIRED)));
        if (nested) {
            // Spring refuses a savepoint in a transaction already marked rollback-only
            chain = chain.withAction(
                    3,
                    when(
                            w -> w.scopes.size() < 5 && (w.scopes.isEmpty() || !w.scopes.peek().physical.rollbackOnly),
                            "begin NESTED",
                            w -> w.begin(Kind.NESTED)));
        }
        return chain.withAction(
                        2, when(w -> w.scopes.size() < 5, "begin REQUIRES_NEW", w -> w.begin(Kind.REQUIRES_NEW)))
                .withAction(4, when(w -> !w.scopes.isEmpty(), "process", World::process))
                .withAction(1, when(w -> !w.scopes.isEmpty(), "processBatch", World::processBatch))
                .withAction(
                        1, when(w -> !w.scopes.isEmpty() && w.redeliverable() != null, "redeliver", World::redeliver))
                .withAction(3, when(w -> !w.scopes.isEmpty(), "OnceOutbox.add", World::add))
                .withAction(1, when(w -> !w.scopes.isEmpty(), "OnceOutbox.add past the threshold", World::addMany))
                .withAction(3, when(w -> !w.scopes.isEmpty(), "commit", World::commit))
                .withAction(2, when(w -> !w.scopes.isEmpty(), "rollback", World::rollback))
                .withAction(1, when(w -> !w.scopes.isEmpty(), "setRollbackOnly", World::setRollbackOnly))
                .withMaxTransformations(30);
    }

    private static Action<World> when(Predicate<World> pre, String name, java.util.function.Consumer<World> move) {
        return new Action.Independent<>() {
            @Override
            public boolean precondition(World w) {
                return pre.test(w);
            }

            @Override
            public Arbitrary<Transformer<World>> transformer() {
                return Arbitraries.just(Transformer.mutate(name, move));
            }
        };
    }

    enum Kind {
        REQUIRED(TransactionDefinition.PROPAGATION_REQUIRED),
        NESTED(TransactionDefinition.PROPAGATION_NESTED),
        REQUIRES_NEW(TransactionDefinition.PROPAGATION_REQUIRES_NEW);

        final int propagation;

        Kind(int propagation) {
            this.propagation = propagation;
        }
    }

    /** What one physical transaction is marked with, and the outcomes it reports when it ends. */
    static final class Physical {
        boolean rollbackOnly;
        // events a rollback to a savepoint undid: reported as not applied when this transaction ends,
        // never before (JoinedTransaction's rule), so after any REQUIRES_NEW transaction that ends first
        final List<String> undone = new ArrayList<>();
    }

    /** One scope the caller opened: a physical transaction, a participation in one, or a savepoint. */
    static final class Scope {
        final TransactionStatus status;
        final Physical physical;
        final boolean newPhysical;
        final boolean savepoint;
        final List<String> items = new ArrayList<>(); // "e:<id>" processed, "m:<key>" outbox message
        boolean localRollbackOnly;

        Scope(TransactionStatus status, Physical physical, boolean newPhysical, boolean savepoint) {
            this.status = status;
            this.physical = physical;
            this.newPhysical = newPhysical;
            this.savepoint = savepoint;
        }
    }

    static final class World {
        static World next;
        static final AtomicLong ids = new AtomicLong();

        final Setup setup;
        final Deque<Scope> scopes = new ArrayDeque<>();
        final List<String> moves = new ArrayList<>();
        // the oracle: per event id, the outcomes it must be reported with, in order; what stands
        final Map<String, List<String>> expectedHeard = new TreeMap<>();
        final Map<String, Integer> committed = new HashMap<>(); // item -> times committed
        final List<String> rolledBackEvents = new ArrayList<>();
        final int heardBefore;

        World(Setup setup) {
            this.setup = setup;
            this.heardBefore = setup.heard().size();
        }

        String fresh(String prefix) {
            return prefix + "-" + ids.incrementAndGet();
        }

        void begin(Kind kind) {
            moves.add("begin " + kind);
            DefaultTransactionDefinition def = new DefaultTransactionDefinition(kind.propagation);
            TransactionStatus status = setup.tm().getTransaction(def);
            Scope top = scopes.peek();
            boolean newPhysical = top == null || kind == Kind.REQUIRES_NEW;
            boolean savepoint = top != null && kind == Kind.NESTED;
            assertThat(status.isNewTransaction()).as("%s", moves).isEqualTo(newPhysical);
            assertThat(status.hasSavepoint()).as("%s", moves).isEqualTo(savepoint);
            scopes.push(new Scope(status, newPhysical ? new Physical() : top.physical, newPhysical, savepoint));
        }

        void process() {
            String id = fresh("e");
            moves.add("process " + id);
            setup.consumer().process(Delivery.of(id, id));
            scopes.peek().items.add("e:" + id);
        }

        void processBatch() {
            List<Delivery> batch = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                String id = fresh("b");
                batch.add(Delivery.of(id, id));
            }
            moves.add("processBatch " + batch.stream().map(Delivery::eventId).toList());
            setup.consumer().processBatch(batch);
            for (Delivery d : batch) {
                scopes.peek().items.add("e:" + d.eventId());
            }
        }

        /** An id whose processing ended (committed or rolled back), never one an open transaction holds. */
        String redeliverable() {
            if (!rolledBackEvents.isEmpty()) {
                return rolledBackEvents.get(rolledBackEvents.size() - 1);
            }
            for (String item : committed.keySet()) {
                if (item.startsWith("e:")) {
                    return item.substring(2);
                }
            }
            return null;
        }

        void redeliver() {
            String id = redeliverable();
            moves.add("redeliver " + id);
            setup.consumer().process(Delivery.of(id, id));
            if (committed.containsKey("e:" + id)) {
                expectedHeard.computeIfAbsent(id, k -> new ArrayList<>()).add("duplicate");
            } else {
                rolledBackEvents.remove(id);
                scopes.peek().items.add("e:" + id);
            }
        }

        void add() {
            String key = fresh("m");
            moves.add("OnceOutbox.add " + key);
            try {
                setup.once().outbox().add("messages", key, key.getBytes(StandardCharsets.UTF_8), Map.of(), null);
            } catch (java.sql.SQLException e) {
                throw new IllegalStateException(e);
            }
            scopes.peek().items.add("m:" + key);
            allMessages.add("m:" + key);
        }

        /**
         * {@link dev.once.Outbox#FLUSH_ROWS} + 1 messages under one key: the writer writes the first ones now and
         * buffers the last, so a rollback to a savepoint finds rows of the writer both written and buffered.
         */
        void addMany() {
            String key = fresh("many");
            moves.add("OnceOutbox.add " + MANY + " x " + key);
            byte[] payload = key.getBytes(StandardCharsets.UTF_8);
            try {
                for (int i = 0; i < MANY; i++) {
                    setup.once().outbox().add("messages", key, payload, Map.of(), null);
                }
            } catch (java.sql.SQLException e) {
                throw new IllegalStateException(e);
            }
            scopes.peek().items.add("M:" + key);
            allMessages.add("M:" + key);
        }

        static final int MANY = dev.once.Outbox.FLUSH_ROWS + 1;

        void setRollbackOnly() {
            moves.add("setRollbackOnly");
            Scope top = scopes.peek();
            top.status.setRollbackOnly();
            top.localRollbackOnly = true;
        }

        void commit() {
            moves.add("commit");
            Scope top = scopes.pop();
            boolean threw = false;
            try {
                setup.tm().commit(top.status);
            } catch (UnexpectedRollbackException e) {
                threw = true;
            }
            // Spring's rules (AbstractPlatformTransactionManager.commit / processRollback)
            if (top.newPhysical) {
                boolean rollsBack = top.localRollbackOnly || top.physical.rollbackOnly;
                assertThat(threw).as("%s", moves).isEqualTo(!top.localRollbackOnly && top.physical.rollbackOnly);
                reportUndone(top.physical);
                end(top.items, !rollsBack);
            } else if (top.savepoint) {
                if (top.localRollbackOnly || top.physical.rollbackOnly) {
                    undo(top); // rolled back to the savepoint
                    top.physical.rollbackOnly = false; // which resets the connection's rollback-only mark
                } else {
                    scopes.peek().items.addAll(top.items);
                }
            } else {
                if (top.localRollbackOnly) {
                    top.physical.rollbackOnly = true;
                }
                scopes.peek().items.addAll(top.items);
            }
        }

        void rollback() {
            moves.add("rollback");
            Scope top = scopes.pop();
            setup.tm().rollback(top.status);
            if (top.newPhysical) {
                reportUndone(top.physical);
                end(top.items, false);
            } else if (top.savepoint) {
                undo(top);
                top.physical.rollbackOnly = false; // rollback to a savepoint resets the rollback-only mark
            } else {
                top.physical.rollbackOnly = true; // a participant's rollback dooms the whole transaction
                scopes.peek().items.addAll(top.items);
            }
        }

        /**
         * A rollback to the scope's savepoint undid what it held: its events may be redelivered at once
         * (their claims are gone), and are reported when the physical transaction ends.
         */
        private void undo(Scope savepoint) {
            for (String item : savepoint.items) {
                if (item.startsWith("e:")) {
                    rolledBackEvents.add(item.substring(2));
                    savepoint.physical.undone.add(item);
                }
            }
        }

        /** The physical transaction ended: what rollbacks to its savepoints undid is reported now. */
        private void reportUndone(Physical physical) {
            for (String item : physical.undone) {
                expectedHeard
                        .computeIfAbsent(item.substring(2), k -> new ArrayList<>())
                        .add("failed_retryable");
            }
        }

        /** What a physical transaction held reached its end: committed for good, or undone. */
        private void end(List<String> items, boolean stands) {
            for (String item : items) {
                if (item.startsWith("e:")) {
                    String id = item.substring(2);
                    expectedHeard
                            .computeIfAbsent(id, k -> new ArrayList<>())
                            .add(stands ? "applied" : "failed_retryable");
                    if (!stands) {
                        rolledBackEvents.add(id);
                    }
                }
                if (stands) {
                    committed.merge(item, 1, Integer::sum);
                }
            }
        }

        /** Commits what is still open, innermost first. */
        void end() {
            while (!scopes.isEmpty()) {
                commit();
            }
        }

        void check() {
            JdbcTemplate jdbc = new JdbcTemplate(db.dataSource());
            String why = "after " + moves;
            for (var e : expectedHeard.entrySet()) {
                String id = e.getKey();
                long applied = committed.getOrDefault("e:" + id, 0);
                assertThat(applied).as("applied at most once: %s %s", id, why).isLessThanOrEqualTo(1);
                assertThat(jdbc.queryForObject("SELECT count(*) FROM ledger WHERE event_id = ?", Long.class, id))
                        .as("effect of %s applied exactly %d times %s", id, applied, why)
                        .isEqualTo(applied);
                assertThat(jdbc.queryForObject(
                                "SELECT count(*) FROM once_inbox WHERE consumer = 'prop' AND event_id = ?",
                                Long.class,
                                id))
                        .as("claim of %s %s", id, why)
                        .isEqualTo(applied);
                assertThat(jdbc.queryForObject("SELECT count(*) FROM once_outbox WHERE msg_key = ?", Long.class, id))
                        .as("outbox row of %s sent %d times (lost or phantom) %s", id, applied, why)
                        .isEqualTo(applied);
            }
            for (String item : allMessages) {
                String key = item.substring(2);
                assertThat(jdbc.queryForObject("SELECT count(*) FROM once_outbox WHERE msg_key = ?", Long.class, key))
                        .as("OnceOutbox message %s %s", key, why)
                        .isEqualTo((long) committed.getOrDefault(item, 0) * (item.startsWith("M:") ? MANY : 1));
            }
            Map<String, List<String>> heard = new TreeMap<>();
            for (String h : setup.heard().subList(heardBefore, setup.heard().size())) {
                int eq = h.indexOf('=');
                heard.computeIfAbsent(h.substring(0, eq), k -> new ArrayList<>())
                        .add(h.substring(eq + 1));
            }
            assertThat(heard)
                    .as("outcomes reported once each, as the transactions ended %s", why)
                    .isEqualTo(expectedHeard);
        }

        final List<String> allMessages = new ArrayList<>();
    }
}
