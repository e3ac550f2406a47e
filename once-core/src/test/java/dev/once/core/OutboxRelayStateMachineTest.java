package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.RetryPolicy;
import dev.once.TransactionOutbox;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.outbox.DeadMessage;
import dev.once.outbox.OutboxAdmin;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.OutboxStats;
import dev.once.outbox.PublishFailure;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import dev.once.retention.OutboxPruner;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.SkipWithoutMariaDb;
import dev.once.testsupport.StateMachines;
import dev.once.testsupport.TestDatabase;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;
import java.util.function.Predicate;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;

/**
 * {@link OutboxRelay} against a model, through the public API only: random sequences of
 * transactions committing one to three outbox rows ({@link TransactionOutbox}, keyed among two
 * keys or unkeyed, with an explicit idempotency key or the default one), transactions rolling such
 * rows back, batches of two relays on one table whose publishers answer as scripted per message
 * (accepted, retryable failure, permanent failure, an unexpected exception, a send left hanging past
 * the send timeout), one relay's batch run from inside the other's send (so the second meets the
 * first's locked rows), the clock moving past backoffs and retention, {@link OutboxAdmin} replaying
 * or discarding a row (dead or not), and the {@link OutboxPruner}. Then every row is drained.
 *
 * <p>Checked at every step: each batch sends exactly the rows the model says are sendable (pending,
 * available, of a key whose head, its oldest pending or dead row, is pending and available no later;
 * the oldest available first up to the batch size; none locked by the other relay; of each key only
 * the run from its head on, each row the key's next after the one before), in waves: a key's n-th
 * row of the batch only after its (n-1)-th was accepted, never after it failed or hung. So a
 * rolled-back row is never sent, a key is sent in id order, a failing or dead row holds back its own
 * key and no other, and a sent row is never sent again; every send carries the row's event id (also as the header) and
 * idempotency key; a retryable failure comes back after exactly the retry policy's delay and goes
 * dead only when the policy is spent, a permanent one at once; the admin's dead list and stats and
 * the pruner's count agree with the model; at the end, with dead rows replayed and an accepting
 * publisher, every committed row that was not discarded has been sent.
 *
 * <p>Goes red when the mechanism is broken, each time on its first run (on both databases): with the lock query's head-of-key condition removed
 * ({@code Dialect#outboxLockBatch}: a batch held rows whose key had an older pending row); with the
 * retry delay ignored ({@code RelayMarks}: a retried row was sent again at once); with permanent
 * failures treated as retryable (the dead list and stats disagreed); with the exclusive relay's
 * renewal and fence before commit removed ({@code OutboxRelay#sendBatch}: a relay paused past its
 * lease, taken over meanwhile, committed its batch).
 *
 * <p>Found on its first runs: on MariaDB, relay b's batch run while relay a held its batch's rows
 * waited for a's locks instead of skipping them ({@code Lock wait timeout exceeded} after
 * innodb_lock_wait_timeout, 50 s: in a deployment, two relays whose batches take longer than that
 * fail each other's batches; here a waits for b in the same thread). First seen with seed
 * 1482799717174925724 after {@code commit [3, 1, 4], replay, relay b (THROW, PERMANENT), commit
 * [5, 3, 1], commit [4, 2], replay, relay a (PERMANENT) with b inside} (shrinking reached its time
 * bound). The lock tables during the wait: b waited for {@code X,GAP} on records of the index
 * {@code once_outbox_available (status, available_at, id)} on which a held {@code X}, taken by its
 * range scan under REPEATABLE READ (one of them a deleted row not yet purged, still indexed as
 * pending); SKIP LOCKED skips locked rows, not gap waits. Fixed by running the relay's batch
 * transaction at READ COMMITTED on MariaDB ({@code Dialect#outboxBatchBegin}).
 */
class OutboxRelayStateMachineTest {

    static final RetryPolicy RETRIES = RetryPolicy.builder()
            .initialDelay(Duration.ofSeconds(10))
            .multiplier(2)
            .maxDelay(Duration.ofMinutes(1))
            .jitter(RetryPolicy.Jitter.NONE)
            .maxRetries(2)
            .build();
    static final Duration RETENTION = Duration.ofMinutes(1); // the shortest the pruner allows
    static final Duration SEND_TIMEOUT = Duration.ofMillis(50); // what a hung send costs
    // Not a whole number of seconds, unlike the clock's steps: no move lands exactly on an expiry.
    static final Duration LEASE_TTL = Duration.ofMillis(30_500);
    static final int BATCH_A = 2; // small, so that a nested batch of relay b finds rows left
    static final String[] KEYS = {"k0", "k1", null};

