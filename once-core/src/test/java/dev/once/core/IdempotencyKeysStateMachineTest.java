package dev.once.core;

import static dev.once.testsupport.StateMachines.move;
import static org.assertj.core.api.Assertions.assertThat;

import dev.once.OnceException;
import dev.once.StaleFencingTokenException;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.KeyTransaction;
import dev.once.retention.IdempotencyKeyPruner;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.StateMachines;
import dev.once.testsupport.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.ActionChain;

/**
 * {@link IdempotencyKeys} against a model, through its public API only: random sequences of what
 * callers and time do to two keys (a begin with the request's fingerprint or another one; a
 * started caller completing, completing in {@link IdempotencyKeys#transaction} with an effect row
 * on its connection, failing for good or failing retryably, possibly long after its claim lapsed or
 * twice; the clock moving by seconds or hours; the pruner running with its shortest retention).
 * Every begin must answer what the model says (started, replay of the last accepted result, in
 * progress, mismatch), every finish must be accepted exactly when its caller still holds the key's
 * current claim, a refused finish changes nothing, and the effect rows are exactly those of the
 * accepted transactional completes.
 *
 * <p>Found on its first run: a caller stalled past its claim and past the retention, the pruner
 * deleted the key, a retry claimed it anew with fencing token 1 again, and the stalled caller's
 * {@code complete} (token 1) was accepted as the successor's, overwriting its claim; the successor's
 * own {@code complete} was then refused as "already finished". Shrunk (MariaDB) to: begin k0, advance 61 s,
 * prune, begin k0, complete (the first caller).
 */
class IdempotencyKeysStateMachineTest {

    static final Duration LOCK = Duration.ofSeconds(30);
    static final Duration RETENTION = Duration.ofMinutes(1); // the shortest the pruner allows
    static final String SCOPE = "s";

    private static final StateMachines.Databases databases = new StateMachines.Databases(2);

    @AfterContainer
    static void close() {
        databases.close();
    }

    @Property(tries = 150)
    void postgresql(@ForAll("chains") ActionChain<World> chain) {
        World.next = new World(databases.postgres());
        chain.run();
    }

    @Property(tries = 60)
    void mariadb(@ForAll("chains") ActionChain<World> chain) {
        World.next = new World(databases.mariadb());
        chain.run();
    }

    @Provide
    Arbitrary<ActionChain<World>> chains() {
        return ActionChain.<World>startWith(() -> World.next)
                .withAction(4, move(w -> true, Arbitraries.integers().between(0, 3), "begin", World::begin))
                .withAction(
                        4,
                        move(
                                w -> !w.callers.isEmpty(),
                                Arbitraries.integers().between(0, 299),
                                "finish",
                                World::finish))
                .withAction(2, move(w -> true, Arbitraries.integers().between(0, 4), "advance", World::advance))
                .withAction(1, move(w -> true, Arbitraries.just(0), "prune", (w, n) -> w.prune()))
                .withMaxTransformations(16);
    }

    /** A key's row as the model sees it; a new object each time the key is created anew. */
    static final class Row {
        final String fingerprint;
        final Instant createdAt;
        String state = "processing";
        Caller holder;
        Instant lockedUntil;
        int status;
        byte[] body;

        Row(String fingerprint, Instant createdAt) {
            this.fingerprint = fingerprint;
            this.createdAt = createdAt;
        }
    }

    /** A caller that got {@link BeginResult.Started}, and the row it was started on. */
    record Caller(String key, Row row, BeginResult.Started started) {}

    static final class World {
        static World next;

        final MutableClock clock = MutableClock.startingNow();
        final Instant start = clock.instant();
        final IdempotencyKeys keys;
        final IdempotencyKeyPruner pruner;
        final Map<String, Row> rows = new HashMap<>();
        final List<Caller> callers = new ArrayList<>();
        final Map<String, Integer> effects = new HashMap<>();
        final TestDatabase db;
        int finishes;

        World(TestDatabase db) {
            this.db = db;
            db.execute(
                    "DELETE FROM once_idempotency_key",
                    "CREATE TABLE IF NOT EXISTS key_effect (idem_key varchar(10) NOT NULL, status int NOT NULL)",
                    "DELETE FROM key_effect");
            keys = IdempotencyKeys.builder()
                    .dataSource(db.dataSource())
                    .clock(clock)
                    .lockDuration(LOCK)
                    .build();
            pruner = IdempotencyKeyPruner.builder()
                    .dataSource(db.dataSource())
                    .clock(clock)
                    .retention(RETENTION)
                    .build();
        }

