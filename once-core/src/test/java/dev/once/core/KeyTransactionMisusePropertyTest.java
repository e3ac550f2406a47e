package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.OnceException;
import dev.once.StaleFencingTokenException;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.KeyTransaction;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestMariaDb;
import dev.once.testsupport.TestPostgres;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Builders;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;

/**
 * Requests run in {@link IdempotencyKeys#transaction} (what {@code once-http}'s transactional filter hands a
 * handler) whose code does to the transaction's connection what application code does by mistake: commits it
 * (a DAO or a query library that commits), switches auto-commit on, rolls it back, sends {@code COMMIT} as SQL,
 * closes it (try-with-resources), or uses a savepoint of its own (allowed); it catches the failure or lets it
 * go; the request then completes, fails retryably or for good, throws, or stalls past its claim while a retry
 * takes the key over and completes. Generated sequences of such requests on three keys, on PostgreSQL and
 * MariaDB. The oracle is the contract of {@link KeyTransaction}, the effect and the saved result commit
 * together or not at all: after every request, a key whose result is saved has its effect once, and a key
 * that is not (never finished, released, or taken over and not yet finished) has none, so a retry of it
 * cannot apply the effect a second time. {@value #TRIES} tries per database.
 */
class KeyTransactionMisusePropertyTest {

    static final int TRIES = 25;
    static final Duration LOCK = Duration.ofSeconds(5);
    static final String SCOPE = "tenant";

    private static TestDatabase postgres;
    private static TestDatabase mariadb;
    private static long requests;

    @AfterContainer
    static void stop() {
        for (TestDatabase db : new TestDatabase[] {postgres, mariadb}) {
            if (db != null) {
                db.close();
            }
        }
        postgres = null;
        mariadb = null;
        System.out.println("KeyTransactionMisusePropertyTest: requests=" + requests + " applied_twice=0 lost=0");
    }

    /** What the request's code does to the transaction's connection after writing its effect. */
    enum Misuse {
        NONE,
        COMMIT,
        AUTO_COMMIT_ON,
        ROLLBACK,
        COMMIT_AS_SQL,
        CLOSE,
        OWN_SAVEPOINT
    }

    /** How the request ends. */
    enum Ending {
        COMPLETE,
        FAIL_RETRYABLE,
        FAIL_PERMANENT,
        THROWS,
        STALLS_AND_IS_TAKEN_OVER
    }

    record Request(int key, Misuse misuse, boolean swallows, Ending ending) {}

    @Provide
    Arbitrary<List<Request>> requests() {
        Arbitrary<Request> one = Builders.withBuilder(() -> new Request(0, Misuse.NONE, false, Ending.COMPLETE))
                .use(Arbitraries.integers().between(0, 2))
                .in((r, k) -> new Request(k, r.misuse(), r.swallows(), r.ending()))
                .use(Arbitraries.of(Misuse.class))
                .in((r, m) -> new Request(r.key(), m, r.swallows(), r.ending()))
                .use(Arbitraries.of(true, false))
                .in((r, s) -> new Request(r.key(), r.misuse(), s, r.ending()))
                .use(Arbitraries.of(Ending.class))
                .in((r, e) -> new Request(r.key(), r.misuse(), r.swallows(), e))
                .build();
        return one.list().ofMinSize(1).ofMaxSize(8);
    }

    @Property(tries = TRIES)
    void postgres(@ForAll("requests") List<Request> requests) throws Exception {
        if (postgres == null) {
            postgres = TestPostgres.shared().freshDatabase(4);
        }
        run(postgres, requests);
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = TRIES)
    void mariadb(@ForAll("requests") List<Request> requests) throws Exception {
        if (mariadb == null) {
            mariadb = TestMariaDb.shared().freshDatabase(4);
        }
        run(mariadb, requests);
    }

    /** The generator's first find, shrunk: a request whose code committed the connection, then failed retryably. */
    @Example
    void aRequestThatCommitsItsConnectionAndThenFailsRetryablyLeavesNoEffectForTheRetry() throws Exception {
        if (postgres == null) {
            postgres = TestPostgres.shared().freshDatabase(4);
        }
        run(postgres, List.of(new Request(0, Misuse.COMMIT, true, Ending.FAIL_RETRYABLE)));
    }

