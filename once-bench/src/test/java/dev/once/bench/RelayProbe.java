package dev.once.bench;

import dev.once.IdempotentConsumer;
import dev.once.outbox.OutboxMessage;
import dev.once.outbox.OutboxRelay;
import dev.once.outbox.Publisher;
import dev.once.outbox.Receipt;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.management.ManagementFactory;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import javax.sql.DataSource;

/**
 * The relay's own cost per message, without a broker (a publisher that acknowledges at once) and
 * independent of the machine's load: the relay threads' CPU, the database server's CPU, the
 * relay's statements as {@code pg_stat_statements} counts them (calls, buffers, WAL) and its round
 * trips to the database, per message; for a backlog drain (the relay suite's shape: {@value
 * RelaySuite#RELAYS} relays, batch {@value RelaySuite#BATCH}, rows over {@value RelaySuite#KEYS}
 * keys) and for started relays at an offered load (writers commit transactions of {@value
 * RelaySuite#ROWS_PER_TX} rows; LISTEN/NOTIFY wake-ups). Issue 21 item 5.
 * {@code java -cp <test classpath> dev.once.bench.RelayProbe [drain|load|both|poll] [rows or polls] [tx/s] [seconds]}
 * ({@code poll}: a poll that finds nothing, the cost of every relay a NOTIFY wakes but the one that takes the rows).
 */
