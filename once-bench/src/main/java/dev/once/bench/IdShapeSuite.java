package dev.once.bench;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import java.io.IOException;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import org.postgresql.PGConnection;

/**
 * What the shape of the producer's event id costs the inbox: bytes per claimed event (heap and
 * indexes) and the rate of set-wise claims (one {@code unnest} insert of {@value #BATCH} ids + commit,
 * one connection, the Kafka path's claim), per id shape: random (v4) or time-ordered (v7) UUIDs,
 * stored as text (the inbox's {@code varchar} column today) or in a {@code uuid} column. Each shape
 * is a hand-written floor on a table of the inbox's shape (consumer, event id, processed_at,
 * payload_fingerprint; primary key (consumer, event id); BRIN on processed_at); {@code once} runs
 * its own batch claim ({@code processBatch} with a batch handler that does nothing) on the real
 * inbox beside them, in the same interleaved turns.
 */
final class IdShapeSuite implements Suite {

    static final int BATCH = 500;
    static final int SIZE_ROWS = 300_000;
    static final int QUICK_SIZE_ROWS = 100_000;
    static final List<Shape> SHAPES = List.of(Shape.values());
    /** The shapes also claimed COPY-first and INSERT-first: today's column and ids, and the smallest shape. */
    static final List<Shape> FIRST_SHAPES = List.of(Shape.TEXT_V4, Shape.UUID_V7_FULL);

    /** How a floor claims ids it expects to be new. */
    enum Claim {
        /** {@code INSERT … ON CONFLICT DO NOTHING RETURNING}: once's statement. */
        ON_CONFLICT("floor"),
        /** {@link #copyClaim}, falling back to the insert on a duplicate. */
        COPY_FIRST("floor-copy"),
        /** {@link #insertClaim}, falling back to the insert on a duplicate. */
        INSERT_FIRST("floor-insert");

        final String prefix;

        Claim(String prefix) {
            this.prefix = prefix;
        }

        /** Claims ids expected new: true when all were, false (rolled back) when the caller must use ON_CONFLICT. */
        boolean claimNew(Connection c, String table, Shape shape, Collection<String> sortedIds) throws SQLException {
            return switch (this) {
                case ON_CONFLICT -> false;
                case COPY_FIRST -> copyClaim(c, table, sortedIds);
                case INSERT_FIRST -> insertClaim(c, table, shape, sortedIds);
            };
        }
    }

    /** An id shape: how ids are made and which column type holds them. */
    enum Shape {
        TEXT_V4("text, random (v4)", "varchar(255)", false, 0),
        TEXT_V7("text, time-ordered (v7)", "varchar(255)", true, 0),
        UUID_V4("uuid, random (v4)", "uuid", false, 0),
        UUID_V7("uuid, time-ordered (v7)", "uuid", true, 0),
        // Time-ordered ids append at the key's right edge, where a page split leaves the left page
        // filled to the fillfactor (90 by default) and nothing ever lands there again: at 100 those
        // pages are full. Random ids split pages in the middle whatever the fillfactor, so it costs
        // them nothing; an id that arrives late splits one full page, as a random one would.
        UUID_V7_FULL("uuid, time-ordered (v7), key fillfactor 100", "uuid", true, 100);

        final String label;
        final String type;
        final boolean timeOrdered;
        /** The primary key's fillfactor; 0 for PostgreSQL's default (90). */
        final int keyFillfactor;

        Shape(String label, String type, boolean timeOrdered, int keyFillfactor) {
            this.label = label;
            this.type = type;
            this.timeOrdered = timeOrdered;
            this.keyFillfactor = keyFillfactor;
        }

        String key() {
            return name().toLowerCase(Locale.ROOT).replace('_', '-');
        }

        boolean uuidColumn() {
            return type.equals("uuid");
        }
    }

    @Override
    public String name() {
        return "ids";
    }