    // Per thread: a chain that jqwik's bounded shrinking left running in the background has its own
    // outbox table (each world starts by emptying it).
    private static final StateMachines.ThreadDatabases databases = new StateMachines.ThreadDatabases(4);

    @AfterContainer
    static void close() {
        databases.close();
    }

    @Property(tries = 60)
    void postgresql(@ForAll("chains") ActionChain<World> chain) {
        World.next.set(new World(databases.postgres()));
        chain.run().drain();
    }

    @AddLifecycleHook(SkipWithoutMariaDb.class)
    @Property(tries = 30)
    void mariadb(@ForAll("chains") ActionChain<World> chain) {
        World.next.set(new World(databases.mariadb()));
        chain.run().drain();
    }

    /** What a scripted publisher answers to one send. */
    enum Answer {
        OK,
        RETRYABLE,
        PERMANENT,
        /** An exception that is no {@link PublishFailure}: counts as retryable. */
        THROW,
        /** A stage never completed: relay a gives up on it at the send timeout, a retryable failure. */
        HANG
    }

    /**
     * A relay move: which relay, the answers for its sends in order (then OK), and a twist during
     * the send: for a, 1 or 2 runs a batch of b inside it; for the exclusive x or y, 1 stalls it past
     * its lease, 2 stalls it while the other one takes the lease over and sends a batch.
     */
    record Batch(String relay, List<Answer> answers, int twist) {}

    /** The relays a and b, and the exclusive relays x and y. */
    @Provide
    Arbitrary<ActionChain<World>> chains() {
        return chains("a", "b", "x", "y");
    }

    private static Arbitrary<ActionChain<World>> chains(String... relays) {
        Arbitrary<List<Integer>> rows =
                Arbitraries.integers().between(0, 5).list().ofMinSize(1).ofMaxSize(3);
        Arbitrary<Batch> batches = Combinators.combine(
                        Arbitraries.of(relays),
                        Arbitraries.of(Answer.class).list().ofMaxSize(4),
                        Arbitraries.integers().between(0, 2))
                .as(Batch::new);
        return ActionChain.<World>startWith(World.next::get)
                .withAction(4, move(w -> true, rows, "commit", World::commit))
                .withAction(1, move(w -> true, rows, "roll back", World::rollBack))
                .withAction(5, move(w -> true, batches, "relay", World::relay))
                .withAction(3, move(w -> true, Arbitraries.integers().between(0, 4), "advance", World::advance))
                .withAction(
                        2,
                        move(
                                w -> !w.rows.isEmpty(),
                                Arbitraries.integers().between(0, 99),
                                "replay",
                                (w, n) -> w.admin(n, true)))
                .withAction(
                        1,
                        move(
                                w -> !w.rows.isEmpty(),
                                Arbitraries.integers().between(0, 99),
                                "discard",
                                (w, n) -> w.admin(n, false)))
                .withAction(1, move(w -> true, Arbitraries.just(0), "prune", (w, n) -> w.prune()))
                .withMaxTransformations(20);
    }

    /** A move that also records itself for the failure message and checks the model after it. */
    private static <T> Action<World> move(
            Predicate<World> pre, Arbitrary<T> arg, String name, BiConsumer<World, T> body) {
        return StateMachines.move(pre, arg, name, (w, a) -> {
            w.moves.add(name + " " + a);
            body.accept(w, a);
            w.check();
        });
    }

    /** A committed row as the model sees it. */
    static final class Row {
        final long id;
        final String eventId;
        final String key;
        final String idempotencyKey;
        String state = "pending"; // pending, sent, dead, discarded, deleted (by relay b or the pruner)
        int attempts;
        Instant availableAt;
        Instant sentAt;
        int accepted; // sends the publisher accepted

        Row(long id, String eventId, String key, String idempotencyKey, Instant availableAt) {
            this.id = id;
            this.eventId = eventId;
            this.key = key;
            this.idempotencyKey = idempotencyKey;
            this.availableAt = availableAt;
        }

        @Override
        public String toString() {
            return "row " + id + " (" + (key == null ? "no key" : key) + ", " + state + ", " + attempts + " attempts)";
        }
    }