final class RelayProbe {

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    public static void main(String[] args) throws Exception {
        String what = args.length > 0 ? args[0] : "both";
        int rows = args.length > 1 ? Integer.parseInt(args[1]) : 200_000;
        int txPerSecond = args.length > 2 ? Integer.parseInt(args[2]) : RelaySuite.TX_PER_S;
        double seconds = args.length > 3 ? Double.parseDouble(args[3]) : 10;
        try (BenchPostgres postgres = BenchPostgres.embedded(Map.of(
                "shared_preload_libraries", "pg_stat_statements",
                "pg_stat_statements.track_utility", "on",
                "pg_stat_statements.track", "all",
                "pg_stat_statements.track_planning", "on"))) {
            admin(postgres, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
            if (!what.equals("load")) {
                for (int round = 0; round < 2; round++) { // the first warms the JVM and the server's caches
                    drain(postgres, round == 0 ? Math.min(rows, 50_000) : rows, round == 1);
                }
            }
            if (what.equals("poll")) {
                poll(postgres, rows);
                return;
            }
            if (!what.equals("drain")) {
                load(postgres, txPerSecond, Math.min(3, seconds), false);
                load(postgres, txPerSecond, seconds, true);
            }
        }
    }

    private static void drain(BenchPostgres postgres, int rows, boolean print) throws Exception {
        try (BenchPostgres.Db db = postgres.freshDatabase(2 * RelaySuite.RELAYS + 2)) {
            try (Connection c = db.dataSource().getConnection();
                    Statement st = c.createStatement()) {
                st.execute("INSERT INTO once_outbox (event_id, destination, msg_key, payload, headers, idempotency_key,"
                        + " available_at, created_at) SELECT 'bench:e' || g || '#1', 'probe', 'k' || (g % "
                        + RelaySuite.KEYS + "), '\\x31', '', 'bench:e' || g || '#1', now(), now()"
                        + " FROM generate_series(1, " + rows + ") g");
                st.execute("ANALYZE once_outbox");
            }
            postgres.checkpoint();
            RoundTrips trips = new RoundTrips();
            DataSource ds = trips.dataSource(db.dataSource());
            List<OutboxRelay> relays = new ArrayList<>();
            for (int i = 0; i < RelaySuite.RELAYS; i++) {
                relays.add(relay(ds, i));
            }
            admin(postgres, "SELECT pg_stat_statements_reset()");
            trips.reset();
            long ticks0 = postgres.serverCpuTicks();
            long cpu0 = RelaySuite.cpuNanos();
            LongAdder relayCpu = new LongAdder();
            LongAdder sent = new LongAdder();
            long start = System.nanoTime();
            List<Thread> threads = new ArrayList<>();
            for (OutboxRelay r : relays) {
                Thread t = new Thread(() -> {
                    long c0 = THREADS.getCurrentThreadCpuTime();
                    int n;
                    while ((n = r.relayOnce()) > 0) {
                        sent.add(n);
                    }
                    relayCpu.add(THREADS.getCurrentThreadCpuTime() - c0);
                });
                t.start();
                threads.add(t);
            }
            for (Thread t : threads) {
                t.join();
            }
            double wall = (System.nanoTime() - start) / 1e9;
            long ticks = postgres.serverCpuTicks() - ticks0;
            long jvm = RelaySuite.cpuNanos() - cpu0;
            relays.forEach(OutboxRelay::close);
            if (print) {
                long n = sent.sum();
                System.out.printf(
                        Locale.ROOT,
                        "drain: %d rows of %d in %.1f s (%.0f/s, load %.1f); per message: relay threads CPU %.1f us,"
                                + " this JVM %.1f us, database server %.1f us; round trips %.4f (%s)%n",
                        n,
                        rows,
                        wall,
                        n / wall,
                        ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage(),
                        relayCpu.sum() / 1e3 / n,
                        jvm / 1e3 / n,
                        ticks * 1e4 / n,
                        trips.total() / (double) n,
                        trips.summary(n));
                statements(postgres, n);
            }
        }
    }

    /** A poll that finds nothing (what every relay a NOTIFY wakes but one does): its cost, {@code n} polls on one thread. */
    private static void poll(BenchPostgres postgres, int n) throws Exception {
        try (BenchPostgres.Db db = postgres.freshDatabase(2)) {
            RoundTrips trips = new RoundTrips();
            OutboxRelay relay = relay(trips.dataSource(db.dataSource()), 0);
            for (int round = 0; round < 3; round++) {
                admin(postgres, "SELECT pg_stat_statements_reset()");
                trips.reset();
                long ticks0 = postgres.serverCpuTicks();
                long c0 = THREADS.getCurrentThreadCpuTime();
                long b0 = THREADS.getCurrentThreadAllocatedBytes();
                for (int i = 0; i < n; i++) {
                    relay.relayOnce();
                }
                long cpu = THREADS.getCurrentThreadCpuTime() - c0;
                long bytes = THREADS.getCurrentThreadAllocatedBytes() - b0;
                long ticks = postgres.serverCpuTicks() - ticks0;
                System.out.printf(
                        Locale.ROOT,
                        "poll (nothing to send): %d polls; per poll: relay thread CPU %.1f us, allocated %d bytes,"
                                + " database server %.1f us; round trips %.2f (%s)%n",
                        n,
                        cpu / 1e3 / n,
                        bytes / n,
                        ticks * 1e4 / n,
                        trips.total() / (double) n,
                        trips.summary(n));
            }
            statements(postgres, n);
            relay.close();
        }
    }

    private static void load(BenchPostgres postgres, int txPerSecond, double seconds, boolean print) throws Exception {
        try (BenchPostgres.Db writers = postgres.freshDatabase(2 * RelaySuite.RELAYS + 2)) {
            RoundTrips trips = new RoundTrips();
            DataSource ds = trips.dataSource(writers.dataSource());
            IdempotentConsumer writer = IdempotentConsumer.builder()
                    .dataSource(writers.dataSource())
                    .consumer("bench")
                    .meterRegistry(new SimpleMeterRegistry())
                    .handler((d, tx) -> {
                        for (int k = 0; k < RelaySuite.ROWS_PER_TX; k++) {
                            tx.outbox()
                                    .add(
                                            "probe",
                                            "k" + Math.floorMod((d.eventId() + k).hashCode(), RelaySuite.KEYS),
                                            new byte[] {'1'},
                                            Map.of(),
                                            null);
                        }
                    })
                    .build();
            LongAdder acked = new LongAdder();
            Publisher publisher = new Ack(acked);
            List<OutboxRelay> relays = new ArrayList<>();
            for (int i = 0; i < RelaySuite.RELAYS; i++) {
                relays.add(OutboxRelay.builder()
                        .dataSource(ds)
                        .name("probe-" + i)
                        .batchSize(RelaySuite.BATCH)
                        .pollInterval(Duration.ofMillis(200))
                        .meterRegistry(new SimpleMeterRegistry())
                        .publisher(publisher)
                        .build());
            }
            postgres.checkpoint();
            relays.forEach(OutboxRelay::start);
            Thread.sleep(300); // the relays' LISTEN connections are open
            admin(postgres, "SELECT pg_stat_statements_reset()");
            trips.reset();
            Map<Long, Long> cpu0 = relayThreadsCpu();
            long ticks0 = postgres.serverCpuTicks();
            long writerCpu0 = THREADS.getCurrentThreadCpuTime();
            long start = System.nanoTime();
            long end = start + (long) (seconds * 1e9);
            long tx = 0;
            while (System.nanoTime() < end) {
                long due = start + (long) (tx * 1e9 / txPerSecond);
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    LockSupport.parkNanos(wait);
                }
                writer.process(dev.once.Delivery.of("e" + tx, new byte[0]));
                tx++;
            }
            long written = tx * RelaySuite.ROWS_PER_TX;
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (acked.sum() < written && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            long writerCpu = THREADS.getCurrentThreadCpuTime() - writerCpu0;
            long ticks = postgres.serverCpuTicks() - ticks0;
            long relayCpu = relayThreadsCpu().entrySet().stream()
                    .mapToLong(e -> e.getValue() - cpu0.getOrDefault(e.getKey(), 0L))
                    .sum();
            double wall = (System.nanoTime() - start) / 1e9;
            relays.forEach(OutboxRelay::close);
            if (print) {
                long n = acked.sum();
                System.out.printf(
                        Locale.ROOT,
                        "load: %d messages acknowledged of %d written (%d tx/s of %d rows offered, %.1f s, load %.1f);"
                                + " per message: relay threads CPU %.1f us, writer thread %.1f us, database server"
                                + " (writers and relays) %.1f us; relays' round trips %.3f (%s)%n",
                        n,
                        written,
                        txPerSecond,
                        RelaySuite.ROWS_PER_TX,
                        wall,
                        ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage(),
                        relayCpu / 1e3 / n,
                        writerCpu / 1e3 / n,
                        ticks * 1e4 / n,
                        trips.total() / (double) n,
                        trips.summary(n));
                statements(postgres, n);
            }
        }
    }

    private static Map<Long, Long> relayThreadsCpu() {
        Map<Long, Long> cpu = new TreeMap<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("once-relay-")) {
                cpu.put(t.getId(), THREADS.getThreadCpuTime(t.getId()));
            }
        }
        return cpu;
    }

    private static OutboxRelay relay(DataSource ds, int i) {
        return OutboxRelay.builder()
                .dataSource(ds)
                .name("probe-" + i)
                .batchSize(RelaySuite.BATCH)
                .deleteSent(false)
                .meterRegistry(new SimpleMeterRegistry())
                .publisher(new Ack(new LongAdder()))
                .build();
    }

    /** Acknowledges every message at once, concurrently (publishAll overridden), with a receipt as brokers give. */
    private static final class Ack implements Publisher {
        private final LongAdder acked;
        private final AtomicLong seq = new AtomicLong();

        Ack(LongAdder acked) {
            this.acked = acked;
        }

        @Override
        public Receipt publish(OutboxMessage message) {
            acked.increment();
            return new Receipt(0, "seq=" + seq.incrementAndGet());
        }

        @Override
        public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
            List<CompletionStage<Receipt>> stages = new ArrayList<>(messages.size());
            for (OutboxMessage m : messages) {
                stages.add(CompletableFuture.completedFuture(publish(m)));
            }
            return stages;
        }
    }

    /** The statements of the run, per message: calls, execution ms, buffers hit or read, dirtied, WAL records and bytes. */
    private static void statements(BenchPostgres postgres, long n) throws Exception {
        try (Connection c = DriverManager.getConnection(postgres.jdbcUrl());
                Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT calls, total_exec_time, shared_blks_hit + shared_blks_read,"
                        + " shared_blks_dirtied, wal_records, wal_bytes, plans, total_plan_time, query FROM pg_stat_statements"
                        + " WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 14")) {
            while (rs.next()) {
                System.out.printf(
                        Locale.ROOT,
                        "  %8.4f calls  %7.2f us  %6.2f blks  %5.2f dirtied  %5.2f wal  %6.1f B  %6.4f plans %7.2f us   %s%n",
                        rs.getLong(1) / (double) n,
                        rs.getDouble(2) * 1e3 / n,
                        rs.getLong(3) / (double) n,
                        rs.getLong(4) / (double) n,
                        rs.getLong(5) / (double) n,
                        rs.getLong(6) / (double) n,
                        rs.getLong(7) / (double) n,
                        rs.getDouble(8) * 1e3 / n,
                        abbreviate(rs.getString(9)));
            }
        }
    }

    private static String abbreviate(String q) {
        q = q.replaceAll("\\s+", " ");
        return q.length() > 110 ? q.substring(0, 110) + "…" : q;
    }

    private static void admin(BenchPostgres postgres, String sql) throws Exception {
        try (Connection c = DriverManager.getConnection(postgres.jdbcUrl());
                Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    /**
     * Round trips to the database through a data source: each statement execution (pgjdbc sends a
     * JDBC batch or a multi-statement string in one), each commit and rollback; by the statement's
     * first words.
     */
    static final class RoundTrips {
        private final Map<String, LongAdder> counts = new ConcurrentHashMap<>();

        void reset() {
            counts.clear();
        }

        long total() {
            return counts.values().stream().mapToLong(LongAdder::sum).sum();
        }

        String summary(long n) {
            StringBuilder sb = new StringBuilder();
            new TreeMap<>(counts)
                    .forEach((k, v) -> sb.append(sb.length() == 0 ? "" : ", ")
                            .append(k)
                            .append(' ')
                            .append(String.format(Locale.ROOT, "%.4f", v.sum() / (double) n)));
            return sb.toString();
        }

        private void count(String what) {
            counts.computeIfAbsent(what, k -> new LongAdder()).increment();
        }

        DataSource dataSource(DataSource ds) {
            return proxy(DataSource.class, ds, (m, a, r) -> m.equals("getConnection") ? connection((Connection) r) : r);
        }

        private Connection connection(Connection c) {
            return proxy(Connection.class, c, (m, a, r) -> {
                switch (m) {
                    case "commit" -> count("commit");
                    case "rollback" -> count("rollback");
                    case "prepareStatement", "prepareCall" -> {
                        String sql = kind((String) a[0]);
                        return proxy(java.sql.PreparedStatement.class, (java.sql.PreparedStatement) r, (sm, sa, sr) -> {
                            if (sm.startsWith("execute")) {
                                count(sql);
                            }
                            return sr;
                        });
                    }
                    case "createStatement" -> {
                        return proxy(Statement.class, (Statement) r, (sm, sa, sr) -> {
                            if (sm.startsWith("execute")) {
                                count(kind((String) sa[0]));
                            }
                            return sr;
                        });
                    }
                    default -> {}
                }
                return r;
            });
        }

        private final Map<String, String> kinds = new ConcurrentHashMap<>();

        // Cached: the regular expression per call cost more than the relay's own code.
        private String kind(String sql) {
            return kinds.computeIfAbsent(sql, RoundTrips::kindOf);
        }

        private static String kindOf(String sql) {
            String s = sql.strip().replaceAll("\\s+", " ");
            if (s.contains("FOR UPDATE SKIP LOCKED") && s.contains("pred")) {
                return "lock";
            }
            if (s.contains("FOR UPDATE SKIP LOCKED")) {
                return "relock";
            }
            if (s.startsWith("WITH gone") || s.startsWith("UPDATE")) {
                return "mark";
            }
            return s.length() > 28 ? s.substring(0, 28) : s;
        }

        @FunctionalInterface
        private interface After {
            Object returned(String method, Object[] args, Object result);
        }

        private static <T> T proxy(Class<T> type, T target, After after) {
            return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (p, m, a) -> {
                Object r;
                try {
                    r = m.invoke(target, a);
                } catch (InvocationTargetException e) {
                    throw e.getCause();
                }
                return after.returned(m.getName(), a, r);
            }));
        }
    }
}