    @Override
    public void run(Run run) throws Exception {
        int sizeRows = run.settings().quick() ? QUICK_SIZE_ROWS : SIZE_ROWS;
        Map<Shape, Double> bytes = new HashMap<>();
        for (Shape shape : SHAPES) {
            try (BenchPostgres.Db db = run.postgres().freshDatabase(1)) {
                createTable(db, shape);
                bytes.put(shape, bytesPerEvent(db, shape, sizeRows));
                run.line(String.format(
                        Locale.ROOT,
                        "BENCH name=inbox-bytes shape=%s rows=%d bytes_per_event=%.0f",
                        shape.key(),
                        sizeRows,
                        bytes.get(shape)));
            }
        }
        // Claim rates, interleaved: every shape's floor and once (text ids, its own inbox).
        List<BenchPostgres.Db> dbs = new ArrayList<>();
        List<Throughput.Config> configs = new ArrayList<>();
        List<String> names = new ArrayList<>();
        List<Throughput.Rate> rates;
        try {
            for (Shape shape : SHAPES) {
                BenchPostgres.Db db = run.postgres().freshDatabase(1);
                dbs.add(db);
                createTable(db, shape);
                names.add("floor-" + shape.key());
                configs.add(new Throughput.Config("floor-" + shape.key(), 1, i -> new Claims(db, shape)));
            }
            for (Claim claim : List.of(Claim.COPY_FIRST, Claim.INSERT_FIRST)) {
                for (Shape shape : FIRST_SHAPES) {
                    BenchPostgres.Db db = run.postgres().freshDatabase(1);
                    dbs.add(db);
                    createTable(db, shape);
                    String name = claim.prefix + "-" + shape.key();
                    names.add(name);
                    configs.add(new Throughput.Config(name, 1, i -> new Claims(db, shape, claim)));
                }
            }
            BenchPostgres.Db onceDb = run.postgres().freshDatabase(1);
            dbs.add(onceDb);
            IdempotentConsumer once = IdempotentConsumer.builder()
                    .dataSource(onceDb.dataSource())
                    .consumer(CoreSuite.CONSUMER)
                    .batchHandler((claimed, tx) -> {})
                    .build();
            names.add("once-text-v4");
            configs.add(new Throughput.Config("once-text-v4", 1, i -> () -> {
                List<Delivery> batch = new ArrayList<>(BATCH);
                for (int k = 0; k < BATCH; k++) {
                    batch.add(Delivery.of(UUID.randomUUID().toString(), "x"));
                }
                for (Outcome o : once.processBatch(batch)) {
                    if (o.status() != Outcome.Status.APPLIED) {
                        throw new IllegalStateException(o.eventId() + " came out " + o.status(), o.failure());
                    }
                }
                return BATCH;
            }));
            run.postgres().checkpoint();
            rates = Throughput.measure(
                    configs,
                    run.settings().warmup(),
                    run.settings().measured(),
                    run.settings().slice());
        } finally {
            dbs.forEach(BenchPostgres.Db::close);
        }
        Map<String, Throughput.Rate> byName = new HashMap<>();
        for (int i = 0; i < names.size(); i++) {
            byName.put(names.get(i), rates.get(i));
            run.line(Run.bench(names.get(i), "claim-set", 1, BATCH, rates.get(i).eventsPerSecond()));
        }
        run.section("Inbox: id shapes, bytes per event and set-wise claims", report(bytes, byName, sizeRows));
    }

