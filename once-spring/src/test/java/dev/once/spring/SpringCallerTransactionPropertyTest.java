package dev.once.spring;

import static dev.once.testsupport.StateMachines.move;
import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.spring.SpringScopes.End;
import dev.once.spring.SpringScopes.Ended;
import dev.once.spring.SpringScopes.Kind;
import dev.once.spring.SpringScopes.Physical;
import dev.once.spring.SpringScopes.Scope;
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
import javax.sql.DataSource;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.ActionChain;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.support.Acknowledgment;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.orm.jpa.LocalContainerEntityManagerFactoryBean;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.UnexpectedRollbackException;

/**
 * The caller's Spring transaction as a state machine (issue 19): random sequences of begin with
 * propagation REQUIRED, NESTED or REQUIRES_NEW, commit, rollback and setRollbackOnly on the innermost
 * scope, {@link OnceOutbox#add} (one message, or more than the writer buffers), and {@code process}/{@code processBatch} of a consumer that joins the
 * transaction (a handler writing a ledger row and an outbox row), fresh events and redeliveries, with an
 * outcome listener, through {@code DataSourceTransactionManager} ({@code JdbcTransactionManager}) and
 * {@code JpaTransactionManager} (Hibernate) on PostgreSQL (MariaDB: the subclass). The oracle is the input: a model replays
 * Spring's propagation rules on the scopes; what committed must be applied once, its outbox rows
 * present once and its processing reported APPLIED once; what rolled back (a whole transaction or a
 * NESTED step) must be absent and reported once as not applied. Kafka {@link IdempotentListener} methods (a
 * record listener and a batch listener, each taking an {@code Acknowledgment}) called in the caller's scopes
 * with records read from a real Kafka topic, as a container running them in its transaction (or a
 * {@code @Transactional} around them) does: fresh records, records whose body fails after acknowledging, and
 * copies of records applied in an ended transaction or in the open one. Their effects follow the same oracle,
 * and every acknowledgement must find the records' claims committed when it is made (an acknowledgement before
 * the commit loses the record when the transaction then rolls back), and a call whose records committed must be
 * acknowledged. Tries per transaction manager:
 * {@value #TRIES} (CI); {@code -Donce.springTx.tries=N} runs N chains in each try.
 */
class SpringCallerTransactionPropertyTest {

    static final int TRIES = 15;
    static final int REPEATS = Integer.getInteger("once.springTx.tries", 1);
    static final AtomicLong sequences = new AtomicLong();
    // ordered runs: moved the stream, refused, failed fast (a suspended transaction holds the stream)
    static final AtomicLong moved = new AtomicLong();
    static final AtomicLong refusals = new AtomicLong();
    static final AtomicLong failFast = new AtomicLong();
    // calls with a claim a suspended transaction held: in progress at once
    static final AtomicLong heldInProgress = new AtomicLong();

    private static TestDatabase db;
    private static Setup jdbcSetup;
    private static Setup jpaSetup;
    private static LocalContainerEntityManagerFactoryBean emf;