        /** n: bit 0 the key, bit 1 the fingerprint (the request's, or another request's). */
        void begin(int n) {
            String key = "k" + (n & 1);
            String fingerprint = (n & 2) == 0 ? "fp" : "other";
            Instant now = clock.instant();
            BeginResult got = keys.begin(SCOPE, key, fingerprint);
            Row row = rows.get(key);
            String what = "begin " + key + " " + fingerprint + " at +" + elapsed();
            if (row == null) {
                assertThat(got).as(what + ": no row").isInstanceOf(BeginResult.Started.class);
                row = new Row(fingerprint, now);
                rows.put(key, row);
            } else if (!row.fingerprint.equals(fingerprint)) {
                assertThat(got).as(what).isEqualTo(new BeginResult.Mismatch(SCOPE, key));
                return;
            } else if (row.state.equals("succeeded") || row.state.equals("failed")) {
                assertThat(got)
                        .as(what + ": replays the accepted result")
                        .isEqualTo(new BeginResult.Replay(row.status, row.body, row.state.equals("failed")));
                return;
            } else if (row.state.equals("processing") && now.isBefore(row.lockedUntil)) {
                assertThat(got).as(what).isEqualTo(new BeginResult.InProgress(row.lockedUntil));
                return;
            } else {
                assertThat(got)
                        .as(what + ": " + row.state + " past its claim, taken over")
                        .isInstanceOf(BeginResult.Started.class);
                assertThat(((BeginResult.Started) got).token())
                        .as(what + ": a takeover's token is larger")
                        .isGreaterThan(row.holder.started().token());
            }
            row.state = "processing";
            row.lockedUntil = now.plus(LOCK);
            row.status = 0;
            row.body = null;
            row.holder = new Caller(key, row, (BeginResult.Started) got);
            callers.add(row.holder);
        }

        private static final String[] FINISHES = {"complete", "fail", "fail retryably", "complete with an effect"};

        /** n: which started caller (modulo their number), and how it finishes (n % 4). */
        void finish(int n) {
            Caller caller = callers.get(n % callers.size());
            int kind = n % 4;
            int status = 100 + finishes++;
            byte[] body = ("result " + status).getBytes(StandardCharsets.UTF_8);
            Row row = rows.get(caller.key());
            boolean holds = row == caller.row() && row.holder == caller && row.state.equals("processing");
            String what = "finish (" + FINISHES[kind] + ") of the caller started with token "
                    + caller.started().token() + " on " + caller.key() + " at +" + elapsed();
            RuntimeException refused = null;
            try {
                switch (kind) {
                    case 0 -> keys.complete(caller.started(), status, body);
                    case 1 -> keys.fail(caller.started(), false, status, body);
                    case 2 -> keys.fail(caller.started(), true, status, body);
                    default -> completeWithEffect(caller, status, body);
                }
            } catch (OnceException e) {
                refused = e;
            }
            if (kind == 3 && refused == null) {
                effects.merge(caller.key(), 1, Integer::sum);
            }
            assertThat(db.queryLong("SELECT count(*) FROM key_effect WHERE idem_key = '" + caller.key() + "'"))
                    .as(what + ": the effect rows of " + caller.key())
                    .isEqualTo((long) effects.getOrDefault(caller.key(), 0));
            if (!holds) {
                assertThat(refused)
                        .as(what + ": it no longer holds the key's claim, so it must be refused")
                        .isNotNull();
                if (row != null && (row != caller.row() || row.holder != caller)) {
                    assertThat(refused)
                            .as(what + ": a successor holds the key")
                            .isInstanceOf(StaleFencingTokenException.class);
                }
                return;
            }
            assertThat(refused).as(what + ": it holds the claim").isNull();
            row.state = kind == 1 ? "failed" : kind == 2 ? "retryable" : "succeeded";
            row.status = status;
            row.body = kind == 2 ? null : body;
        }

        /** The effect and the result in one transaction, as the keys' documentation says to. */
        private void completeWithEffect(Caller caller, int status, byte[] body) {
            try (KeyTransaction t = keys.transaction(caller.started())) {
                try (PreparedStatement ps =
                        t.connection().prepareStatement("INSERT INTO key_effect (idem_key, status) VALUES (?, ?)")) {
                    ps.setString(1, caller.key());
                    ps.setInt(2, status);
                    ps.executeUpdate();
                }
                t.complete(status, body);
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        private static final Duration[] STEPS = {
            Duration.ofSeconds(1),
            Duration.ofSeconds(29),
            Duration.ofSeconds(31),
            Duration.ofSeconds(61),
            Duration.ofHours(2)
        };

        void advance(int n) {
            clock.advance(STEPS[n]);
        }

        void prune() {
            Instant now = clock.instant();
            Instant cutoff = now.minus(RETENTION);
            long expected = rows.values().stream()
                    .filter(r -> r.createdAt.isBefore(cutoff)
                            && (!r.state.equals("processing") || r.lockedUntil.isBefore(now)))
                    .count();
            assertThat(pruner.prune()).as("prune at +" + elapsed()).isEqualTo(expected);
            rows.values()
                    .removeIf(r -> r.createdAt.isBefore(cutoff)
                            && (!r.state.equals("processing") || r.lockedUntil.isBefore(now)));
        }

        private String elapsed() {
            return Duration.between(start, clock.instant()).toString();
        }
    }
}