    private static String report(Map<Shape, Double> bytes, Map<String, Throughput.Rate> rates, int sizeRows) {
        StringBuilder md = new StringBuilder();
        md.append("Per id shape, a table of the inbox's shape (consumer, event id, processed_at, payload_fingerprint;")
                .append(" primary key (consumer, event id); BRIN on processed_at). Bytes: ")
                .append(String.format(Locale.ROOT, "%,d", sizeRows))
                .append(" claims made ")
                .append(BATCH)
                .append(" per statement, then `pg_total_relation_size` (heap, primary key, BRIN) / rows, as the")
                .append(
                        " inbox is while it fills (no VACUUM FULL, no REINDEX). Claims/s: one connection, one `INSERT …")
                .append(" SELECT … unnest(?) … ON CONFLICT DO NOTHING RETURNING` of ")
                .append(BATCH)
                .append(" new ids + commit per turn (COPY-first rows: one `COPY … FROM STDIN` of the same ids instead;")
                .append(
                        " plain-INSERT-first rows: the insert without `ON CONFLICT` and `RETURNING`; both would fall back")
                .append(" to the insert on a unique violation, which never happens here),")
                .append(" the shapes' floors and `once` (`processBatch`, text ids, its own")
                .append(" inbox, a batch handler that does nothing) interleaved.\n\n")
                .append("| id shape | column | bytes / event | claims/s | vs text v4 | vs text v4, paired |\n")
                .append("|---|---|---|---|---|---|\n");
        Throughput.Rate base = rates.get("floor-text-v4");
        for (Shape s : SHAPES) {
            Throughput.Rate r = rates.get("floor-" + s.key());
            md.append(String.format(
                    Locale.ROOT,
                    "| %s | `%s` | %.0f | %,.0f | %.2f | %.2f |%n",
                    s.label,
                    s.type,
                    bytes.get(s),
                    r.eventsPerSecond(),
                    r.eventsPerSecond() / base.eventsPerSecond(),
                    r.pairedRatio(base)));
        }
        for (Claim claim : List.of(Claim.COPY_FIRST, Claim.INSERT_FIRST)) {
            for (Shape s : FIRST_SHAPES) {
                Throughput.Rate r = rates.get(claim.prefix + "-" + s.key());
                md.append(String.format(
                        Locale.ROOT,
                        "| %s, %s | `%s` | (as above) | %,.0f | %.2f | %.2f |%n",
                        s.label,
                        claim == Claim.COPY_FIRST ? "COPY-first" : "plain INSERT first",
                        s.type,
                        r.eventsPerSecond(),
                        r.eventsPerSecond() / base.eventsPerSecond(),
                        r.pairedRatio(base)));
            }
        }
        Throughput.Rate once = rates.get("once-text-v4");
        md.append(String.format(
                Locale.ROOT,
                "| once (`processBatch`, text v4) | `varchar(255)` | (as text v4) | %,.0f | %.2f | %.2f |%n",
                once.eventsPerSecond(),
                once.eventsPerSecond() / base.eventsPerSecond(),
                once.pairedRatio(base)));
        double best = 0;
        Shape bestShape = null;
        for (Shape s : SHAPES) {
            if (rates.get("floor-" + s.key()).eventsPerSecond() > best) {
                best = rates.get("floor-" + s.key()).eventsPerSecond();
                bestShape = s;
            }
        }
        md.append("\nTargets:\n\n");
        md.append(CoreSuite.check(
                String.format(
                        Locale.ROOT,
                        "inbox bytes per event <= 100 for UUID ids (uuid column, v7, key fillfactor 100): %.0f"
                                + " (default fillfactor: %.0f)",
                        bytes.get(Shape.UUID_V7_FULL),
                        bytes.get(Shape.UUID_V7)),
                bytes.get(Shape.UUID_V7_FULL) <= 100));
        md.append(CoreSuite.check(
                String.format(
                        Locale.ROOT,
                        "once's set-wise claim >= 0.95x the floor of the same id shape (text v4): %.3f (paired %.3f)",
                        once.eventsPerSecond() / base.eventsPerSecond(),
                        once.pairedRatio(base)),
                once.eventsPerSecond() / base.eventsPerSecond() >= 0.95));
        for (Claim claim : List.of(Claim.COPY_FIRST, Claim.INSERT_FIRST)) {
            Throughput.Rate first = rates.get(claim.prefix + "-" + Shape.TEXT_V4.key());
            md.append(String.format(
                    Locale.ROOT,
                    "- (for reference) %s / ON CONFLICT claim, text v4: %.2fx (paired %.2f); once / it: %.2f (paired"
                            + " %.2f)%n",
                    claim.prefix,
                    first.eventsPerSecond() / base.eventsPerSecond(),
                    first.pairedRatio(base),
                    once.eventsPerSecond() / first.eventsPerSecond(),
                    once.pairedRatio(first)));
        }
        md.append(String.format(
                Locale.ROOT,
                "- (for reference) fastest INSERT claim floor: %s, %.2fx text v4%n",
                bestShape.label,
                best / base.eventsPerSecond()));
        return md.toString();
    }

