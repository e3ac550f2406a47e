package dev.once.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.InvalidConfigurationException;
import dev.once.InvalidDeliveryException;
import dev.once.Outcome;
import dev.once.Schema;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.InvalidIdempotencyKeyException;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Receipt;
import dev.once.testsupport.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * S3: 1,000 generated hostile identifiers ({@link HostileStrings}) as event ids, consumer names,
 * table prefixes, idempotency keys, outbox destinations and header values. Each must be refused
 * with a message naming what was refused, or stored and read back exactly — two distinct strings
 * never folded into one (that loses an event), nothing injected, nothing half-applied.
 */
@Tag("chaos")
class HostileInputTest {

    private static final int COUNT = 1_000;
    private static final List<String> HOSTILE = HostileStrings.generate(COUNT, 3);

    /**
     * Each run (an identifier kind on a database) is made once and asserted by both its lenient and
     * its strict test: the strict one asserts more of the same 1,000 strings, not a run of its own.
     */
    private static final Map<String, Object> RUNS = new HashMap<>();

    /**
     * Holes this test found in code it does not own (reported, not fixed here). Strings that hit
     * one are counted and printed, but not asserted, so the test guards everything else; the
     * {@code strict…} tests below allow none; they run and pass, as no generated string hits a hole now.
     */
    enum Hole {
        /**
         * An unpaired UTF-16 surrogate is accepted and then written by the driver as '?', so two
         * distinct ids that differ only there become one row: the second event is taken for a
         * duplicate and lost (an idempotency key replays another request's result).
         */
        LONE_SURROGATE,
        /**
         * MariaDB's utf8mb4_bin is a PAD SPACE collation: 'id' and 'id ' are equal to the primary
         * key, so the second is taken for a duplicate and lost.
         */
        TRAILING_SPACE_ON_MARIADB,
        /** An outbox destination with NUL passes the outbox's validation and fails in PostgreSQL with no name. */
        NUL_IN_OUTBOX_DESTINATION;