    /** One send the publisher saw. */
    record Send(String relay, OutboxMessage message, Answer answer) {}

    static final class World {
        /** The world of the chain this thread runs. */
        static final ThreadLocal<World> next = new ThreadLocal<>();

        private static final AtomicInteger worlds = new AtomicInteger();

        final MutableClock clock = MutableClock.startingNow();
        final Instant start = clock.instant();
        final TestDatabase db;
        final Dialect dialect;
        final OutboxAdmin admin;
        final OutboxPruner pruner;
        // a: publishAll overridden (concurrent path), can hang, keeps sent rows; b: send by send,
        // deletes sent rows; x and y: as a, in exclusive mode under one lease.
        final Map<String, OutboxRelay> relays = new HashMap<>();
        final String leaseName = "ex-" + worlds.getAndIncrement();
        String leaseHolder;
        Instant leaseExpiresAt;
        final Map<Long, Row> rows = new TreeMap<>();
        final Set<String> rolledBack = new HashSet<>();
        final Map<String, Long> lastSentIdOfKey = new HashMap<>();
        final Deque<Answer> answers = new ArrayDeque<>();
        final List<Send> sends = new ArrayList<>();
        final List<String> moves = new ArrayList<>();
        Runnable duringSend;
        int transactions;

        World(TestDatabase db) {
            this.db = db;
            db.execute("DELETE FROM once_outbox");
            dialect = Dialects.detect(db.dataSource());
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            admin = OutboxAdmin.builder()
                    .dataSource(db.dataSource())
                    .clock(clock)
                    .build();
            pruner = OutboxPruner.builder()
                    .dataSource(db.dataSource())
                    .clock(clock)
                    .retention(RETENTION)
                    .meterRegistry(registry)
                    .build();
            for (String name : List.of("a", "x", "y")) {
                OutboxRelay.Builder b = OutboxRelay.builder()
                        .dataSource(db.dataSource())
                        .clock(clock)
                        .name(name)
                        .batchSize(BATCH_A)
                        .sendTimeout(SEND_TIMEOUT)
                        .retryPolicy(RETRIES)
                        .meterRegistry(registry)
                        .publisher(concurrent(name));
                if (!name.equals("a")) {
                    b.lease(leaseName, LEASE_TTL);
                }
                relays.put(name, b.build());
            }
            relays.put(
                    "b",
                    OutboxRelay.builder()
                            .dataSource(db.dataSource())
                            .clock(clock)
                            .name("b")
                            .retryPolicy(RETRIES)
                            .deleteSent(true)
                            .meterRegistry(registry)
                            .publisher(m -> {
                                Answer a = saw("b", m, false);
                                if (a == Answer.OK) {
                                    return new Receipt(200, "ok");
                                }
                                throw failure(a);
                            })
                            .build());
        }

        /** A publisher sending a batch at once, running {@link #duringSend} first if set. */
        private Publisher concurrent(String relay) {
            return new Publisher() {
                @Override
                public Receipt publish(OutboxMessage m) {
                    throw new AssertionError("relay " + relay + " sends through publishAll, yet publish was called");
                }

                @Override
                public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
                    Runnable twist = duringSend;
                    duringSend = null;
                    if (twist != null) {
                        twist.run();
                    }
                    return messages.stream()
                            .map(m -> stage(saw(relay, m, true)))
                            .toList();
                }
            };
        }

        private static CompletionStage<Receipt> stage(Answer a) {
            return switch (a) {
                case OK -> CompletableFuture.completedFuture(new Receipt(200, "ok"));
                case HANG -> new CompletableFuture<>();
                default -> CompletableFuture.failedFuture(failure(a));
            };
        }

        private static Exception failure(Answer a) {
            return switch (a) {
                case RETRYABLE -> PublishFailure.retryable("scripted", new Receipt(503, "busy"), null);
                case PERMANENT -> PublishFailure.permanent("scripted", new Receipt(422, "invalid"), null);
                default -> new IllegalStateException("scripted " + a);
            };
        }