    private static void createTable(BenchPostgres.Db db, Shape shape) throws SQLException {
        try (Connection c = db.dataSource().getConnection()) {
            createInbox(c, "ids_inbox", shape);
        }
    }

    /** A table of the inbox's shape named {@code table}, its event id column of {@code shape}'s type. */
    static void createInbox(Connection c, String table, Shape shape) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute("CREATE TABLE " + table + " (consumer varchar(100) NOT NULL, event_id " + shape.type
                    + " NOT NULL, processed_at timestamptz NOT NULL, payload_fingerprint bigint,"
                    + " PRIMARY KEY (consumer, event_id)"
                    + (shape.keyFillfactor == 0 ? "" : " WITH (fillfactor = " + shape.keyFillfactor + ")") + ")");
            s.execute("CREATE INDEX " + table + "_processed_at ON " + table + " USING brin (processed_at)");
        }
    }

    private static double bytesPerEvent(BenchPostgres.Db db, Shape shape, int rows) throws Exception {
        try (Claims claims = new Claims(db, shape)) {
            for (int done = 0; done < rows; done += BATCH) {
                claims.run();
            }
        }
        try (Connection c = db.dataSource().getConnection();
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery(
                        "SELECT pg_total_relation_size('ids_inbox')::float8 / greatest(1, count(*)) FROM ids_inbox")) {
            rs.next();
            return rs.getDouble(1);
        }
    }

    /** The hand-written set-wise claim of one shape: sorted ids, one unnest insert, one commit. */
    private static final class Claims implements Throughput.Step, AutoCloseable {
        private final Connection c;
        private final PreparedStatement claim;
        private final Shape shape;
        private final Claim kind;

        Claims(BenchPostgres.Db db, Shape shape) throws SQLException {
            this(db, shape, Claim.ON_CONFLICT);
        }

        /** Other than ON_CONFLICT, the ids go in with {@link Claim#claimNew} (all are new: it never falls back). */
        Claims(BenchPostgres.Db db, Shape shape, Claim kind) throws SQLException {
            this.shape = shape;
            this.kind = kind;
            this.c = db.dataSource().getConnection();
            c.setAutoCommit(false);
            this.claim = c.prepareStatement("INSERT INTO ids_inbox (consumer, event_id, processed_at)"
                    + " SELECT ?, t.m, ? FROM unnest(?::" + (shape.uuidColumn() ? "uuid" : "varchar") + "[])"
                    + " WITH ORDINALITY AS t(m, n) ORDER BY t.n ON CONFLICT DO NOTHING RETURNING event_id");
        }

        @Override
        public int run() throws SQLException {
            if (kind != Claim.ON_CONFLICT) {
                String[] batch = new String[BATCH];
                for (int i = 0; i < BATCH; i++) {
                    batch[i] = (shape.timeOrdered ? v7() : UUID.randomUUID()).toString();
                }
                Arrays.sort(batch); // canonical lower-case text sorts as uuid values do
                if (!kind.claimNew(c, "ids_inbox", shape, Arrays.asList(batch))) {
                    throw new IllegalStateException("every id is new, but " + kind + " met a claimed one");
                }
                c.commit();
                return BATCH;
            }
            Array ids;
            if (shape.uuidColumn()) {
                UUID[] batch = new UUID[BATCH];
                for (int i = 0; i < BATCH; i++) {
                    batch[i] = shape.timeOrdered ? v7() : UUID.randomUUID();
                }
                Arrays.sort(batch);
                ids = c.createArrayOf("uuid", batch);
            } else {
                String[] batch = new String[BATCH];
                for (int i = 0; i < BATCH; i++) {
                    batch[i] = (shape.timeOrdered ? v7() : UUID.randomUUID()).toString();
                }
                Arrays.sort(batch);
                ids = c.createArrayOf("varchar", batch);
            }
            claim.setString(1, CoreSuite.CONSUMER); // 1 consumer
            claim.setTimestamp(2, new Timestamp(System.currentTimeMillis())); // 2 processed_at
            claim.setArray(3, ids); // 3 event ids, sorted
            int claimed = 0;
            try (ResultSet rs = claim.executeQuery()) {
                while (rs.next()) {
                    claimed++;
                }
            }
            ids.free();
            c.commit();
            if (claimed != BATCH) {
                throw new IllegalStateException("every id is new, but " + claimed + " of " + BATCH + " were claimed");
            }
            return BATCH;
        }

        @Override
        public void close() throws SQLException {
            claim.close();
            c.rollback();
            c.setAutoCommit(true);
            c.close();
        }
    }

    /**
     * Claims every id with one {@code COPY … FROM STDIN} into {@code table}, which PostgreSQL writes
     * with its multi-row heap insert (one WAL record per page of rows, where an {@code INSERT … SELECT}
     * logs each row). True when all were new; false when one was claimed before: the COPY failed with
     * a unique violation and the transaction is rolled back (the COPY was its only statement), for
     * the caller to claim with the insert, which says which ids were new.
     */
    static boolean copyClaim(Connection c, String table, Collection<String> sortedIds) throws SQLException {
        StringBuilder rows = new StringBuilder(sortedIds.size() * 72);
        String suffix = "\t" + Instant.now() + "\n";
        for (String id : sortedIds) {
            rows.append(CoreSuite.CONSUMER).append('\t').append(id).append(suffix);
        }
        try {
            c.unwrap(PGConnection.class)
                    .getCopyAPI()
                    .copyIn(
                            "COPY " + table + " (consumer, event_id, processed_at) FROM STDIN",
                            new StringReader(rows.toString()));
            return true;
        } catch (SQLException e) {
            return rolledBackOnDuplicate(c, e);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * As {@link #copyClaim}, with a plain {@code INSERT … SELECT … unnest(?)}: no {@code ON CONFLICT},
     * so PostgreSQL inserts each row once instead of the speculative insertion (look up the key,
     * insert, then log a confirmation) that {@code ON CONFLICT} needs, and returns no ids.
     */
    static boolean insertClaim(Connection c, String table, Shape shape, Collection<String> sortedIds)
            throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + table + " (consumer, event_id, processed_at)"
                + " SELECT ?, t.m, ? FROM unnest(?::" + shape.type + "[]) WITH ORDINALITY AS t(m, n) ORDER BY t.n")) {
            ps.setString(1, CoreSuite.CONSUMER); // 1 consumer
            ps.setTimestamp(2, new Timestamp(System.currentTimeMillis())); // 2 processed_at
            ps.setArray(3, c.createArrayOf("varchar", sortedIds.toArray())); // 3 sorted event ids
            ps.executeUpdate();
            return true;
        } catch (SQLException e) {
            return rolledBackOnDuplicate(c, e);
        }
    }

    private static boolean rolledBackOnDuplicate(Connection c, SQLException e) throws SQLException {
        if (!"23505".equals(e.getSQLState())) {
            throw e;
        }
        c.rollback();
        return false;
    }

    /** A time-ordered UUID (RFC 9562 version 7): 48 bits of Unix milliseconds, then random bits. */
    static UUID v7() {
        long millis = System.currentTimeMillis();
        ThreadLocalRandom r = ThreadLocalRandom.current();
        long high = (millis << 16) | 0x7000L | (r.nextInt() & 0x0FFFL);
        long low = 0x8000_0000_0000_0000L | (r.nextLong() & 0x3FFF_FFFF_FFFF_FFFFL);
        return new UUID(high, low);
    }
}