        static Hole of(String s, Databases db, String field) {
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (Character.isHighSurrogate(c) && (i + 1 == s.length() || !Character.isLowSurrogate(s.charAt(i + 1)))
                        || Character.isLowSurrogate(c) && (i == 0 || !Character.isHighSurrogate(s.charAt(i - 1)))) {
                    return LONE_SURROGATE;
                }
            }
            if (db == Databases.MARIADB && s.endsWith(" ")) {
                return TRAILING_SPACE_ON_MARIADB;
            }
            if (field.equals("destination") && s.indexOf('\0') >= 0) {
                return NUL_IN_OUTBOX_DESTINATION;
            }
            return null;
        }
    }

    /** What became of the hostile strings used as one kind of identifier. */
    static final class Tally {
        final String name;
        final Databases db;
        final String field;
        final Map<Hole, Long> holes = new java.util.EnumMap<>(Hole.class);
        long unexpected;
        long refusedNamed;
        long roundTripped;
        /** Accepted, but taken for another distinct string already stored: an event lost. */
        long collided;
        /** Accepted, stored, but read back different. */
        long altered;
        /** Refused, but by an error that does not say what was wrong (a database error after acceptance). */
        long refusedUnnamed;

        long appliedTwice;
        final List<String> examples = new ArrayList<>();

        Tally(String name, Databases db, String field) {
            this.name = name;
            this.db = db;
            this.field = field;
        }

        void violation(String kind, String value, String detail) {
            Hole hole = Hole.of(value, db, field);
            if (hole == null) {
                unexpected++;
            } else {
                holes.merge(hole, 1L, Long::sum);
            }
            if (examples.size() < 6 || hole == null && examples.size() < 12) {
                examples.add(kind + " " + HostileStrings.show(value) + (detail == null ? "" : ": " + detail));
            }
        }

        void refused(String message, String field, String value) {
            if (message != null && message.contains(field)) {
                refusedNamed++;
            } else {
                refusedUnnamed++;
                violation("refused-unnamed", value, message);
            }
        }

        Chaos.Figure print() {
            Chaos.Figure f = Chaos.figure("hostile-" + name)
                    .rounds(HOSTILE.size())
                    .lost(collided)
                    .appliedTwice(appliedTwice)
                    .put("db", db.name().toLowerCase())
                    .put("refused_named", refusedNamed)
                    .put("round_tripped", roundTripped)
                    .put("altered", altered)
                    .put("refused_unnamed", refusedUnnamed)
                    .put("outside_known_holes", unexpected);
            holes.forEach((h, n) -> f.put("hole_" + h.name().toLowerCase(), n));
            f.print();
            examples.forEach(e -> System.out.println("  " + name + " " + e));
            return f;
        }

        /** No violation outside the known holes. */
        void assertCleanBut() {
            assertThat(unexpected)
                    .as(name + ": violations outside the known holes " + holes + " " + examples)
                    .isZero();
            assertThat(refusedNamed + roundTripped + collided + altered + refusedUnnamed)
                    .as(name + ": every string accounted for")
                    .isEqualTo(HOSTILE.size());
        }

        /** No violation at all. */
        void assertClean() {
            assertThat(collided)
                    .as(name + ": distinct strings folded into one " + examples)
                    .isZero();
            assertThat(altered)
                    .as(name + ": stored but read back different " + examples)
                    .isZero();
            assertThat(refusedUnnamed)
                    .as(name + ": refused without naming it " + examples)
                    .isZero();
            assertThat(appliedTwice).as(name + ": applied twice " + examples).isZero();
            assertThat(refusedNamed + roundTripped)
                    .as(name + ": every string accounted for")
                    .isEqualTo(HOSTILE.size());
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Databases.class)
    void hostileEventIdsAreRefusedByNameOrRoundTripExactly(Databases database) throws Exception {
        eventIds(database).assertCleanBut();
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Databases.class)
    void strictHostileEventIds(Databases database) throws Exception {
        eventIds(database).assertClean();
    }

    private static Tally eventIds(Databases database) throws Exception {
        return once("event-id-" + database, () -> eventIdsRun(database));
    }

    private static Tally eventIdsRun(Databases database) throws Exception {
        Tally t = new Tally("event-id", database, "event id");
        try (TestDatabase db = database.fresh(4)) {
            Effects.create(db);
            IdempotentConsumer once = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("hostile")
                    .handler(Effects.HANDLER)
                    .build();
            Set<String> accepted = new HashSet<>();
            for (String id : HOSTILE) {
                Delivery d;
                try {
                    d = Delivery.of(id, "payload");
                } catch (InvalidDeliveryException e) {
                    t.refused(e.getMessage(), "event id", id);
                    continue;
                }
                Outcome first = once.process(d);
                if (first.status() == Outcome.Status.DUPLICATE) {
                    t.collided++;
                    t.violation("collided", id, "a distinct event id was taken for one already claimed");
                    continue;
                }
                if (!first.shouldAcknowledge()) {
                    t.refused(String.valueOf(first.failure()), "event id", id);
                    continue;
                }
                Outcome again = once.process(d.redelivery());
                if (again.status() != Outcome.Status.DUPLICATE) {
                    t.appliedTwice++;
                    t.violation("redelivery-not-duplicate", id, again.toString());
                }
                accepted.add(id);
            }
            Set<String> stored = column(db, "SELECT event_id FROM once_inbox WHERE consumer = 'hostile'");
            Map<String, Long> effects = Effects.counts(db);
            for (String id : accepted) {
                if (stored.contains(id) && effects.getOrDefault(id, 0L) == 1) {
                    t.roundTripped++;
                } else {
                    t.altered++;
                    t.violation("altered", id, "stored " + stored.contains(id) + ", effect rows " + effects.get(id));
                }
            }
            t.print();
        }
        return t;
    }

    @Test
    void hostileConsumerNamesAreRefusedByNameOrRoundTripExactly() throws Exception {
        Tally t = new Tally("consumer", Databases.POSTGRES, "consumer");
        try (TestDatabase db = Databases.POSTGRES.fresh(4)) {
            Effects.create(db);
            for (String name : HOSTILE) {
                IdempotentConsumer c;
                try {
                    c = IdempotentConsumer.builder()
                            .dataSource(db.dataSource())
                            .consumer(name)
                            .handler(Effects.HANDLER)
                            .build();
                } catch (InvalidConfigurationException e) {
                    t.refused(e.getMessage(), "consumer", name);
                    continue;
                }
                Outcome o = c.process(Delivery.of("evt-" + name.hashCode(), "p"));
                Set<String> stored = column(db, "SELECT consumer FROM once_inbox");
                if (o.status() == Outcome.Status.APPLIED && stored.contains(name)) {
                    t.roundTripped++;
                } else {
                    t.altered++;
                    t.violation("altered", name, o.toString());
                }
            }
            t.print();
        }
        t.assertClean();
    }

    @Test
    void hostileTablePrefixesAreRefusedByNameOrWork() throws Exception {
        Tally t = new Tally("table-prefix", Databases.POSTGRES, "prefix");
        try (TestDatabase db = Databases.POSTGRES.fresh(4)) {
            Effects.create(db);
            for (String prefix : HOSTILE) {
                try {
                    Schema.migrate(db.dataSource(), prefix);
                    IdempotentConsumer c = IdempotentConsumer.builder()
                            .dataSource(db.dataSource())
                            .consumer("p")
                            .tablePrefix(prefix)
                            .handler(Effects.HANDLER)
                            .build();
                    Outcome o = c.process(Delivery.of("evt", "p"));
                    if (o.status() == Outcome.Status.APPLIED
                            && db.queryLong("SELECT count(*) FROM \"" + prefix + "inbox\"") == 1) {
                        t.roundTripped++;
                    } else {
                        t.altered++;
                        t.violation("altered", prefix, o.toString());
                    }
                } catch (InvalidConfigurationException | IllegalArgumentException e) {
                    t.refused(e.getMessage(), "prefix", prefix);
                }
            }
            t.print();
        }
        t.assertClean();
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Databases.class)
    void hostileIdempotencyKeysAreRefusedByNameOrReplayTheirOwnResultExactly(Databases database) throws Exception {
        idempotencyKeys(database).assertCleanBut();
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Databases.class)
    void strictHostileIdempotencyKeys(Databases database) throws Exception {
        idempotencyKeys(database).assertClean();
    }

    private static Tally idempotencyKeys(Databases database) throws Exception {
        return once("idempotency-key-" + database, () -> idempotencyKeysRun(database));
    }

    private static Tally idempotencyKeysRun(Databases database) throws Exception {
        Tally t = new Tally("idempotency-key", database, "idempotency key");
        try (TestDatabase db = database.fresh(4)) {
            IdempotencyKeys keys =
                    IdempotencyKeys.builder().dataSource(db.dataSource()).build();
            for (String key : HOSTILE) {
                byte[] result = ("result of " + key).getBytes(StandardCharsets.UTF_8);
                BeginResult first;
                try {
                    first = keys.begin("hostile", key, "fp");
                } catch (InvalidIdempotencyKeyException e) {
                    t.refused(e.getMessage(), "idempotency key", key);
                    continue;
                } catch (RuntimeException e) {
                    t.refused(e.getMessage(), "idempotency key", key); // names the key only if it says so
                    continue;
                }
                if (!(first instanceof BeginResult.Started started)) {
                    t.collided++;
                    t.violation("collided", key, "first begin answered " + first);
                    continue;
                }
                keys.complete(started, 200, result);
                BeginResult replay = keys.begin("hostile", key, "fp");
                if (replay instanceof BeginResult.Replay r && Arrays.equals(r.body(), result)) {
                    t.roundTripped++;
                } else {
                    t.altered++;
                    t.violation("altered", key, "second begin answered " + replay);
                }
            }
            t.print();
        }
        return t;
    }

    @Test
    void hostileOutboxDestinationsAndHeaderValuesAreRefusedByNameOrSentExactly() throws Exception {
        for (Tally t : outbox()) {
            t.assertCleanBut();
        }
    }

    @Test
    void strictHostileOutboxDestinationsAndHeaderValues() throws Exception {
        for (Tally t : outbox()) {
            t.assertClean();
        }
    }

    private static List<Tally> outbox() throws Exception {
        return once("outbox", HostileInputTest::outboxRun);
    }

    private static List<Tally> outboxRun() throws Exception {
        Tally destinations = new Tally("outbox-destination", Databases.POSTGRES, "destination");
        Tally headers = new Tally("outbox-header", Databases.POSTGRES, "header");
        try (TestDatabase db = Databases.POSTGRES.fresh(4)) {
            Map<String, String> byEvent = new ConcurrentHashMap<>();
            IdempotentConsumer once = IdempotentConsumer.builder()
                    .dataSource(db.dataSource())
                    .consumer("hostile")
                    .handler((d, tx) -> {
                        String s = byEvent.get(d.eventId());
                        boolean asDestination = d.payloadText().equals("destination");
                        tx.outbox()
                                .add(
                                        asDestination ? s : "queue",
                                        null,
                                        d.payload(),
                                        asDestination ? Map.of() : Map.of("x-hostile", s),
                                        null);
                    })
                    .build();
            List<String> sentDestinations = new ArrayList<>();
            List<String> sentHeaders = new ArrayList<>();
            OutboxRelay relay = OutboxRelay.builder()
                    .dataSource(db.dataSource())
                    .publisher(m -> {
                        if (m.destination().equals("queue")) {
                            sentHeaders.add(m.headers().get("x-hostile"));
                        } else {
                            sentDestinations.add(m.destination());
                        }
                        return Receipt.NONE;
                    })
                    .build();
            Set<String> acceptedDestinations = new HashSet<>();
            Set<String> acceptedHeaders = new HashSet<>();
            int i = 0;
            for (String s : HOSTILE) {
                for (String use : List.of("destination", "header")) {
                    String id = use + "-" + i;
                    byEvent.put(id, s);
                    Outcome o = once.process(Delivery.of(id, use));
                    Tally t = use.equals("destination") ? destinations : headers;
                    if (o.shouldAcknowledge()) {
                        (use.equals("destination") ? acceptedDestinations : acceptedHeaders).add(s);
                    } else {
                        t.refused(String.valueOf(o.failure()), use.equals("destination") ? "destination" : "header", s);
                    }
                }
                i++;
            }
            while (relay.relayOnce() > 0) {
                // drain
            }
            for (String s : acceptedDestinations) {
                if (sentDestinations.contains(s)) {
                    destinations.roundTripped++;
                } else {
                    destinations.altered++;
                    destinations.violation("altered", s, "not sent as given");
                }
            }
            for (String s : acceptedHeaders) {
                if (sentHeaders.contains(s)) {
                    headers.roundTripped++;
                } else {
                    headers.altered++;
                    headers.violation("altered", s, "not sent as given");
                }
            }
            destinations.print();
            headers.print();
        }
        return List.of(destinations, headers);
    }

    /** The run named {@code key}, made by {@code run} the first time it is asked for. */
    @SuppressWarnings("unchecked")
    private static synchronized <T> T once(String key, Callable<T> run) throws Exception {
        Object done = RUNS.get(key);
        if (done == null) {
            done = run.call();
            RUNS.put(key, done);
        }
        return (T) done;
    }

    private static Set<String> column(TestDatabase db, String sql) throws SQLException {
        Set<String> values = new HashSet<>();
        try (Connection c = db.dataSource().getConnection();
                PreparedStatement ps = c.prepareStatement(sql);
                ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                values.add(rs.getString(1));
            }
        }
        return values;
    }
}