        /** Records a send and checks what it carries; returns the scripted answer. */
        private Answer saw(String relay, OutboxMessage m, boolean canHang) {
            Answer a = answers.isEmpty() ? Answer.OK : answers.poll();
            if (a == Answer.HANG && !canHang) {
                a = Answer.THROW; // relay b sends in its own thread: a hang would block the test
            }
            sends.add(new Send(relay, m, a));
            String what = "relay " + relay + " sending row " + m.id() + " (" + m.eventId() + ") after " + moves;
            assertThat(rolledBack).as(what + ": a rolled-back row").doesNotContain(m.eventId());
            Row row = rows.get(m.id());
            assertThat(row).as(what + ": a row the model knows").isNotNull();
            assertThat(m.eventId()).as(what + ": its event id").isEqualTo(row.eventId);
            assertThat(m.headers().get(OutboxMessage.EVENT_ID_HEADER))
                    .as(what + ": the event id header")
                    .isEqualTo(row.eventId);
            assertThat(m.idempotencyKey()).as(what + ": its idempotency key").isEqualTo(row.idempotencyKey);
            assertThat(m.key()).as(what + ": its key").isEqualTo(row.key);
            assertThat(m.attempts()).as(what + ": its attempts").isEqualTo(row.attempts);
            if (row.key != null) {
                long last = lastSentIdOfKey.getOrDefault(row.key, 0L);
                assertThat(m.id())
                        .as(what + ": key " + row.key + " in id order, after row " + last)
                        .isGreaterThanOrEqualTo(last);
                lastSentIdOfKey.put(row.key, m.id());
            }
            return a;
        }

        /** Per row: bit 0..1 its key (k0, k1, none), and an explicit idempotency key when above 2. */
        void commit(List<Integer> spec) {
            for (String[] written : write(spec, true)) {
                String eventId = written[0];
                long id = db.queryLong("SELECT id FROM once_outbox WHERE event_id = '" + eventId + "'");
                rows.put(id, new Row(id, eventId, written[1], written[2], clock.instant()));
            }
        }

        void rollBack(List<Integer> spec) {
            write(spec, false).forEach(written -> rolledBack.add(written[0]));
        }