    @AfterContainer
    static void stop() {
        for (Setup s : new Setup[] {jdbcSetup, jpaSetup}) {
            if (s != null) {
                s.context().close();
            }
        }
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
                + " lost=0 phantom=0 wrong_outcomes=0 runs_moved=" + moved.getAndSet(0) + " refused="
                + refusals.getAndSet(0) + " failed_fast=" + failFast.getAndSet(0) + " held_in_progress="
                + heldInProgress.getAndSet(0));
    }

    /** One transaction manager with its OnceSpring, consumer, Kafka listeners and the outcomes heard. */
    record Setup(
            PlatformTransactionManager tm,
            OnceSpring once,
            IdempotentConsumer consumer,
            IdempotentConsumer own,
            List<String> heard,
            Listeners listeners,
            AnnotationConfigApplicationContext context) {
        static Setup of(PlatformTransactionManager tm, DataSource ds, jakarta.persistence.EntityManagerFactory emf) {
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
                String payload = new String(d.payload(), StandardCharsets.UTF_8);
                if (payload.startsWith("s|")) {
                    // an ordered run's delivery: its stream and position, in the order applied
                    String[] at = payload.split("\\|");
                    jdbc.update(
                            "INSERT INTO ordered_effect (event_id, stream, position) VALUES (?, ?, ?)",
                            d.eventId(),
                            at[1],
                            Long.parseLong(at[2]));
                }
            });
            AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext();
            context.registerBean(OnceSpring.class, () -> once);
            context.registerBean(Listeners.class, () -> new Listeners(jdbc, once.outbox(), emf));
            context.register(ListenerConfig.class);
            context.refresh();
            return new Setup(tm, once, consumer, own(ds, heard), heard, context.getBean(Listeners.class), context);
        }

        /**
         * The same consumer as an engine of its own transactions on the DataSource (never Spring's), reporting to
         * {@code heard}; its connections wait 5 s at most for a lock (a self-deadlock fails the chain, not hangs).
         */
        private static IdempotentConsumer own(DataSource ds, List<String> heard) {
            DataSource waitsLittle = new org.springframework.jdbc.datasource.DelegatingDataSource(ds) {
                @Override
                public java.sql.Connection getConnection() throws java.sql.SQLException {
                    java.sql.Connection c = super.getConnection();
                    try (java.sql.Statement st = c.createStatement()) {
                        st.execute(maria ? "SET SESSION innodb_lock_wait_timeout = 5" : "SET lock_timeout = '5s'");
                    }
                    return c;
                }
            };
            return IdempotentConsumer.builder()
                    .dataSource(waitsLittle)
                    .consumer("prop")
                    .outcomeListener((d, o) -> heard.add(d.eventId() + "=" + o.tag()))
                    .handler((d, tx) -> {
                        java.sql.Connection c = tx.connection();
                        try (java.sql.PreparedStatement ps = c.prepareStatement("INSERT INTO ledger VALUES (?)")) {
                            ps.setString(1, d.eventId());
                            ps.executeUpdate();
                        }
                        tx.outbox().add("effects", d.eventId(), d.payload(), Map.of(), null);
                        String[] at = new String(d.payload(), StandardCharsets.UTF_8).split("\\|");
                        try (java.sql.PreparedStatement ps = c.prepareStatement(
                                "INSERT INTO ordered_effect (event_id, stream, position) VALUES (?, ?, ?)")) {
                            ps.setString(1, d.eventId());
                            ps.setString(2, at[1]);
                            ps.setLong(3, Long.parseLong(at[2]));
                            ps.executeUpdate();
                        }
                    })
                    .build();
        }
    }

    @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
    @EnableIdempotentListeners
    static class ListenerConfig {}

    /**
     * Kafka listeners as an application writes them: a ledger row, an outbox row and (with JPA) an entity per
     * record, acknowledging first; a record whose value is {@code fail} then fails. Never started by a container
     * here ({@code autoStartup = "false"}, no {@code @EnableKafka}): the moves call them in the caller's scopes.
     */
    public static class Listeners {
        final JdbcTemplate jdbc;
        final OnceOutbox outbox;
        final jakarta.persistence.EntityManagerFactory emf;

        Listeners(JdbcTemplate jdbc, OnceOutbox outbox, jakarta.persistence.EntityManagerFactory emf) {
            this.jdbc = jdbc;
            this.outbox = outbox;
            this.emf = emf;
        }

        @KafkaListener(topics = "caller-tx", autoStartup = "false")
        @IdempotentListener(consumer = "prop")
        public void on(ConsumerRecord<String, String> record, Acknowledgment ack) throws java.sql.SQLException {
            ack.acknowledge(); // deferred by once: takes effect after the commit, never when it rolls back
            apply(record);
        }

        @KafkaListener(topics = "caller-tx-batch", autoStartup = "false")
        @IdempotentListener(consumer = "prop")
        public void onBatch(List<ConsumerRecord<String, String>> records, Acknowledgment ack)
                throws java.sql.SQLException {
            ack.acknowledge();
            for (ConsumerRecord<String, String> r : records) {
                apply(r);
            }
        }

        private void apply(ConsumerRecord<String, String> r) throws java.sql.SQLException {
            String id = KafkaRecords.eventId(r);
            jdbc.update("INSERT INTO ledger VALUES (?)", id);
            outbox.add("effects", id, r.value().getBytes(StandardCharsets.UTF_8), Map.of(), null);
            if (emf != null) {
                org.springframework.orm.jpa.EntityManagerFactoryUtils.getTransactionalEntityManager(emf)
                        .persist(new dev.once.spring.jpa.Payment(id, 1));
            }
            if (r.value().equals("fail")) {
                throw new IllegalStateException("the body of " + id + " fails");
            }
        }
    }

    /**
     * Records read from a real Kafka topic (the test kit's shared broker): {@value #CHUNK} sent with an event id
     * each (every fifth one's value {@code fail}) and read back whenever the ones read are used up.
     */
    static final class KafkaRecords {
        static final int CHUNK = 200;
        private static String topic;
        private static long sent;
        private static final Deque<ConsumerRecord<String, String>> ok = new ArrayDeque<>();
        private static final Deque<ConsumerRecord<String, String>> failing = new ArrayDeque<>();

        static String eventId(ConsumerRecord<String, String> r) {
            return new String(r.headers().lastHeader("once-event-id").value(), StandardCharsets.UTF_8);
        }

        static ConsumerRecord<String, String> next(boolean fails) {
            Deque<ConsumerRecord<String, String>> from = fails ? failing : ok;
            if (from.isEmpty()) {
                read();
            }
            return from.poll();
        }

        private static void read() {
            var kafka = dev.once.testkit.kafka.TestKafka.shared();
            if (topic == null) {
                topic = kafka.createTopic("caller-tx", 1);
            }
            Map<String, Object> producer = Map.of(
                    org.apache.kafka.clients.producer.ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                    kafka.bootstrapServers());
            var ser = new org.apache.kafka.common.serialization.StringSerializer();
            long from = sent;
            try (var p = new org.apache.kafka.clients.producer.KafkaProducer<>(producer, ser, ser)) {
                for (int i = 0; i < CHUNK; i++) {
                    long n = sent++;
                    var r = new org.apache.kafka.clients.producer.ProducerRecord<>(
                            topic, "k", n % 5 == 4 ? "fail" : "ok");
                    r.headers()
                            .add("once-event-id", ("k-" + topic.hashCode() + "-" + n).getBytes(StandardCharsets.UTF_8));
                    p.send(r);
                }
            }
            Map<String, Object> consumer = Map.of(
                    org.apache.kafka.clients.consumer.ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                    kafka.bootstrapServers());
            var de = new org.apache.kafka.common.serialization.StringDeserializer();
            var partition = new org.apache.kafka.common.TopicPartition(topic, 0);
            try (var c = new org.apache.kafka.clients.consumer.KafkaConsumer<>(consumer, de, de)) {
                c.assign(List.of(partition));
                c.seek(partition, from);
                int read = 0;
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (read < CHUNK && System.nanoTime() < deadline) {
                    for (ConsumerRecord<String, String> r : c.poll(java.time.Duration.ofMillis(200))) {
                        read++;
                        (r.value().equals("fail") ? failing : ok).add(r);
                    }
                }
                assertThat(read).as("records read back from %s", topic).isEqualTo(CHUNK);
            }
        }
    }

    /** The database the properties run on; {@link SpringCallerTransactionPropertyMariaDbTest} overrides it. */
    TestDatabase freshDatabase() {
        return TestPostgres.shared().freshDatabase(6);
    }

    /** True on MariaDB. */
    boolean mariaDb() {
        return false;
    }

    private void database() {
        if (db == null) {
            db = freshDatabase();
            maria = mariaDb();
            db.execute(
                    "CREATE TABLE ledger (event_id varchar(200) NOT NULL)",
                    "CREATE TABLE payment (id varchar(200) PRIMARY KEY, amount bigint NOT NULL)",
                    "CREATE TABLE ordered_effect (seq " + (maria ? "bigint AUTO_INCREMENT" : "bigserial")
                            + " PRIMARY KEY, event_id varchar(200) NOT NULL, stream varchar(200) NOT NULL,"
                            + " position bigint NOT NULL)");
        }
    }

    static boolean maria;

    @Property(tries = TRIES)
    void dataSourceTransactionManager(@ForAll("chains") ActionChain<World> chain) {
        database();
        if (jdbcSetup == null) {
            jdbcSetup = Setup.of(new JdbcTransactionManager(db.dataSource()), db.dataSource(), null);
        }
        run(chain, jdbcSetup);
    }

    /**
     * Ordered runs among savepoints: the moves of {@link #dataSourceTransactionManager} that decide which stream
     * row locks the open transactions hold (begin REQUIRED / NESTED / REQUIRES_NEW, commit, rollback,
     * setRollbackOnly, runs in the caller's scopes and in the engine's own transactions), denser than there: a
     * run in a NESTED scope rolled back to its savepoint, then a run of the same stream in a REQUIRES_NEW
     * transaction or in the engine's own.
     */
    @Property(tries = TRIES)
    void orderedRunsAmongSavepoints(@ForAll("orderedChains") ActionChain<World> chain) {
        database();
        if (jdbcSetup == null) {
            jdbcSetup = Setup.of(new JdbcTransactionManager(db.dataSource()), db.dataSource(), null);
        }
        run(chain, jdbcSetup);
    }

    @Provide
    Arbitrary<ActionChain<World>> orderedChains() {
        return ActionChain.<World>startWith(() -> World.next)
                .withAction(2, move(w -> w.scopes.size() < 5, "begin REQUIRED", w -> w.begin(Kind.REQUIRED)))
                .withAction(
                        3,
                        move(
                                w -> w.scopes.size() < 5
                                        && (w.scopes.isEmpty() || !w.scopes.top().physical.rollbackOnly),
                                "begin NESTED",
                                w -> w.begin(Kind.NESTED)))
                .withAction(3, move(w -> w.scopes.size() < 5, "begin REQUIRES_NEW", w -> w.begin(Kind.REQUIRES_NEW)))
                .withAction(5, move(w -> !w.scopes.isEmpty(), runs(), "processInOrder", World::inOrder))
                .withAction(
                        1,
                        move(
                                w -> !w.scopes.isEmpty() && !w.runs.isEmpty(),
                                copies(),
                                "processInOrder: a copy",
                                World::copy))
                .withAction(
                        2,
                        move(
                                w -> !w.scopes.isEmpty(),
                                runs(),
                                "processInOrder in the engine's own transactions",
                                World::inOrderOwned))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "process", World::process))
                .withAction(3, move(w -> !w.scopes.isEmpty(), "commit", World::commit))
                .withAction(3, move(w -> !w.scopes.isEmpty(), "rollback", World::rollback))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "setRollbackOnly", World::setRollbackOnly))
                .withMaxTransformations(25);
    }

    /** Without NESTED: Hibernate's JpaDialect offers no savepoints on this setup ("JpaDialect does not support savepoints"). */
    @Property(tries = TRIES)
    void jpaTransactionManager(@ForAll("jpaChains") ActionChain<World> chain) {
        database();
        if (jpaSetup == null) {
            emf = TestJpaBeans.paymentEntities(db.dataSource());
            emf.afterPropertiesSet();
            JpaTransactionManager tm = new JpaTransactionManager(emf.getObject());
            jpaSetup = Setup.of(tm, db.dataSource(), emf.getObject());
        }
        run(chain, jpaSetup);
    }

    private static void run(ActionChain<World> chain, Setup setup) {
        for (int i = 0; i < REPEATS; i++) {
            World.next = new World(setup);
            try {
                World w = chain.run();
                w.end();
                w.check();
            } finally {
                World.next.abandon();
            }
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
                .withAction(3, move(w -> w.scopes.size() < 5, "begin REQUIRED", w -> w.begin(Kind.REQUIRED)));
        if (nested) {
            // Spring refuses a savepoint in a transaction already marked rollback-only
            chain = chain.withAction(
                    3,
                    move(
                            w -> w.scopes.size() < 5 && (w.scopes.isEmpty() || !w.scopes.top().physical.rollbackOnly),
                            "begin NESTED",
                            w -> w.begin(Kind.NESTED)));
        }
        return chain.withAction(
                        2, move(w -> w.scopes.size() < 5, "begin REQUIRES_NEW", w -> w.begin(Kind.REQUIRES_NEW)))
                .withAction(4, move(w -> !w.scopes.isEmpty(), "process", World::process))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "processBatch", World::processBatch))
                .withAction(
                        1, move(w -> !w.scopes.isEmpty() && w.redeliverable() != null, "redeliver", World::redeliver))
                .withAction(
                        1,
                        move(
                                w -> w.suspendedClaim() != null,
                                "process: a copy whose claim a suspended transaction holds",
                                World::processHeld))
                .withAction(
                        1,
                        move(
                                w -> w.suspendedClaim() != null,
                                "processBatch with a copy whose claim a suspended transaction holds",
                                World::processBatchHeld))
                .withAction(
                        1,
                        move(
                                w -> w.suspendedRecord() != null,
                                "Kafka listener: a copy whose claim a suspended transaction holds",
                                World::relistenHeld))
                .withAction(3, move(w -> !w.scopes.isEmpty(), "Kafka listener", w -> w.listen(false)))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "Kafka listener failing", w -> w.listen(true)))
                .withAction(2, move(w -> !w.scopes.isEmpty(), "Kafka batch listener", w -> w.listenBatch(false)))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "Kafka batch listener failing", w -> w.listenBatch(true)))
                .withAction(
                        2,
                        move(
                                w -> !w.scopes.isEmpty() && w.relistenable() != null,
                                "Kafka listener: a copy",
                                World::relisten))
                .withAction(3, move(w -> !w.scopes.isEmpty(), runs(), "processInOrder", World::inOrder))
                .withAction(
                        2,
                        move(
                                w -> !w.scopes.isEmpty(),
                                runs(),
                                "processInOrder in the engine's own transactions",
                                World::inOrderOwned))
                .withAction(
                        2,
                        move(
                                w -> !w.scopes.isEmpty() && !w.runs.isEmpty(),
                                copies(),
                                "processInOrder: a copy",
                                World::copy))
                .withAction(3, move(w -> !w.scopes.isEmpty(), "OnceOutbox.add", World::add))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "OnceOutbox.add past the threshold", World::addMany))
                .withAction(3, move(w -> !w.scopes.isEmpty(), "commit", World::commit))
                .withAction(2, move(w -> !w.scopes.isEmpty(), "rollback", World::rollback))
                .withAction(1, move(w -> !w.scopes.isEmpty(), "setRollbackOnly", World::setRollbackOnly))
                .withMaxTransformations(30);
    }

    /**
     * An ordered run on stream {@code stream} of the chain's {@value World#STREAMS}: its first position {@code
     * offset} past where the stream stands as committed ({@code fromCommitted}) or as the open transaction sees it
     * (its own moves too); at or behind it (0 or less) the run is refused.
     */
    record RunArg(int stream, int offset, int length, boolean fromCommitted) {}

    /** A copy of the chain's {@code pick}-th run from the end, with {@code extra} fresh deliveries after it. */
    record CopyArg(int pick, int extra) {}

    private static Arbitrary<RunArg> runs() {
        return net.jqwik.api.Combinators.combine(
                        Arbitraries.integers().between(0, World.STREAMS - 1),
                        Arbitraries.of(-2, -1, 0, 1, 1, 1, 2),
                        Arbitraries.integers().between(1, 3),
                        Arbitraries.of(true, false))
                .as(RunArg::new);
    }

    private static Arbitrary<CopyArg> copies() {
        return net.jqwik.api.Combinators.combine(
                        Arbitraries.integers().between(0, 3),
                        Arbitraries.integers().between(0, 2))
                .as(CopyArg::new);
    }

    static final class World {
        static World next;
        static final AtomicLong ids = new AtomicLong();

        final Setup setup;
        final SpringScopes scopes;
        final List<String> moves = new ArrayList<>();
        // the oracle: per event id, the outcomes it must be reported with, in order; what stands
        final Map<String, List<String>> expectedHeard = new TreeMap<>();
        final Map<String, Integer> committed = new HashMap<>(); // item -> times committed
        final List<String> rolledBackEvents = new ArrayList<>();
        final int heardBefore;

        World(Setup setup) {
            this.setup = setup;
            this.scopes = new SpringScopes(setup.tm());
            this.heardBefore = setup.heard().size();
        }

        String fresh(String prefix) {
            return prefix + "-" + ids.incrementAndGet();
        }

        void begin(Kind kind) {
            moves.add("begin " + kind);
            Scope scope = scopes.begin(kind);
            if (scope.newPhysical) {
                // A lock this thread waits for that only this thread could release (a self-deadlock) fails the
                // chain after seconds rather than hanging it (PostgreSQL waits forever, MariaDB 50 s)
                new JdbcTemplate(db.dataSource())
                        .execute(maria ? "SET SESSION innodb_lock_wait_timeout = 5" : "SET LOCAL lock_timeout = '5s'");
            }
        }

        // Ordered runs: processInOrder with StreamPositions on the chain's streams, in the caller's scopes
        static final int STREAMS = 3;
        final String streamPrefix = "w" + ids.incrementAndGet() + "-";
        final long[] committedPosition = new long[STREAMS]; // 0: no row
        final List<Run> runs = new ArrayList<>();
        final Map<String, long[]> positionOf = new HashMap<>(); // event id -> {stream, position}
        // The stream row locks the open transactions hold. PostgreSQL: an item "l:<stream>" of the scope whose run
        // took it, so that it goes into the enclosing scope with a released savepoint, and is gone with a rollback
        // to the savepoint (the subtransaction's locks are released) or with the transaction's end. MariaDB: in
        // lockedToTheEnd, until the transaction ends (InnoDB keeps the lock of a row that existed past a rollback to
        // a savepoint; the engine keeps every stream lock so, conservative where the run inserted the row). Every
        // run with a fresh delivery takes it, a refused one too (PostgreSQL reads the stored position FOR UPDATE;
        // MariaDB's INSERT ... ON DUPLICATE KEY UPDATE locks the row it leaves as it was).
        final Map<Physical, java.util.Set<Integer>> lockedToTheEnd = new java.util.IdentityHashMap<>();

        /** One ordered run: its stream and, per delivery, the event id and the position. */
        record Run(int stream, List<String> ids, List<Long> positions) {}

        String stream(int s) {
            return streamPrefix + s;
        }

        /** Where the transaction {@code physical} sees stream {@code s}: committed, or moved by it since. */
        long visible(int s, Physical physical) {
            long at = committedPosition[s];
            for (Scope scope : scopes.open()) {
                if (scope.physical == physical) {
                    for (String item : scope.items) {
                        if (item.startsWith("p:" + s + ":")) {
                            at = Math.max(at, Long.parseLong(item.substring(item.lastIndexOf(':') + 1)));
                        }
                    }
                }
            }
            return at;
        }

        enum Claim {
            FREE,
            COMMITTED,
            OPEN,
            SUSPENDED
        }

        /** Where {@code id}'s claim stands, for the open transaction {@code physical}. */
        Claim claim(String id, Physical physical) {
            if (committed.containsKey("e:" + id)) {
                return Claim.COMMITTED;
            }
            for (Scope scope : scopes.open()) {
                if (scope.items.contains("e:" + id) || scope.items.contains("z:" + id)) {
                    return scope.physical == physical ? Claim.OPEN : Claim.SUSPENDED;
                }
            }
            return Claim.FREE;
        }

        void inOrder(RunArg a) {
            Physical physical = scopes.top().physical;
            long base = a.fromCommitted() ? committedPosition[a.stream()] : visible(a.stream(), physical);
            long first = Math.max(1, base + a.offset());
            List<String> ids = new ArrayList<>();
            List<Long> positions = new ArrayList<>();
            for (int i = 0; i < a.length(); i++) {
                ids.add(fresh("o"));
                positions.add(first + i);
            }
            run(new Run(a.stream(), ids, positions), "processInOrder");
        }

        void copy(CopyArg a) {
            Run of = runs.get(Math.max(0, runs.size() - 1 - a.pick()));
            List<String> ids = new ArrayList<>(of.ids());
            List<Long> positions = new ArrayList<>(of.positions());
            for (int i = 0; i < a.extra(); i++) {
                ids.add(fresh("o"));
                positions.add(positions.get(positions.size() - 1) + 1);
            }
            run(new Run(of.stream(), ids, positions), "processInOrder: a copy" + (a.extra() > 0 ? " and more" : ""));
        }

        /**
         * processInOrder of {@code run} in the innermost scope, its outcomes against the model: duplicates where
         * the claim stands, the first fresh delivery refused (the rest not run, the transaction rollback-only)
         * when the stream as the transaction sees it has reached it, else applied and the stream moved to the
         * run's last position in the transaction.
         */
        private void run(Run run, String what) {
            Scope top = scopes.top();
            Physical physical = top.physical;
            int s = run.stream();
            String desc = what + " " + stream(s) + " " + run.ids() + "@" + run.positions();
            List<Claim> claims =
                    run.ids().stream().map(id -> claim(id, physical)).toList();
            int firstFresh = claims.indexOf(Claim.FREE);
            boolean heldByOther = streamLocked(s, physical);
            runs.add(run);
            List<Delivery> deliveries = new ArrayList<>();
            for (int i = 0; i < run.ids().size(); i++) {
                String id = run.ids().get(i);
                positionOf.put(id, new long[] {s, run.positions().get(i)});
                deliveries.add(
                        Delivery.of(id, "s|" + stream(s) + "|" + run.positions().get(i)));
            }
            dev.once.StreamPositions positions = new dev.once.StreamPositions(
                    stream(s),
                    run.positions().stream().map(java.math.BigInteger::valueOf).toList());
            moves.add(desc);
            if (heldByOther) {
                // a suspended transaction holds the stream's row lock: waiting for it would never end
                failFast.incrementAndGet();
                Throwable thrown = call(() -> setup.consumer().processInOrder(deliveries, positions));
                assertThat(thrown)
                        .as("a run of a stream a suspended transaction moved fails fast %s", moves)
                        .isInstanceOf(IllegalStateException.class)
                        .hasMessageContaining(stream(s));
                return;
            }
            if (claims.contains(Claim.SUSPENDED)) {
                // a claim a suspended transaction holds could only be waited for: the whole run in progress
                inProgress(() -> setup.consumer().processInOrder(deliveries, positions), run.ids());
                return;
            }
            long seen = visible(s, physical);
            List<dev.once.Outcome> outcomes = setup.consumer().processInOrder(deliveries, positions);
            boolean refused = firstFresh >= 0 && run.positions().get(firstFresh) <= seen;
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < claims.size(); i++) {
                expected.add(
                        claims.get(i) != Claim.FREE
                                ? "duplicate"
                                : !refused ? "applied" : i == firstFresh ? "failed_permanent" : "failed_retryable");
            }
            assertThat(outcomes.stream().map(dev.once.Outcome::tag).toList())
                    .as(
                            "outcomes of %s, the stream at %d as the transaction sees it %s (failures %s)",
                            run.ids(),
                            seen,
                            moves,
                            outcomes.stream()
                                    .map(o -> String.valueOf(o.failure()))
                                    .toList())
                    .isEqualTo(expected);
            for (int i = 0; i < claims.size(); i++) {
                String id = run.ids().get(i);
                if (claims.get(i) == Claim.COMMITTED) {
                    duplicateOfEnded(id);
                } else if (claims.get(i) == Claim.OPEN) {
                    top.items.add("d:" + id);
                    openCopies.add(id);
                }
            }
            if (firstFresh < 0) {
                return; // nothing fresh: the fence does not run
            }
            if (maria) {
                lockedToTheEnd
                        .computeIfAbsent(physical, k -> new java.util.HashSet<>())
                        .add(s);
            } else {
                top.items.add("l:" + s);
            }
            List<String> fresh = new ArrayList<>();
            for (int i = firstFresh; i < claims.size(); i++) {
                if (claims.get(i) == Claim.FREE) {
                    fresh.add(run.ids().get(i));
                }
            }
            if (refused) {
                refusals.incrementAndGet();
                // reported when the transaction ends, whatever it does; their claims stay in it, doomed
                physical.undone.add("r:" + fresh.get(0));
                for (String id : fresh) {
                    if (!id.equals(fresh.get(0))) {
                        physical.undone.add("n:" + id);
                    }
                    top.items.add("z:" + id);
                }
                physical.rollbackOnly = true;
                assertThat(top.status.isRollbackOnly())
                        .as("a refusal marks the caller's transaction rollback-only %s", moves)
                        .isTrue();
                return;
            }
            for (String id : fresh) {
                top.items.add("e:" + id);
            }
            top.items.add("p:" + s + ":" + run.positions().get(run.positions().size() - 1));
            moved.incrementAndGet();
        }

        /**
         * Whether an open transaction of this thread other than {@code mine} (null: any, for an engine of its own
         * transactions) holds stream {@code s}'s row lock.
         */
        boolean streamLocked(int s, Physical mine) {
            for (Scope scope : scopes.open()) {
                if (scope.physical != mine
                        && (scope.items.contains("l:" + s)
                                || lockedToTheEnd
                                        .getOrDefault(scope.physical, java.util.Set.of())
                                        .contains(s))) {
                    return true;
                }
            }
            return false;
        }

        /**
         * processInOrder of fresh deliveries through an engine of its own transactions (a consumer built on the
         * DataSource, not joining Spring's) called inside the caller's scopes: while an open transaction of the
         * thread, the innermost one too, holds the stream's row lock, the engine's own transaction would wait for
         * a lock only this thread can release: it fails fast, nothing runs. Else it commits at once: applied and
         * the stream moved, or refused (the first failed for good, the rest held back) when the committed stream
         * reached the first.
         */
        void inOrderOwned(RunArg a) {
            int s = a.stream();
            long first = Math.max(1, committedPosition[s] + a.offset());
            List<String> ids = new ArrayList<>();
            List<Long> positions = new ArrayList<>();
            List<Delivery> deliveries = new ArrayList<>();
            for (int i = 0; i < a.length(); i++) {
                String id = fresh("w");
                ids.add(id);
                positions.add(first + i);
                deliveries.add(Delivery.of(id, "s|" + stream(s) + "|" + (first + i)));
            }
            dev.once.StreamPositions at = new dev.once.StreamPositions(
                    stream(s),
                    positions.stream().map(java.math.BigInteger::valueOf).toList());
            moves.add("processInOrder in the engine's own transactions " + stream(s) + " " + ids + "@" + positions);
            if (streamLocked(s, null)) {
                failFast.incrementAndGet();
                Throwable thrown = call(() -> setup.own().processInOrder(deliveries, at));
                assertThat(thrown)
                        .as(
                                "a run in the engine's own transaction of a stream an open transaction locked fails fast %s",
                                moves)
                        .isInstanceOf(IllegalStateException.class)
                        .hasMessageContaining(stream(s));
                return;
            }
            List<dev.once.Outcome> outcomes = setup.own().processInOrder(deliveries, at);
            boolean refused = first <= committedPosition[s];
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < ids.size(); i++) {
                expected.add(!refused ? "applied" : i == 0 ? "failed_permanent" : "failed_retryable");
            }
            assertThat(outcomes.stream().map(dev.once.Outcome::tag).toList())
                    .as(
                            "outcomes of %s in the engine's own transaction, the stream committed at %d %s",
                            ids, committedPosition[s], moves)
                    .isEqualTo(expected);
            runs.add(new Run(s, ids, positions));
            for (int i = 0; i < ids.size(); i++) {
                positionOf.put(ids.get(i), new long[] {s, positions.get(i)});
                expectedHeard
                        .computeIfAbsent(ids.get(i), k -> new ArrayList<>())
                        .add(expected.get(i));
                if (!refused) {
                    committed.merge("e:" + ids.get(i), 1, Integer::sum);
                }
            }
            if (refused) {
                refusals.incrementAndGet();
            } else {
                committedPosition[s] = positions.get(positions.size() - 1);
                moved.incrementAndGet();
            }
        }

        void process() {
            String id = fresh("e");
            moves.add("process " + id);
            setup.consumer().process(Delivery.of(id, id));
            scopes.top().items.add("e:" + id);
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
                scopes.top().items.add("e:" + d.eventId());
            }
        }

        /** The latest id whose claim an open transaction other than the innermost scope's (a suspended one) holds, or null. */
        String suspendedClaim() {
            return suspended(item -> item.startsWith("e:") || item.startsWith("z:"));
        }

        /** The id of the latest of {@code claims} among the items of the suspended transactions, or null. */
        private String suspended(java.util.function.Predicate<String> claims) {
            if (scopes.isEmpty()) {
                return null;
            }
            Physical physical = scopes.top().physical;
            String held = null;
            for (Scope scope : scopes.open()) {
                if (scope.physical != physical) {
                    for (String item : scope.items) {
                        if (claims.test(item)) {
                            held = item.substring(2);
                        }
                    }
                }
            }
            return held;
        }

        /** The latest Kafka record whose claim a suspended transaction holds, or null. */
        String suspendedRecord() {
            return suspended(item -> item.startsWith("e:") && records.containsKey(item.substring(2)));
        }

        /**
         * The record listener called with a copy of a record a suspended transaction holds: the call fails at once
         * (a Kafka listener waits for a holder on another thread, never for one this thread suspended: that wait
         * would not end), unacknowledged; its IN_PROGRESS is reported when the transaction ends. NESTED, the
         * savepoint undoes the call; joined (JPA), the failure dooms the transaction, as any failed listener call.
         */
        void relistenHeld() {
            String id = suspendedRecord();
            moves.add("listen again " + id + " (a suspended transaction holds its claim)");
            Ack ack = ack(List.of(id), true);
            boolean refused = refused();
            Throwable thrown = call(() -> setup.listeners().on(records.get(id), ack));
            assertThat(thrown)
                    .as("a listener call with a claim a suspended transaction holds fails %s", moves)
                    .isNotNull();
            if (refused) {
                return;
            }
            heldInProgress.incrementAndGet();
            Physical physical = scopes.top().physical;
            physical.undone.add("i:" + id);
            if (!nested()) {
                physical.rollbackOnly = true;
            }
        }

        /** A copy of a claim a suspended transaction holds: in progress at once, nothing written. */
        void processHeld() {
            String id = suspendedClaim();
            moves.add("process " + id + " (a suspended transaction holds its claim)");
            inProgress(() -> List.of(setup.consumer().process(Delivery.of(id, id))), List.of(id));
        }

        /** A batch with one: all of it in progress, nothing written. */
        void processBatchHeld() {
            List<String> ids = List.of(fresh("b"), suspendedClaim(), fresh("b"));
            moves.add("processBatch " + ids + " (a suspended transaction holds the claim of the second)");
            inProgress(
                    () -> setup.consumer()
                            .processBatch(
                                    ids.stream().map(id -> Delivery.of(id, id)).toList()),
                    ids);
        }

        /**
         * {@code outcomes} of {@code ids} are all IN_PROGRESS, because a suspended transaction of this thread holds
         * a claim, without a statement: the caller's transaction is as it was (not rollback-only, as a claim that
         * waited out a lock timeout leaves it); reported when it ends.
         */
        private void inProgress(java.util.function.Supplier<List<dev.once.Outcome>> call, List<String> ids) {
            Scope top = scopes.top();
            boolean rollbackOnly = top.status.isRollbackOnly();
            List<dev.once.Outcome> outcomes = call.get();
            heldInProgress.incrementAndGet();
            assertThat(outcomes.stream().map(dev.once.Outcome::tag).toList())
                    .as("outcomes of %s, a claim a suspended transaction holds among them %s", ids, moves)
                    .containsOnly("in_progress")
                    .hasSize(ids.size());
            assertThat(outcomes)
                    .allSatisfy(o -> assertThat(o.failure()).isInstanceOf(dev.once.ClaimHeldOnThreadException.class));
            assertThat(top.status.isRollbackOnly())
                    .as("the caller's transaction untouched by a call that ran nothing %s", moves)
                    .isEqualTo(rollbackOnly);
            for (String id : ids) {
                top.items.add("i:" + id);
            }
        }

        /** An id whose processing ended (committed or rolled back), never one an open transaction holds. */
        String redeliverable() {
            // an ordered run's delivery is delivered again only in a run (its payload names its position)
            for (int i = rolledBackEvents.size() - 1; i >= 0; i--) {
                if (!positionOf.containsKey(rolledBackEvents.get(i))) {
                    return rolledBackEvents.get(i);
                }
            }
            for (String item : committed.keySet()) {
                if (item.startsWith("e:") && !positionOf.containsKey(item.substring(2))) {
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
                duplicateOfEnded(id);
            } else {
                rolledBackEvents.remove(id);
                rolledBackRecords.remove(id); // a listener's record, applied again through the consumer
                scopes.top().items.add("e:" + id);
            }
        }

        // The Kafka listeners' calls: the records each was given, its Acknowledgment, and how it ended
        final List<Ack> acks = new ArrayList<>();
        final java.util.Set<Integer> acksStood = new java.util.HashSet<>();
        final Map<String, ConsumerRecord<String, String>> records = new HashMap<>();
        final List<String> rolledBackRecords = new ArrayList<>();
        final java.util.Set<String> openCopies = new java.util.HashSet<>();
        // ids with a copy of the transaction's own claim undone by a rollback to a savepoint
        final java.util.Set<String> undoneCopies = new java.util.HashSet<>();

        /** Whether a listener call runs NESTED in the open transaction (a savepoint), or joins it (JPA). */
        boolean nested() {
            return setup.once().nestedTransactionTemplate() != null;
        }

        /** A listener call in a transaction marked rollback-only, where Spring makes no savepoint. */
        boolean refused() {
            return nested() && scopes.top().physical.rollbackOnly;
        }

        Ack ack(List<String> ids, boolean fails) {
            Ack ack = new Ack(acks.size(), ids, fails);
            acks.add(ack);
            return ack;
        }

        /** The listener's call stood or fell with the scope it returned in: a marker among the scope's items. */
        void succeeded(Ack ack) {
            scopes.top().items.add("a:" + ack.index);
        }

        /** A record listener called with a fresh record in the innermost scope. */
        void listen(boolean fails) {
            ConsumerRecord<String, String> r = KafkaRecords.next(fails);
            String id = KafkaRecords.eventId(r);
            records.put(id, r);
            moves.add("listen " + id + (fails ? " (fails)" : ""));
            Ack ack = ack(List.of(id), true);
            boolean refused = refused();
            Throwable thrown = call(() -> setup.listeners().on(r, ack));
            if (refused) {
                assertThat(thrown)
                        .as("no savepoint in a rollback-only transaction %s", moves)
                        .isNotNull();
                return;
            }
            Physical physical = scopes.top().physical;
            if (fails) {
                assertThat(thrown).as("%s", moves).isNotNull();
                failed(physical, id);
                return;
            }
            assertThat(thrown).as("%s", moves).isNull();
            ack.fails = false;
            scopes.top().items.add("e:" + id);
            succeeded(ack);
        }

        /**
         * A failed call: NESTED, it rolled back to its savepoint, and it is reported as not applied when the
         * transaction ends; joined (JPA), it marked the whole transaction rollback-only.
         */
        private void failed(Physical physical, String id) {
            physical.undone.add("e:" + id);
            if (!nested()) {
                physical.rollbackOnly = true;
            }
        }

        /** A batch listener called with three fresh records, the middle one failing if {@code fails}. */
        void listenBatch(boolean fails) {
            List<ConsumerRecord<String, String>> batch =
                    List.of(KafkaRecords.next(false), KafkaRecords.next(fails), KafkaRecords.next(false));
            List<String> ids = batch.stream().map(KafkaRecords::eventId).toList();
            batch.forEach(r -> records.put(KafkaRecords.eventId(r), r));
            moves.add("listenBatch " + ids + (fails ? " (the second fails)" : ""));
            Ack ack = ack(ids, true);
            boolean refused = refused();
            Throwable thrown = call(() -> setup.listeners().onBatch(batch, ack));
            if (refused) {
                assertThat(thrown)
                        .as("no savepoint in a rollback-only transaction %s", moves)
                        .isNotNull();
                return;
            }
            Physical physical = scopes.top().physical;
            if (!fails) {
                assertThat(thrown).as("%s", moves).isNull();
                ack.fails = false;
                for (String id : ids) {
                    scopes.top().items.add("e:" + id);
                }
                succeeded(ack);
                return;
            }
            assertThat(thrown).as("%s", moves).isNotNull();
            // the batch in one step, rolled back: every record reported as not applied when the transaction ends
            for (String id : ids) {
                physical.undone.add("e:" + id);
            }
            if (nested()) {
                // then one record per savepoint: the first applied, the second failed, the third never called
                assertThat(thrown)
                        .as("%s", moves)
                        .isInstanceOf(org.springframework.kafka.listener.BatchListenerFailedException.class);
                assertThat(((org.springframework.kafka.listener.BatchListenerFailedException) thrown).getIndex())
                        .isEqualTo(1);
                scopes.top().items.add("e:" + ids.get(0));
                physical.undone.add("e:" + ids.get(1));
                rolledBackRecords.add(ids.get(2));
            } else {
                // joined: the transaction is doomed, nothing of the batch can commit, the records are not retried
                physical.rollbackOnly = true;
            }
        }

        /**
         * A record applied before: in a transaction that ended (committed: a duplicate; rolled back: applied
         * now), or in the open transaction itself (a duplicate of a claim not yet committed). Never one a
         * suspended transaction holds: its claim would wait for a transaction this thread cannot end.
         */
        String relistenable() {
            Physical physical = scopes.isEmpty() ? null : scopes.top().physical;
            List<String> open = new ArrayList<>();
            for (Scope s : scopes.open()) {
                if (s.physical == physical) {
                    for (String item : s.items) {
                        if (item.startsWith("e:") && records.containsKey(item.substring(2))) {
                            open.add(item.substring(2));
                        }
                    }
                }
            }
            if (!open.isEmpty() && moves.size() % 2 == 0) {
                return open.get(open.size() - 1);
            }
            if (!rolledBackRecords.isEmpty() && moves.size() % 3 == 0) {
                return rolledBackRecords.get(rolledBackRecords.size() - 1);
            }
            for (String item : committed.keySet()) {
                if (item.startsWith("e:") && records.containsKey(item.substring(2))) {
                    return item.substring(2);
                }
            }
            return !open.isEmpty() ? open.get(0) : rolledBackRecords.isEmpty() ? null : rolledBackRecords.get(0);
        }

        void relisten() {
            String id = relistenable();
            boolean ended = committed.containsKey("e:" + id);
            boolean undone = rolledBackRecords.contains(id);
            moves.add("listen again " + id + (ended ? " (committed)" : undone ? " (rolled back)" : " (open)"));
            Ack ack = ack(List.of(id), true);
            boolean refused = refused();
            Throwable thrown = call(() -> setup.listeners().on(records.get(id), ack));
            if (refused) {
                assertThat(thrown)
                        .as("no savepoint in a rollback-only transaction %s", moves)
                        .isNotNull();
                return;
            }
            assertThat(thrown).as("%s", moves).isNull();
            ack.fails = false;
            if (undone) {
                rolledBackRecords.remove(id);
                rolledBackEvents.remove(id);
                scopes.top().items.add("e:" + id);
            } else if (ended) {
                duplicateOfEnded(id);
            } else {
                // reported when the open transaction ends, after its claim's outcome: compared in any order
                scopes.top().items.add("d:" + id);
                openCopies.add(id);
            }
            succeeded(ack);
        }

        /**
         * A copy of a claim an ended transaction committed: a duplicate, reported like every joined outcome when
         * the open transaction ends, so after what that transaction already owed the same id (a record of a batch
         * undone in it before the claim committed in a REQUIRES_NEW transaction is reported not applied first).
         */
        private void duplicateOfEnded(String id) {
            scopes.top().items.add("c:" + id);
        }

        private Throwable call(ThrowingRunnable r) {
            try {
                r.run();
                return null;
            } catch (Throwable t) {
                return t;
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
            scopes.top().items.add("m:" + key);
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
            scopes.top().items.add("M:" + key);
            allMessages.add("M:" + key);
        }

        static final int MANY = dev.once.Outbox.FLUSH_ROWS + 1;

        void setRollbackOnly() {
            moves.add("setRollbackOnly");
            scopes.setRollbackOnly();
        }

        void commit() {
            moves.add("commit");
            Ended ended = scopes.commit();
            Scope top = ended.scope();
            if (ended.thrown() != null && !(ended.thrown() instanceof UnexpectedRollbackException)) {
                throw ended.thrown();
            }
            if (top.newPhysical) {
                // Spring's rule: a commit of a transaction that only a participant marked rollback-only throws
                assertThat(ended.thrown() != null)
                        .as("%s", moves)
                        .isEqualTo(!top.localRollbackOnly && top.physical.rollbackOnly);
            }
            ended(ended);
        }

        void rollback() {
            moves.add("rollback");
            Ended ended = scopes.rollback();
            if (ended.thrown() != null) {
                throw ended.thrown();
            }
            ended(ended);
        }

        private void ended(Ended ended) {
            if (ended.physical()) {
                reportUndone(ended.scope().physical);
                end(ended.scope().items, ended.end() == End.COMMITTED);
            } else if (ended.end() == End.TO_SAVEPOINT) {
                undo(ended.scope());
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
                    if (records.containsKey(item.substring(2))) {
                        rolledBackRecords.add(item.substring(2));
                    }
                    savepoint.physical.undone.add(item);
                }
                if (item.startsWith("d:") || item.startsWith("c:") || item.startsWith("i:")) {
                    savepoint.physical.undone.add(item);
                }
            }
        }

        /** The physical transaction ended: what rollbacks to its savepoints undid is reported now. */
        private void reportUndone(Physical physical) {
            for (String item : physical.undone) {
                if (item.startsWith("r:")) {
                    expectedHeard
                            .computeIfAbsent(item.substring(2), k -> new ArrayList<>())
                            .add("failed_permanent");
                    continue;
                }
                if (item.startsWith("c:")) {
                    expectedHeard
                            .computeIfAbsent(item.substring(2), k -> new ArrayList<>())
                            .add("duplicate");
                    continue;
                }
                if (item.startsWith("d:")) {
                    // a copy of a claim this transaction took, undone by a rollback to a savepoint: FAILED_RETRYABLE
                    // (undone with its claim, or conservatively) or DUPLICATE (its claim stood): never acknowledged
                    // while its claim did not stand, which end() checks when the whole transaction rolls back
                    expectedHeard
                            .computeIfAbsent(item.substring(2), k -> new ArrayList<>())
                            .add("failed_retryable");
                    undoneCopies.add(item.substring(2));
                    continue;
                }
                if (item.startsWith("i:")) {
                    expectedHeard
                            .computeIfAbsent(item.substring(2), k -> new ArrayList<>())
                            .add("in_progress");
                    continue;
                }
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
                        if (records.containsKey(id)) {
                            rolledBackRecords.add(id);
                        }
                    }
                }
                if (item.startsWith("c:")) {
                    expectedHeard
                            .computeIfAbsent(item.substring(2), k -> new ArrayList<>())
                            .add("duplicate");
                }
                if (item.startsWith("d:")) {
                    // a copy of a claim this transaction took: a duplicate only if that claim committed
                    expectedHeard
                            .computeIfAbsent(item.substring(2), k -> new ArrayList<>())
                            .add(stands ? "duplicate" : "failed_retryable");
                }
                if (item.startsWith("i:")) {
                    expectedHeard
                            .computeIfAbsent(item.substring(2), k -> new ArrayList<>())
                            .add("in_progress");
                }
                if (stands && item.startsWith("a:")) {
                    acksStood.add(Integer.parseInt(item.substring(2)));
                }
                if (item.startsWith("z:")) {
                    assertThat(stands)
                            .as("a refused run's claim %s committed %s", item.substring(2), moves)
                            .isFalse();
                }
                if (stands && item.startsWith("p:")) {
                    String[] at = item.split(":");
                    int s = Integer.parseInt(at[1]);
                    committedPosition[s] = Math.max(committedPosition[s], Long.parseLong(at[2]));
                }
                if (stands) {
                    committed.merge(item, 1, Integer::sum);
                }
            }
        }

        void abandon() {
            scopes.abandon();
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
            for (Ack ack : acks) {
                assertThat(ack.early)
                        .as("call %d %s acknowledged before its records' claims committed %s", ack.index, ack.ids, why)
                        .isEmpty();
                if (ack.fails) {
                    assertThat(ack.acked)
                            .as("failed call %d %s acknowledged %s", ack.index, ack.ids, why)
                            .isZero();
                } else if (acksStood.contains(ack.index)) {
                    assertThat(ack.acked)
                            .as("call %d %s committed: acknowledged %s", ack.index, ack.ids, why)
                            .isEqualTo(1);
                }
            }
            if (setup.listeners().emf != null) {
                for (String id : records.keySet()) {
                    assertThat(jdbc.queryForObject("SELECT count(*) FROM payment WHERE id = ?", Long.class, id))
                            .as("entity of %s %s", id, why)
                            .isEqualTo((long) committed.getOrDefault("e:" + id, 0));
                }
            }
            for (int s = 0; s < STREAMS; s++) {
                List<Long> stored = jdbc.queryForList(
                        "SELECT position FROM once_stream_position WHERE consumer = 'prop' AND stream = ?",
                        Long.class,
                        stream(s));
                assertThat(stored)
                        .as("stored position of %s: the highest a committed run moved it to %s", stream(s), why)
                        .isEqualTo(committedPosition[s] == 0 ? List.of() : List.of(committedPosition[s]));
                List<Long> applied = jdbc.queryForList(
                        "SELECT position FROM ordered_effect WHERE stream = ? ORDER BY seq", Long.class, stream(s));
                List<Long> expected = new ArrayList<>();
                for (var e : positionOf.entrySet()) {
                    if (e.getValue()[0] == s && committed.containsKey("e:" + e.getKey())) {
                        expected.add(e.getValue()[1]);
                    }
                }
                assertThat(applied)
                        .as(
                                "effects of %s in the order applied: the committed runs' positions, ascending %s",
                                stream(s), why)
                        .isEqualTo(expected.stream().sorted().toList());
            }
            Map<String, List<String>> heard = new TreeMap<>();
            for (String h : setup.heard().subList(heardBefore, setup.heard().size())) {
                int eq = h.indexOf('=');
                heard.computeIfAbsent(h.substring(0, eq), k -> new ArrayList<>())
                        .add(h.substring(eq + 1));
            }
            for (String id : undoneCopies) {
                for (Map<String, List<String>> m : List.of(heard, expectedHeard)) {
                    if (m.containsKey(id)) {
                        m.put(
                                id,
                                m.get(id).stream()
                                        .map(o -> o.equals("duplicate") ? "failed_retryable" : o)
                                        .toList());
                    }
                }
            }
            for (String id : openCopies) {
                // a copy of a claim the open transaction held: heard at its end, in the order registered
                for (Map<String, List<String>> m : List.of(heard, expectedHeard)) {
                    if (m.containsKey(id)) {
                        m.put(id, m.get(id).stream().sorted().toList());
                    }
                }
            }
            assertThat(heard)
                    .as("outcomes reported once each, as the transactions ended %s", why)
                    .isEqualTo(expectedHeard);
        }

        final List<String> allMessages = new ArrayList<>();
    }

    @FunctionalInterface
    interface ThrowingRunnable {
        void run() throws Throwable;
    }

    /**
     * The container's {@code Acknowledgment} of one listener call: counts the acknowledgements, and notes the
     * records whose claim was not committed (read on a connection of its own) when one was made.
     */
    static final class Ack implements Acknowledgment {
        final int index;
        final List<String> ids;
        // until the call returned normally: a failed call must never be acknowledged
        boolean fails;
        int acked;
        final List<String> early = new ArrayList<>();

        Ack(int index, List<String> ids, boolean fails) {
            this.index = index;
            this.ids = ids;
            this.fails = fails;
        }

        @Override
        public void acknowledge() {
            acked++;
            for (String id : ids) {
                if (db.queryLong("SELECT count(*) FROM once_inbox WHERE consumer = 'prop' AND event_id = '" + id + "'")
                        == 0) {
                    early.add(id);
                }
            }
        }
    }
}