    private static void run(TestDatabase db, List<Request> script) throws Exception {
        db.execute(
                "CREATE TABLE IF NOT EXISTS key_ledger (idem_key varchar(40) NOT NULL)",
                "DELETE FROM key_ledger",
                "DELETE FROM once_idempotency_key");
        MutableClock clock = MutableClock.startingNow();
        IdempotencyKeys keys = IdempotencyKeys.builder()
                .dataSource(db.dataSource())
                .clock(clock)
                .lockDuration(LOCK)
                .lockWait(Duration.ofMillis(200))
                .build();
        List<String> done = new ArrayList<>();
        for (Request r : script) {
            String key = "k" + r.key();
            done.add(r.toString());
            request(keys, clock, key, r);
            requests++;
            for (int k = 0; k < 3; k++) {
                check(db, "k" + k, done);
            }
        }
    }

    /** One request as {@code once-http}'s transactional filter runs it ({@code Gate}): begin, handler, finish. */
    private static void request(IdempotencyKeys keys, MutableClock clock, String key, Request r) throws Exception {
        if (!(keys.begin(SCOPE, key, "fp") instanceof BeginResult.Started started)) {
            return; // replayed, in progress: the handler does not run
        }
        KeyTransaction t = keys.transaction(started);
        try {
            handler(t, key, r);
        } catch (Exception e) {
            abandon(keys, t);
            return;
        }
        if (r.ending() == Ending.THROWS) {
            abandon(keys, t);
            return;
        }
        if (r.ending() == Ending.STALLS_AND_IS_TAKEN_OVER) {
            clock.advance(LOCK.plusSeconds(1));
            request(keys, clock, key, new Request(r.key(), Misuse.NONE, false, Ending.COMPLETE));
        }
        try {
            switch (r.ending()) {
                case FAIL_RETRYABLE -> t.fail(true, 503, null);
                case FAIL_PERMANENT -> t.fail(false, 422, new byte[] {1});
                default -> t.complete(201, new byte[] {2});
            }
        } catch (StaleFencingTokenException e) {
            // taken over: the successor's result stands, this transaction rolled back
        } catch (SQLException | OnceException e) {
            release(keys, t.started());
        } finally {
            t.close();
        }
    }

    private static void handler(KeyTransaction t, String key, Request r) throws Exception {
        Connection c = t.connection();
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO key_ledger VALUES (?)")) {
            ps.setString(1, key);
            ps.executeUpdate();
        }
        try {
            switch (r.misuse()) {
                case COMMIT -> c.commit();
                case AUTO_COMMIT_ON -> c.setAutoCommit(true);
                case ROLLBACK -> c.rollback();
                case COMMIT_AS_SQL -> {
                    try (Statement s = c.createStatement()) {
                        s.execute("COMMIT");
                    }
                }
                case CLOSE -> c.close();
                case OWN_SAVEPOINT -> {
                    Savepoint sp = c.setSavepoint();
                    try (PreparedStatement ps = c.prepareStatement("INSERT INTO key_ledger VALUES (?)")) {
                        ps.setString(1, key + "-undone");
                        ps.executeUpdate();
                    }
                    c.rollback(sp);
                }
                case NONE -> {}
            }
        } catch (SQLException | RuntimeException e) {
            if (!r.swallows()) {
                throw e;
            }
        }
    }

    // Gate.abandon: roll back, release the key so that a retry runs the request again
    private static void abandon(IdempotencyKeys keys, KeyTransaction t) {
        try {
            t.close();
        } catch (SQLException | RuntimeException ignored) {
            // the filter logs it
        }
        release(keys, t.started());
    }

    private static void release(IdempotencyKeys keys, BeginResult.Started started) {
        try {
            keys.fail(started, true, 500, null);
        } catch (OnceException ignored) {
            // the filter logs it; the key frees itself when its claim lapses
        }
    }

    private static void check(TestDatabase db, String key, List<String> done) throws SQLException {
        try (Connection c = db.dataSource().getConnection()) {
            String state = null;
            try (PreparedStatement ps =
                    c.prepareStatement("SELECT state FROM once_idempotency_key WHERE scope = ? AND idem_key = ?")) {
                ps.setString(1, SCOPE);
                ps.setString(2, key);
                try (ResultSet rs = ps.executeQuery()) {
                    if (rs.next()) {
                        state = rs.getString(1);
                    }
                }
            }
            long effects;
            try (PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM key_ledger WHERE idem_key = ?")) {
                ps.setString(1, key);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    effects = rs.getLong(1);
                }
            }
            boolean saved = "succeeded".equals(state) || "failed".equals(state);
            assertThat(effects)
                    .as(
                            "key %s (state %s): its effect once where its result is saved, else none (a retry"
                                    + " applies it again): %s",
                            key, state, done)
                    .isEqualTo(saved ? 1 : 0);
        }
    }
}
