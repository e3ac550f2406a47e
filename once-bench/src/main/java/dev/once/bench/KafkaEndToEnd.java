package dev.once.bench;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.once.Delivery;
import dev.once.Schema;
import dev.once.bench.IdShapeSuite.Claim;
import dev.once.bench.IdShapeSuite.Shape;
import dev.once.kafka.KafkaConsumerRunner;
import dev.once.kafka.KafkaConsumerRunnerBuilder;
import dev.once.outbox.OutboxMessage;
import dev.once.testkit.kafka.TestKafka;
import dev.once.testsupport.TestPostgres;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.Future;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * End-to-end throughput from Kafka to PostgreSQL (fsync and synchronous_commit on): the naive
 * consumer (auto-commit, the poll's records applied in one transaction, no claim), a hand-written
 * claiming floor (the naive loop plus one set-wise claim per poll, the update applied to the
 * claimed records only, offsets committed after the database commit) and the once runner (claim per
 * event, one transaction per batch of polls, commitAsync after the database commit). Same topic,
 * same effect (credit one of {@value #ACCOUNTS} accounts), {@code max.poll.records}
 * {@value #MAX_POLL_RECORDS}, one database connection each.
 *
 * <p>The set-wise rows run in {@value #ROUNDS} rounds ({@value #QUICK_ROUNDS} when quick), each row once per round in an order that
 * rotates, so that every row sees the machine's load as the others do; a row's figure is the median
 * of its rounds and a ratio is the median of the ratios within a round. The floor claims each id
 * shape (random v4 or time-ordered v7 UUIDs, as text or in a {@code uuid} column): what the claim
 * costs, and which id shape costs least, whatever the engine does.
 *
 * <p>As the {@code kafka} suite of {@link BenchMain} it runs on the harness's PostgreSQL and writes
 * its lines and a section of BENCHMARKS.md; {@link #run(int)} returns the figures; {@link #main}
 * prints them as {@code BENCH} lines. Arguments: number of events (default {@value #DEFAULT_EVENTS}).
 */
public final class KafkaEndToEnd implements Suite {

    public static final int DEFAULT_EVENTS = 100_000;
    static final int ACCOUNTS = 1_000;
    static final int MAX_POLL_RECORDS = 500;
    static final int PARTITIONS = 6;
    static final int WARMUP_EVENTS = 20_000;
    static final int QUICK_EVENTS = 20_000;
    static final int ROUNDS = 5;
    static final int QUICK_ROUNDS = 3;

    /** The floor's inbox: a table of the inbox's shape, its event id column of the shape's type. */
    static final String FLOOR_INBOX = "floor_inbox";

    /**
     * Polls a floor applies in one transaction, as many as the runner's batch holds by default: the
     * fastest hand-written loop takes what the fetcher already holds into the same transaction.
     */
    static final int FLOOR_POLLS = KafkaConsumerRunnerBuilder.DEFAULT_MAX_BATCH_POLLS;

    /** One measured run. */
    public record Result(String name, String mode, Shape ids, int conns, long events, double seconds, double bytes) {

        public double eventsPerSecond() {
            return events / seconds;
        }

        /** The line the benchmark harness collects. */
        public String line() {
            return String.format(
                    Locale.ROOT,
                    "BENCH name=%s mode=%s ids=%s conns=%d events_per_s=%.0f%s",
                    name,
                    mode,
                    ids.key(),
                    conns,
                    eventsPerSecond(),
                    Double.isNaN(bytes) ? "" : String.format(Locale.ROOT, " inbox_bytes_per_event=%.0f", bytes));
        }
    }

    /** A consumer of the set-wise comparison and the ids its topic carries (and its claim stores). */
    record Row(String name, Shape ids) {

        String label() {
            return name + " " + ids.key();
        }
    }

    /** The set-wise rows: the naive consumer, the floor per id shape, once per text id shape. */
    static final List<Row> SET_ROWS = List.of(
            new Row("naive-kafka", Shape.TEXT_V4),
            new Row("floor-kafka", Shape.TEXT_V4),
            new Row("floor-kafka", Shape.TEXT_V7),
            new Row("floor-kafka", Shape.UUID_V4),
            new Row("floor-kafka", Shape.UUID_V7),
            new Row("floor-copy-kafka", Shape.TEXT_V4),
            new Row("floor-insert-kafka", Shape.TEXT_V4),
            new Row("floor-insert-kafka", Shape.UUID_V7),
            new Row("once-kafka", Shape.TEXT_V4),
            new Row("once-kafka", Shape.TEXT_V7));

    /** What a run measured: the per-record rows, and each set-wise row's rounds. */
    public record Figures(List<Result> perRecord, Map<Row, List<Result>> set) {

        /** A set-wise row's median events/s over its rounds. */
        double rate(Row row) {
            return median(
                    set.get(row).stream().mapToDouble(Result::eventsPerSecond).toArray());
        }

        /** The median over rounds of {@code a}'s rate over {@code b}'s in the same round. */
        double ratio(Row a, Row b) {
            List<Result> x = set.get(a);
            List<Result> y = set.get(b);
            double[] r = new double[x.size()];
            for (int i = 0; i < r.length; i++) {
                r[i] = x.get(i).eventsPerSecond() / y.get(i).eventsPerSecond();
            }
            return median(r);
        }

        /** The floor with {@code ids}' column and id kind, by whichever claim measured fastest. */
        Row fastestFloor(Shape ids) {
            Row best = null;
            for (Row row : set.keySet()) {
                if (row.name().startsWith("floor") && row.ids() == ids && (best == null || rate(row) > rate(best))) {
                    best = row;
                }
            }
            return best;
        }

        double bytes(Row row) {
            return median(set.get(row).stream().mapToDouble(Result::bytes).toArray());
        }

        List<Result> all() {
            List<Result> all = new ArrayList<>(perRecord);
            set.values().forEach(all::addAll);
            return all;
        }

        private static double median(double[] v) {
            double[] s = v.clone();
            Arrays.sort(s);
            return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
        }
    }

    @Override
    public String name() {
        return "kafka";
    }

    @Override
    public void run(Run run) throws Exception {
        int events = run.settings().quick() ? QUICK_EVENTS : DEFAULT_EVENTS;
        int rounds = run.settings().quick() ? QUICK_ROUNDS : ROUNDS;
        Figures f;
        try (TestKafka kafka = TestKafka.start();
                BenchPostgres.Db db = run.postgres().freshDatabase(1)) {
            Run.progress("kafka: " + events + " events, " + PARTITIONS + " partitions, embedded broker at "
                    + kafka.bootstrapServers());
            f = run(kafka, db.dataSource(), events, rounds);
        }
        f.all().forEach(r -> run.line(r.line()));
        run.section("Kafka end to end: naive vs once", report(f, events, rounds));
    }

    private static String report(Figures f, int events, int rounds) {
        StringBuilder md = new StringBuilder();
        md.append("Kafka (KRaft broker in a child JVM) to PostgreSQL, ")
                .append(events)
                .append(" events over ")
                .append(PARTITIONS)
                .append(" partitions, each with a UUID event id in its header (`randomUUID()`, or for the v7 topic a")
                .append(" time-ordered RFC 9562 UUID), `max.poll.records=")
                .append(MAX_POLL_RECORDS)
                .append("`, one connection, after a ")
                .append(Math.min(WARMUP_EVENTS, events / 5))
                .append("-event warm-up of every consumer. Naive: Kafka auto-commit, the poll's records applied in one"
                        + " transaction, no claim; mode `batch` one `UPDATE` per record, mode `batch-set` one"
                        + " `UPDATE … FROM unnest` per poll, pre-aggregated per account and sorted. Floor (hand-written,"
                        + " batch-set only): the naive loop with auto-commit off, polling again at once while the"
                        + " polls return records, up to " + FLOOR_POLLS + " polls per transaction (as the runner's"
                        + " default batch), their ids deduplicated and sorted,"
                        + " claimed with one `INSERT … SELECT … unnest(?) … ON CONFLICT DO NOTHING RETURNING event_id`"
                        + " into a table of the inbox's shape (event id as `varchar(255)` or `uuid`), the same update for"
                        + " the claimed records only, COMMIT, then `commitAsync`; `floor-copy` first sends the poll's ids"
                        + " with `COPY … FROM STDIN` (a multi-row heap insert: one WAL record per page, not per row),"
                        + " `floor-insert` with a plain `INSERT … SELECT … unnest(?)` (no `ON CONFLICT`, so no speculative"
                        + " insertion, and no `RETURNING`); both only on a unique violation roll back and claim with the"
                        + " `ON CONFLICT` insert. Once: `KafkaConsumerRunner`, one"
                        + " `processBatch` (one claim statement, one transaction) per batch (the polls that arrived"
                        + " while the previous batch ran, up to `maxBatchRecords`, default 4 polls; the claim a plain"
                        + " insert first, `ON CONFLICT` after a unique violation, as `floor-insert`), `commitAsync` after"
                        + " the database commit; mode `batch` the per-event handler, mode `batch-set` `batchHandler(...)`"
                        + " running the same set-based update. events/s: from the first record polled to the last"
                        + " applied. The per-record rows run once each; the batch-set rows ")
                .append(rounds)
                .append(
                        " rounds each, in an order that rotates every round: their events/s is the median of the rounds,"
                                + " \"vs\" the median of the ratios within a round. Bytes: `pg_total_relation_size` of the"
                                + " claim's table / events after the run.\n\n"
                                + "| consumer | mode | ids | claim column | events/s | vs naive | vs `ON CONFLICT` floor, same ids | inbox bytes"
                                + " / event |\n|---|---|---|---|---|---|---|---|\n");
        for (Result r : f.perRecord()) {
            md.append(String.format(
                    Locale.ROOT,
                    "| %s | %s | %s | %s | %.0f | | | |%n",
                    r.name(),
                    r.mode(),
                    r.ids().key(),
                    r.name().startsWith("naive") ? "–" : "`varchar(255)`",
                    r.eventsPerSecond()));
        }
        Row naive = SET_ROWS.get(0);
        for (Row row : SET_ROWS) {
            Row floor = new Row("floor-kafka", row.ids());
            boolean claims = row != naive;
            md.append(String.format(
                    Locale.ROOT,
                    "| %s | batch-set | %s | %s | %.0f | %.2f | %s | %s |%n",
                    row.name(),
                    row.ids().key(),
                    claims ? "`" + row.ids().type + "`" : "–",
                    f.rate(row),
                    f.ratio(row, naive),
                    row.name().equals("once-kafka") ? String.format(Locale.ROOT, "%.2f", f.ratio(row, floor)) : "",
                    claims ? String.format(Locale.ROOT, "%.0f", f.bytes(row)) : "–"));
        }
        Row onceV4 = new Row("once-kafka", Shape.TEXT_V4);
        Row onceV7 = new Row("once-kafka", Shape.TEXT_V7);
        Row floorV4 = new Row("floor-kafka", Shape.TEXT_V4);
        Row best = floorV4;
        for (Row row : SET_ROWS) {
            if (row.name().startsWith("floor") && f.rate(row) > f.rate(best)) {
                best = row;
            }
        }
        double set = f.ratio(onceV4, naive);
        md.append('\n')
                .append(CoreSuite.check(
                        String.format(
                                Locale.ROOT,
                                "once batch-set >= 0.8x the naive consumer with the same set-based update (v4 ids): %.2f",
                                set),
                        set >= 0.8));
        Row fastest = f.fastestFloor(Shape.TEXT_V4);
        double r = f.ratio(onceV4, fastest);
        md.append(CoreSuite.check(
                String.format(
                        Locale.ROOT,
                        "once batch-set >= 0.95x the fastest claiming floor of the same ids and column (text-v4: %s): %.2f",
                        fastest.name(),
                        r),
                r >= 0.95));
        md.append(String.format(
                Locale.ROOT,
                "- (for reference) once batch-set / the `ON CONFLICT` floor: %.2f (text-v4 ids), %.2f (text-v7 ids)%n",
                f.ratio(onceV4, floorV4),
                f.ratio(onceV7, new Row("floor-kafka", Shape.TEXT_V7))));
        md.append(String.format(
                Locale.ROOT,
                "- bound: the claiming floor itself reaches %.2fx the naive consumer with v4 text ids and %.2fx at"
                        + " its fastest (%s, %s); the claim row per event is what once adds to the naive consumer%n",
                f.ratio(floorV4, naive),
                f.ratio(best, naive),
                best.name(),
                best.ids().label));
        md.append(String.format(
                Locale.ROOT,
                "- (for reference) over the ON CONFLICT floor: COPY-first %.2fx (v4 text ids), plain INSERT first %.2fx"
                        + " (v4 text ids) and %.2fx (v7 uuid ids)%n",
                f.ratio(new Row("floor-copy-kafka", Shape.TEXT_V4), floorV4),
                f.ratio(new Row("floor-insert-kafka", Shape.TEXT_V4), floorV4),
                f.ratio(new Row("floor-insert-kafka", Shape.UUID_V7), new Row("floor-kafka", Shape.UUID_V7))));
        md.append(String.format(
                Locale.ROOT,
                "- (for reference) once batch-set, v7 / v4 text ids: %.2fx; floor, fastest shape / v4 text: %.2fx%n",
                f.ratio(onceV7, onceV4),
                f.ratio(best, floorV4)));
        md.append(String.format(
                Locale.ROOT,
                "- (for reference) per-record update, once / naive: %.2f%n",
                f.perRecord().get(1).eventsPerSecond() / f.perRecord().get(0).eventsPerSecond()));
        md.append(String.format(
                Locale.ROOT,
                "- (for reference) once batch-set / once per-event handler: %.2fx%n",
                f.rate(onceV4) / f.perRecord().get(1).eventsPerSecond()));
        return md.toString();
    }

    public static void main(String[] args) throws Exception {
        int events = args.length > 0 ? Integer.parseInt(args[0]) : DEFAULT_EVENTS;
        for (Result r : run(events).all()) {
            System.out.println(r.line());
        }
        System.exit(0);
    }

    /**
     * Starts a durable embedded PostgreSQL and the embedded Kafka (or {@value TestKafka#BOOTSTRAP_ENV}),
     * runs every row over {@code events} events, and stops both.
     */
    public static Figures run(int events) throws Exception {
        try (EmbeddedPostgres pg = TestPostgres.embedded(true);
                TestKafka kafka = TestKafka.start();
                HikariDataSource ds = pool(pg.getJdbcUrl("postgres", "postgres"))) {
            Schema.migrate(ds);
            return run(kafka, ds, events, ROUNDS);
        }
    }

    /**
     * As {@link #run(int)} on a given broker and database, which holds the once tables and should
     * have fsync on for the figures to mean anything; one connection is used at a time.
     */
    public static Figures run(TestKafka kafka, DataSource ds, int events, int rounds) throws Exception {
        String warm = kafka.createTopic("bench-warmup", PARTITIONS);
        int warmup = Math.min(WARMUP_EVENTS, events / 5);
        publish(kafka, warm, warmup, false);
        for (Row row : SET_ROWS) {
            reset(ds, row.ids());
            consume(kafka, warm, ds, warmup, row, "warm-", true);
        }
        Row naive = SET_ROWS.get(0);
        Row once = new Row("once-kafka", Shape.TEXT_V4);
        for (Row row : List.of(naive, once)) {
            reset(ds, row.ids());
            consume(kafka, warm, ds, warmup, row, "warm-record-", false);
        }
        Map<Shape, String> topics = new HashMap<>();
        for (boolean v7 : new boolean[] {false, true}) {
            String topic = kafka.createTopic(v7 ? "bench-v7" : "bench-v4", PARTITIONS);
            publish(kafka, topic, events, v7);
            topics.put(v7 ? Shape.TEXT_V7 : Shape.TEXT_V4, topic);
        }
        String v4 = topics.get(Shape.TEXT_V4);
        List<Result> perRecord = new ArrayList<>();
        for (Row row : List.of(naive, once)) {
            reset(ds, row.ids());
            perRecord.add(consume(kafka, v4, ds, events, row, "record-", false));
        }
        Map<Row, List<Result>> set = new LinkedHashMap<>();
        for (int round = 0; round < rounds; round++) {
            for (int k = 0; k < SET_ROWS.size(); k++) {
                Row row = SET_ROWS.get((k + round * 3) % SET_ROWS.size());
                String topic = topics.get(row.ids().timeOrdered ? Shape.TEXT_V7 : Shape.TEXT_V4);
                reset(ds, row.ids());
                set.computeIfAbsent(row, r -> new ArrayList<>())
                        .add(consume(kafka, topic, ds, events, row, "set" + round + "-", true));
            }
        }
        // Rows in the order of SET_ROWS, whatever order the rounds ran them in.
        Map<Row, List<Result>> ordered = new LinkedHashMap<>();
        SET_ROWS.forEach(r -> ordered.put(r, set.get(r)));
        return new Figures(perRecord, ordered);
    }

    /** Runs {@code row}'s consumer over the topic under a group of its own, checks the end state. */
    private static Result consume(
            TestKafka kafka, String topic, DataSource ds, int events, Row row, String group, boolean set)
            throws Exception {
        String g = group + row.label().replace(' ', '-') + "-" + topic;
        double seconds = switch (row.name()) {
            case "naive-kafka" -> naive(kafka, topic, g, ds, events, set);
            case "floor-kafka" -> floor(kafka, topic, g, ds, events, row.ids(), Claim.ON_CONFLICT);
            case "floor-copy-kafka" -> floor(kafka, topic, g, ds, events, row.ids(), Claim.COPY_FIRST);
            case "floor-insert-kafka" -> floor(kafka, topic, g, ds, events, row.ids(), Claim.INSERT_FIRST);
            case "once-kafka" -> once(kafka, topic, g, ds, events, set);
            default -> throw new IllegalArgumentException("no consumer named " + row.name());
        };
        check(ds, events, row.label());
        double bytes = Double.NaN;
        if (!row.name().equals("naive-kafka")) {
            String table = row.name().startsWith("floor") ? FLOOR_INBOX : "once_inbox";
            try (Connection c = ds.getConnection();
                    Statement s = c.createStatement();
                    ResultSet rs =
                            s.executeQuery("SELECT pg_total_relation_size('" + table + "'), count(*) FROM " + table)) {
                rs.next();
                if (rs.getLong(2) != events) {
                    throw new IllegalStateException(row.label() + " left " + rs.getLong(2) + " claims in " + table
                            + " for " + events + " events");
                }
                bytes = (double) rs.getLong(1) / events;
            }
        }
        return new Result(row.name(), set ? "batch-set" : "batch", row.ids(), 1, events, seconds, bytes);
    }

    /** The business effect, the same for both consumers. */
    static void credit(Connection c, Delivery d) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("UPDATE bench_account SET balance = balance + ? WHERE id = ?")) {
            ps.setLong(1, 1);
            ps.setInt(2, Math.floorMod(d.eventId().hashCode(), ACCOUNTS));
            ps.executeUpdate();
        }
    }

    /**
     * The same effect for a whole poll, set-based: the credits summed per account, sorted, one
     * {@code UPDATE … FROM unnest}. The naive set consumer and once's batch handler both run it.
     */
    static void creditAll(Connection c, List<Delivery> deliveries) throws SQLException {
        TreeMap<Integer, Long> perAccount = new TreeMap<>();
        for (Delivery d : deliveries) {
            perAccount.merge(Math.floorMod(d.eventId().hashCode(), ACCOUNTS), 1L, Long::sum);
        }
        try (PreparedStatement ps = c.prepareStatement("UPDATE bench_account a SET balance = a.balance + d.amount"
                + " FROM unnest(?::int[], ?::bigint[]) AS d(id, amount) WHERE a.id = d.id")) {
            ps.setArray(1, c.createArrayOf("int", perAccount.keySet().toArray())); // 1 account ids
            ps.setArray(2, c.createArrayOf("bigint", perAccount.values().toArray())); // 2 amounts
            ps.executeUpdate();
        }
    }

    /** What a hand-written consumer does with the records of its polls, in the transaction its loop then commits. */
    @FunctionalInterface
    private interface PollStep {
        void apply(Connection c, List<ConsumerRecord<byte[], byte[]>> records) throws SQLException;
    }

    /**
     * A hand-written consumer's loop: poll (again at once while the polls return records, up to
     * {@code polls} polls' worth: what the fetcher already holds), {@code step} on the connection,
     * COMMIT, then (without Kafka's auto-commit) {@code commitAsync}; the seconds from its first
     * record polled to its last commit.
     */
    private static double handWritten(
            TestKafka kafka,
            String topic,
            String group,
            DataSource ds,
            int events,
            boolean autoCommit,
            int polls,
            PollStep step)
            throws Exception {
        Map<String, Object> p = consumerProperties(kafka, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, Boolean.toString(autoCommit));
        long done = 0;
        long start = 0;
        try (KafkaConsumer<byte[], byte[]> consumer =
                        new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                Connection c = ds.getConnection()) {
            consumer.subscribe(List.of(topic));
            c.setAutoCommit(false);
            while (done < events) {
                ConsumerRecords<byte[], byte[]> polled = consumer.poll(Duration.ofMillis(200));
                if (polled.isEmpty()) {
                    continue;
                }
                if (start == 0) {
                    start = System.nanoTime();
                }
                List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>(polls * MAX_POLL_RECORDS);
                polled.forEach(records::add);
                for (int more = 1; more < polls && !polled.isEmpty(); more++) {
                    polled = consumer.poll(Duration.ZERO);
                    polled.forEach(records::add);
                }
                step.apply(c, records);
                c.commit();
                if (!autoCommit) {
                    consumer.commitAsync();
                }
                done += records.size();
            }
        }
        return (System.nanoTime() - start) / 1e9;
    }

    /** The naive consumer: Kafka's auto-commit, every record applied, no claim. */
    private static double naive(TestKafka kafka, String topic, String group, DataSource ds, int events, boolean set)
            throws Exception {
        return handWritten(kafka, topic, group, ds, events, true, 1, (c, records) -> {
            List<Delivery> poll = new ArrayList<>(records.size());
            for (ConsumerRecord<byte[], byte[]> r : records) {
                poll.add(Delivery.of(eventId(r), r.value()));
            }
            if (set) {
                creditAll(c, poll);
            } else {
                for (Delivery d : poll) {
                    credit(c, d);
                }
            }
        });
    }

    /**
     * The hand-written claiming floor: the naive loop, each poll's ids claimed with one statement
     * (first occurrence wins, sorted so that every consumer takes the index entries in one order),
     * the update applied to the claimed records only, the database commit, then the offsets
     * (asynchronously: a lost commit replays records the claims absorb).
     *
     * <p>Other than {@code ON_CONFLICT}, {@code first} claims each poll's ids expecting them new
     * ({@code COPY}, or a plain insert without the speculative insertion of {@code ON CONFLICT}):
     * when they are (the common case) they are all claimed; a duplicate fails the statement with a
     * unique violation, and the poll is rolled back and claimed again with the insert, which says
     * which ids were new.
     */
    private static double floor(
            TestKafka kafka, String topic, String group, DataSource ds, int events, Shape ids, Claim first)
            throws Exception {
        String claimSql = "INSERT INTO " + FLOOR_INBOX + " (consumer, event_id, processed_at) SELECT ?, t.m, ? FROM"
                + " unnest(?::" + ids.type + "[]) WITH ORDINALITY AS t(m, n) ORDER BY t.n ON CONFLICT DO NOTHING"
                + " RETURNING event_id";
        return handWritten(kafka, topic, group, ds, events, false, FLOOR_POLLS, (c, records) -> {
            // Canonical lower-case UUID text sorts as PostgreSQL orders uuid values (byte by byte).
            TreeMap<String, Delivery> byId = new TreeMap<>();
            for (ConsumerRecord<byte[], byte[]> r : records) {
                String id = eventId(r);
                byId.putIfAbsent(id, Delivery.of(id, r.value()));
            }
            List<Delivery> claimed;
            if (first.claimNew(c, FLOOR_INBOX, ids, byId.keySet())) {
                claimed = new ArrayList<>(byId.values());
            } else {
                claimed = new ArrayList<>(byId.size());
                // pgjdbc keeps the server-side statement per SQL text: preparing it each poll costs no parse.
                try (PreparedStatement claim = c.prepareStatement(claimSql)) {
                    claim.setString(1, CoreSuite.CONSUMER); // 1 consumer
                    claim.setTimestamp(2, new Timestamp(System.currentTimeMillis())); // 2 processed_at
                    claim.setArray(3, c.createArrayOf("varchar", byId.keySet().toArray())); // 3 sorted event ids
                    try (ResultSet rs = claim.executeQuery()) {
                        while (rs.next()) {
                            claimed.add(byId.get(rs.getString(1)));
                        }
                    }
                }
            }
            if (!claimed.isEmpty()) {
                creditAll(c, claimed);
            }
        });
    }

    /** The once runner; the seconds from its first record polled to its last applied. */
    private static double once(TestKafka kafka, String topic, String group, DataSource ds, int events, boolean set)
            throws Exception {
        SimpleMeterRegistry meters = new SimpleMeterRegistry();
        KafkaConsumerRunnerBuilder builder = KafkaConsumerRunner.builder()
                .kafkaProperties(consumerProperties(kafka, group))
                .topics(topic)
                .meterRegistry(meters);
        builder.dataSource(ds).consumer(CoreSuite.CONSUMER);
        if (set) {
            builder.batchHandler((claimed, tx) -> creditAll(tx.connection(), claimed));
        } else {
            builder.handler((d, tx) -> credit(tx.connection(), d));
        }
        KafkaConsumerRunner runner = builder.build().start();
        try {
            while (meters.get("once.kafka.records.polled").counter().count() == 0) {
                Thread.sleep(1);
            }
            long start = System.nanoTime();
            while (meters.get("once.kafka.records.applied").counter().count() < events) {
                Thread.sleep(1);
            }
            return (System.nanoTime() - start) / 1e9;
        } finally {
            runner.close();
        }
    }

    private static String eventId(ConsumerRecord<byte[], byte[]> r) {
        return new String(r.headers().lastHeader(OutboxMessage.EVENT_ID_HEADER).value(), StandardCharsets.UTF_8);
    }

    private static Map<String, Object> consumerProperties(TestKafka kafka, String group) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(MAX_POLL_RECORDS));
        return p;
    }

    /** Publishes {@code events} records, each with a new UUID event id: time-ordered (v7) or random (v4). */
    private static void publish(TestKafka kafka, String topic, int events, boolean v7) throws Exception {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
        // One request in flight: on a loaded 2-core machine the in-process broker was seen answering
        // OUT_OF_ORDER_SEQUENCE_NUMBER forever to an idempotent producer with five in flight.
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>(events);
            for (int i = 0; i < events; i++) {
                ProducerRecord<byte[], byte[]> r =
                        new ProducerRecord<>(topic, i % PARTITIONS, null, "1".getBytes(StandardCharsets.UTF_8));
                UUID id = v7 ? IdShapeSuite.v7() : UUID.randomUUID();
                r.headers().add(OutboxMessage.EVENT_ID_HEADER, id.toString().getBytes(StandardCharsets.UTF_8));
                sent.add(producer.send(r));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                f.get();
            }
        }
    }

    private static HikariDataSource pool(String jdbcUrl) {
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl(jdbcUrl);
        config.setMaximumPoolSize(1);
        config.setPoolName("bench-kafka");
        return new HikariDataSource(config);
    }

    /** Fresh accounts, an empty once inbox, and a new floor inbox whose event id column is of {@code ids}' type. */
    private static void reset(DataSource ds, Shape ids) throws SQLException {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement()) {
            s.execute("DROP TABLE IF EXISTS bench_account");
            s.execute("CREATE TABLE bench_account (id int PRIMARY KEY, balance bigint NOT NULL)");
            s.execute("INSERT INTO bench_account SELECT g, 0 FROM generate_series(0, " + (ACCOUNTS - 1) + ") g");
            s.execute("TRUNCATE once_inbox");
            s.execute("DROP TABLE IF EXISTS " + FLOOR_INBOX);
            IdShapeSuite.createInbox(c, FLOOR_INBOX, ids);
            try {
                // The previous run's dirty pages written now, not by a checkpoint inside the next run,
                // and every run starts alike: the first change of each page after it logs the whole page.
                s.execute("CHECKPOINT");
            } catch (SQLException e) {
                // Not a superuser on a given server: measure without it and let the rounds show the noise.
            }
        }
    }

    private static void check(DataSource ds, int events, String who) throws SQLException {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement();
                var rs = s.executeQuery("SELECT sum(balance) FROM bench_account")) {
            rs.next();
            if (rs.getLong(1) != events) {
                throw new IllegalStateException(who + " run credited " + rs.getLong(1) + " instead of " + events);
            }
        }
    }
}