        /** Writes the rows in one transaction; returns each one's event id, key and idempotency key. */
        private List<String[]> write(List<Integer> spec, boolean commit) {
            try (Connection c = db.dataSource().getConnection()) {
                c.setAutoCommit(false);
                TransactionOutbox outbox = TransactionOutbox.builder()
                        .connection(c)
                        .dialect(dialect)
                        .source("writer")
                        .cause("t" + transactions++)
                        .clock(clock)
                        .build();
                List<String[]> written = new ArrayList<>();
                for (int n : spec) {
                    String key = KEYS[n % 3];
                    String idem = n >= 3 ? "idem-" + transactions + "-" + written.size() : null;
                    String eventId = outbox.add("topic", key, "p".getBytes(StandardCharsets.UTF_8), Map.of(), idem);
                    written.add(new String[] {eventId, key, idem == null ? eventId : idem});
                }
                outbox.flush();
                if (commit) {
                    c.commit();
                } else {
                    c.rollback();
                }
                c.setAutoCommit(true);
                return written;
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        }

        /** What a batch locks ({@code locked}) and what of it it sends from ({@code taken}). */
        record Take(List<Long> locked, List<Long> taken) {}

        /**
         * What a batch of this relay locks now, in the order it takes them: the lock query's rule
         * (pending, available, of a key whose head is pending and available no later; the oldest
         * available first up to the batch size; none locked by the other relay); and what it keeps
         * of that: the rows without a key and each key's run from its head, every row's predecessor
         * (the key's newest older pending or dead row) the row kept before it.
         */
        private Take sendable(Set<Long> lockedElsewhere, String relay) {
            Instant now = clock.instant();
            List<Long> locked = rows.values().stream()
                    .filter(r -> r.state.equals("pending") && !r.availableAt.isAfter(now))
                    .filter(r -> !lockedElsewhere.contains(r.id))
                    .filter(r -> r.key == null || headAllows(r))
                    .sorted(Comparator.comparing((Row r) -> r.availableAt).thenComparingLong(r -> r.id))
                    .map(r -> r.id)
                    .limit(relay.equals("b") ? 100 : BATCH_A)
                    .toList();
            Map<String, Long> last = new HashMap<>();
            Set<String> ended = new HashSet<>();
            Set<Long> kept = new HashSet<>();
            for (long id : locked.stream().sorted().toList()) {
                Row r = rows.get(id);
                if (r.key == null) {
                    kept.add(id);
                } else if (!ended.contains(r.key) && Objects.equals(predecessor(r), last.get(r.key))) {
                    last.put(r.key, id);
                    kept.add(id);
                } else {
                    ended.add(r.key);
                }
            }
            return new Take(locked, locked.stream().filter(kept::contains).toList());
        }

        private boolean headAllows(Row r) {
            Row head = rows.values().stream()
                    .filter(o -> r.key.equals(o.key) && (o.state.equals("pending") || o.state.equals("dead")))
                    .findFirst()
                    .orElseThrow();
            return head.state.equals("pending") && !head.availableAt.isAfter(r.availableAt);
        }

        /** The key's newest pending or dead row older than {@code r}, null when {@code r} is its head. */
        private Long predecessor(Row r) {
            return rows.values().stream()
                    .filter(o ->
                            o.id < r.id && r.key.equals(o.key) && (o.state.equals("pending") || o.state.equals("dead")))
                    .map(o -> o.id)
                    .reduce((x, y) -> y)
                    .orElse(null);
        }

        /**
         * The waves a batch that kept {@code taken} sends, given what its sends were answered: the
         * first holds each key's first row and the rows without a key, the n-th the n-th row of each
         * key whose row before it was accepted (OK). Returns the rows of the first wave, of the first
         * two, and so on: the batch sends one of these (later waves wait for time left in the send
         * timeout, which a hung send or a nested batch may spend).
         */
        private List<Set<Long>> waves(List<Long> taken, Map<Long, Answer> answered) {
            Map<String, Long> lastOfKey = new HashMap<>();
            Map<Long, Long> previous = new HashMap<>();
            List<List<Long>> byWave = new ArrayList<>();
            Map<String, Integer> length = new HashMap<>();
            for (long id : taken.stream().sorted().toList()) {
                String key = rows.get(id).key;
                int wave = key == null ? 0 : length.merge(key, 1, Integer::sum) - 1;
                if (key != null && lastOfKey.containsKey(key)) {
                    previous.put(id, lastOfKey.get(key));
                }
                if (key != null) {
                    lastOfKey.put(key, id);
                }
                if (wave == byWave.size()) {
                    byWave.add(new ArrayList<>());
                }
                byWave.get(wave).add(id);
            }
            List<Set<Long>> prefixes = new ArrayList<>();
            Set<Long> sent = new HashSet<>();
            for (List<Long> wave : byWave) {
                List<Long> due = wave.stream()
                        .filter(id -> !previous.containsKey(id) || answered.get(previous.get(id)) == Answer.OK)
                        .toList();
                if (due.isEmpty()) {
                    break;
                }
                sent.addAll(due);
                prefixes.add(Set.copyOf(sent));
            }
            return prefixes;
        }

        void relay(Batch b) {
            answers.clear();
            answers.addAll(b.answers());
            sends.clear();
            String relay = b.relay();
            boolean exclusive = relay.equals("x") || relay.equals("y");
            if (exclusive && !leaseFor(relay)) {
                assertThat(relays.get(relay).relayOnce())
                        .as("relay " + relay + " while the other holds the lease, after " + moves)
                        .isZero();
                assertThat(sends)
                        .as("sends of relay " + relay + " without the lease")
                        .isEmpty();
                return;
            }
            Take take = sendable(Set.of(), relay);
            List<Long> expected = take.taken();
            boolean twist = b.twist() > 0 && !expected.isEmpty() && !relay.equals("b");
            boolean takeover = twist && exclusive && b.twist() == 2;
            if (twist && !exclusive) {
                // b runs while a holds its batch's rows locked: it skips them, and the rows of their keys wait.
                duringSend = () -> nested("b", heldBy(take));
            } else if (twist) {
                // The relay pauses past its lease (GC, SIGSTOP) in the middle of its send; the other
                // one may acquire the lease meanwhile and send what the paused one's locks leave it.
                String other = relay.equals("x") ? "y" : "x";
                Set<Long> held = heldBy(take);
                duringSend = () -> {
                    clock.advance(LEASE_TTL.plusSeconds(1));
                    if (takeover) {
                        assertThat(leaseFor(other))
                                .as("the lapsed lease is free")
                                .isTrue();
                        nested(other, held);
                    }
                };
            }
            int handled = relays.get(relay).relayOnce();
            duringSend = null;
            if (takeover) {
                fenced(relay, expected, handled);
                return;
            }
            if (twist && exclusive) {
                leaseExpiresAt = clock.instant().plus(LEASE_TTL); // renewed at the end: nobody took it
            }
            applySends(relay, expected, handled);
        }

        /**
         * The rows a batch holds locked until it ends: on PostgreSQL those it sends (it releases the
         * rows after a gap, Dialect#outboxRelock); on MariaDB every row its lock query locked, and
         * also the row its lock query's range scan stopped at when it found fewer than a batch
         * (the first pending row available later than now). InnoDB keeps the lock of every secondary
         * index record a locking read examined, even at READ COMMITTED (MDEV-14589: "the unlocking never
         * worked for secondary index records"), so a rival's SKIP LOCKED passes that row until the batch
         * ends, after the clock made it available too: it waits for a later batch, never sent twice.
         */
        private Set<Long> heldBy(Take take) {
            if (!dialect.equals(Dialects.MARIADB)) {
                return Set.copyOf(take.taken());
            }
            List<Long> locked = take.locked();
            Set<Long> held = new HashSet<>(locked);
            Instant now = clock.instant();
            if (locked.size() < BATCH_A) {
                rows.values().stream()
                        .filter(r -> r.state.equals("pending") && r.availableAt.isAfter(now))
                        .min(Comparator.comparing((Row r) -> r.availableAt).thenComparingLong(r -> r.id))
                        .ifPresent(r -> held.add(r.id));
            }
            return held;
        }

        /** A batch of {@code relay} inside another's send, which holds the rows {@code locked}. */
        private void nested(String relay, Collection<Long> locked) {
            applySends(
                    relay,
                    sendable(Set.copyOf(locked), relay).taken(),
                    relays.get(relay).relayOnce());
        }

        /**
         * The model's lease for an exclusive relay's batch: kept (renewed past half its time) by its
         * holder, acquired when free or lapsed; false when the other relay holds it.
         */
        private boolean leaseFor(String relay) {
            Instant now = clock.instant();
            if (relay.equals(leaseHolder)) {
                if (!now.isBefore(leaseExpiresAt.minus(LEASE_TTL.dividedBy(2)))) {
                    leaseExpiresAt = now.plus(LEASE_TTL);
                }
                return true;
            }
            if (leaseHolder != null && now.isBefore(leaseExpiresAt)) {
                return false;
            }
            leaseHolder = relay;
            leaseExpiresAt = now.plus(LEASE_TTL);
            return true;
        }

        /**
         * A batch that lost its lease to the other relay during its first wave: it sends no other
         * wave, rolls back, yet counts an attempt for each row it sent (dead once the policy is
         * spent); the rows stay available as they were.
         */
        private void fenced(String relay, List<Long> expected, int handled) {
            String what = "relay " + relay + "'s fenced batch at +" + elapsed() + " after " + moves;
            List<Send> mine = sentBy(relay, expected, what, true);
            assertThat(handled).as(what + ": rows handled").isZero();
            for (Send s : mine) {
                long id = s.message().id();
                Row row = rows.get(id);
                row.attempts++;
                if (!RETRIES.allowsRetry(row.attempts)) {
                    row.state = "dead";
                }
            }
        }

        /**
         * The sends of {@code relay}'s batch that kept {@code taken}, taken off the log: the first
         * wave alone when {@code firstWave}, else the first waves, as many as it sent (at least one).
         */
        private List<Send> sentBy(String relay, List<Long> taken, String what, boolean firstWave) {
            List<Send> mine =
                    sends.stream().filter(s -> s.relay().equals(relay)).toList();
            sends.removeAll(mine);
            Map<Long, Answer> answered = new HashMap<>();
            mine.forEach(s -> answered.put(s.message().id(), s.answer()));
            List<Set<Long>> waves = waves(taken, answered);
            Set<Long> sent = Set.copyOf(answered.keySet());
            assertThat(mine).as(what + ": each row sent once").hasSize(sent.size());
            if (firstWave || waves.isEmpty()) {
                assertThat(sent)
                        .as(what + ": the first wave of " + taken + ", answered " + answered + ", of " + rows.values())
                        .isEqualTo(waves.isEmpty() ? Set.of() : waves.get(0));
            } else {
                assertThat(waves)
                        .as(what + ": the rows sent, " + sent + ", are the first waves of " + taken + ", answered "
                                + answered + ", of " + rows.values())
                        .contains(sent);
            }
            return mine;
        }

        private void applySends(String relay, List<Long> expected, int handled) {
            String what = "relay " + relay + "'s batch at +" + elapsed() + " after " + moves;
            List<Send> mine = sentBy(relay, expected, what, false);
            assertThat(handled).as(what + ": rows handled").isEqualTo(mine.size());
            Instant now = clock.instant();
            for (Send s : mine) {
                Row row = rows.get(s.message().id());
                row.attempts++;
                switch (s.answer()) {
                    case OK -> {
                        row.accepted++;
                        row.state = relay.equals("b") ? "deleted" : "sent";
                        row.sentAt = now;
                    }
                    case PERMANENT -> row.state = "dead";
                    default -> {
                        if (RETRIES.allowsRetry(row.attempts)) {
                            row.availableAt = now.plus(RETRIES.delay(row.attempts));
                        } else {
                            row.state = "dead";
                        }
                    }
                }
            }
        }

        private static final Duration[] STEPS = {
            Duration.ofSeconds(1),
            Duration.ofSeconds(9),
            Duration.ofSeconds(10),
            Duration.ofSeconds(25),
            Duration.ofMinutes(2)
        };

        void advance(int n) {
            clock.advance(STEPS[n]);
        }

        /** Replays or discards the n-th row (modulo their number): it takes only when the row is dead. */
        void admin(int n, boolean replay) {
            Row row = new ArrayList<>(rows.values()).get(n % rows.size());
            int done = replay ? admin.replay(List.of(row.id)) : admin.discard(List.of(row.id));
            boolean dead = row.state.equals("dead");
            assertThat(done)
                    .as((replay ? "replay of " : "discard of ") + row + " after " + moves)
                    .isEqualTo(dead ? 1 : 0);
            if (dead && replay) {
                replayed(row);
            } else if (dead) {
                row.state = "discarded";
            }
        }

        void prune() {
            Instant cutoff = clock.instant().minus(RETENTION);
            List<Row> old = rows.values().stream()
                    .filter(r -> r.state.equals("sent") && r.sentAt.isBefore(cutoff))
                    .toList();
            assertThat(pruner.prune())
                    .as("prune at +" + elapsed() + " after " + moves)
                    .isEqualTo(old.size());
            old.forEach(r -> r.state = "deleted");
        }

        /** The admin's view (stats, dead list) and the table's rows agree with the model. */
        void check() {
            String what = "after " + moves;
            long pending = count("pending");
            long dead = count("dead");
            OutboxStats stats = admin.stats();
            assertThat(stats.pending()).as(what + ": pending rows").isEqualTo(pending);
            assertThat(stats.dead()).as(what + ": dead rows").isEqualTo(dead);
            List<DeadMessage> listed = admin.dead(0, 1000);
            assertThat(listed.stream()
                            .map(d -> d.message().id() + "/" + d.message().attempts())
                            .toList())
                    .as(what + ": the dead rows and their attempts")
                    .containsExactlyElementsOf(rows.values().stream()
                            .filter(r -> r.state.equals("dead"))
                            .map(r -> r.id + "/" + r.attempts)
                            .toList());
            assertThat(db.queryLong("SELECT count(*) FROM once_outbox"))
                    .as(what + ": rows in the table")
                    .isEqualTo(pending + dead + count("sent"));
        }

        private long count(String state) {
            return rows.values().stream().filter(r -> r.state.equals(state)).count();
        }

        /** Replays every dead row and sends until nothing is pending: every kept row was sent. */
        void drain() {
            moves.add("drain");
            List<Long> dead = rows.values().stream()
                    .filter(r -> r.state.equals("dead"))
                    .map(r -> r.id)
                    .toList();
            assertThat(admin.replay(dead)).as("replaying " + dead).isEqualTo(dead.size());
            dead.forEach(id -> replayed(rows.get(id)));
            for (int i = 0; count("pending") > 0; i++) {
                assertThat(i)
                        .as("draining after " + moves + " leaves " + rows.values())
                        .isLessThan(50);
                clock.advance(Duration.ofHours(1));
                relay(new Batch(i % 2 == 0 ? "a" : "b", List.of(), 0));
                check();
            }
            assertThat(rows.values().stream().filter(r -> !r.state.equals("discarded") && r.accepted == 0))
                    .as("committed rows never sent, after " + moves)
                    .isEmpty();
        }

        /** A replayed row: pending, attempts reset, available now. */
        private void replayed(Row row) {
            row.state = "pending";
            row.attempts = 0;
            row.availableAt = clock.instant();
        }

        private String elapsed() {
            return Duration.between(start, clock.instant()).toString();
        }
    }
}
