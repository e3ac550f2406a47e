package dev.once.core;

import static org.assertj.core.api.Assertions.assertThat;

import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.IdempotentConsumerBuilder;
import dev.once.MismatchPolicy;
import dev.once.Outcome;
import dev.once.Outcome.Status;
import dev.once.PayloadMismatchException;
import dev.once.PermanentFailureException;
import dev.once.jdbc.Dialect;
import dev.once.jdbc.Dialects;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import dev.once.tx.ManualTransactions;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;

/**
 * An event id reused for a different payload, a producer bug that dedupe alone would hide: with
 * {@link MismatchPolicy#COUNT} or {@link MismatchPolicy#FAIL_PERMANENT} the inbox keeps a short
 * fingerprint of each claimed payload, and a duplicate whose fingerprint differs is counted
 * ({@code once.duplicates.mismatched}), logged with both fingerprints and never its payload, and,
 * under FAIL_PERMANENT, reported for dead-lettering. Off by default: then the claim writes no
 * fingerprint at all.
 */
class PayloadMismatchTest {

    private static final String MISMATCHED = "once.duplicates.mismatched";

    private TestDatabase db;
    private SimpleMeterRegistry registry;
    private final AtomicInteger effects = new AtomicInteger();
    private final String secret = "CANARY-" + UUID.randomUUID();

    protected TestDatabase newDatabase(int poolSize) {
        return TestPostgres.shared().freshDatabase(poolSize);
    }

    @BeforeEach
    void setUp() {
        db = newDatabase(8);
        registry = new SimpleMeterRegistry();
    }

    @AfterEach
    void tearDown() {
        if (db != null) { // null when setUp skipped the test: no MariaDB
            db.close();
        }
    }

    private IdempotentConsumerBuilder builder(DataSource ds) {
        return IdempotentConsumer.builder()
                .dataSource(ds)
                .consumer("billing")
                .meterRegistry(registry)
                .handler((d, tx) -> {
                    if (d.eventId().startsWith("poison")) {
                        throw new PermanentFailureException("poison");
                    }
                    effects.incrementAndGet();
                });
    }

    private IdempotentConsumer consumer(MismatchPolicy policy) {
        return builder(db.dataSource()).onMismatch(policy).build();
    }

    /** A payment whose payload holds the secret, so a logged payload would show. */
    private Delivery payment(String id, int amount) {
        return Delivery.of(id, "{\"card\":\"" + secret + "\",\"amount\":" + amount + "}");
    }

    private double mismatched() {
        return mismatched("billing");
    }

    private double mismatched(String consumer) {
        Counter c = registry.find(MISMATCHED).tag("consumer", consumer).counter();
        return c == null ? 0 : c.count();
    }

    /** The first 8 bytes of the payload's SHA-256, in hex: what the inbox stores and the log shows. */
    static String fingerprint(Delivery d) {
        try {
            byte[] sha = MessageDigest.getInstance("SHA-256").digest(d.payload());
            return HexFormat.of().formatHex(sha, 0, 8);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    private long storedFingerprints() {
        return db.queryLong("SELECT count(payload_fingerprint) FROM once_inbox");
    }

    @Test
    void theSameIdWithTheSamePayloadIsAPlainDuplicate() {
        IdempotentConsumer once = consumer(MismatchPolicy.COUNT);
        Delivery first = payment("evt-1", 20);
        assertThat(once.process(first).status()).isEqualTo(Status.APPLIED);
        assertThat(once.process(first.redelivery()).status()).isEqualTo(Status.DUPLICATE);
        assertThat(once.process(payment("evt-1", 20)).status()).isEqualTo(Status.DUPLICATE);
        assertThat(mismatched()).as("copies of one payload are no mismatch").isZero();
        assertThat(registry.get("once.duplicates").counter().count()).isEqualTo(2);
        assertThat(storedFingerprints())
                .as("the claim kept the payload's fingerprint")
                .isEqualTo(1);
        assertThat(effects).as("effect applied exactly once").hasValue(1);
    }

    @Test
    void theSameIdWithADifferentPayloadIsCountedAndLoggedWithBothFingerprintsButNotThePayload() throws Exception {
        IdempotentConsumer once = consumer(MismatchPolicy.COUNT);
        Delivery first = payment("evt-1", 20);
        Delivery reused = payment("evt-1", 2000);
        assertThat(once.process(first).status()).isEqualTo(Status.APPLIED);

        List<String> lines = capturingStderr(() -> once.process(reused));

        assertThat(once.process(reused).status())
                .as("under COUNT the reused id is still a duplicate: acknowledged, not applied")
                .isEqualTo(Status.DUPLICATE);
        assertThat(mismatched()).as("both deliveries of the reused id counted").isEqualTo(2);
        assertThat(effects).as("effect applied exactly once").hasValue(1);
        assertThat(lines)
                .as("a log line naming the event and both fingerprints")
                .anyMatch(
                        l -> l.contains("evt-1") && l.contains(fingerprint(first)) && l.contains(fingerprint(reused)));
        assertThat(lines).as("log lines carrying the payload").noneMatch(l -> l.contains(secret));
    }

    @Test
    void underFailPermanentTheReusedIdIsReportedForDeadLettering() throws Exception {
        IdempotentConsumer once = consumer(MismatchPolicy.FAIL_PERMANENT);
        Delivery first = payment("evt-1", 20);
        Delivery reused = payment("evt-1", 2000);
        once.process(first);
        Outcome o = once.process(reused);
        assertThat(o.status()).isEqualTo(Status.FAILED_PERMANENT);
        assertThat(o.shouldAcknowledge()).isFalse();
        assertThat(o.failure())
                .isInstanceOfSatisfying(PayloadMismatchException.class, e -> {
                    assertThat(e.eventId()).isEqualTo("evt-1");
                    assertThat(e.storedFingerprint()).isEqualTo(fingerprint(first));
                    assertThat(e.deliveredFingerprint()).isEqualTo(fingerprint(reused));
                })
                .hasMessageNotContaining(secret);
        assertThat(once.process(first.redelivery()).status())
                .as("a true copy stays a plain duplicate")
                .isEqualTo(Status.DUPLICATE);
        assertThat(mismatched()).isEqualTo(1);
        assertThat(registry.get("once.deliveries")
                        .tag("outcome", "failed_permanent")
                        .counter()
                        .count())
                .isEqualTo(1);
        assertThat(effects).as("effect applied exactly once").hasValue(1);
    }

    @Test
    void aMismatchedCopyInsideABatchComparesWithTheFirstOccurrence() {
        IdempotentConsumer once = consumer(MismatchPolicy.FAIL_PERMANENT);
        List<Outcome> outcomes = once.processBatch(List.of(
                payment("a", 1),
                payment("b", 1),
                payment("a", 2),
                payment("a", 1).redelivery(),
                payment("b", 1)));
        assertThat(outcomes)
                .extracting(Outcome::status)
                .containsExactly(
                        Status.APPLIED, Status.APPLIED, Status.FAILED_PERMANENT, Status.DUPLICATE, Status.DUPLICATE);
        assertThat(mismatched()).isEqualTo(1);
        assertThat(effects).hasValue(2);
        assertThat(storedFingerprints()).isEqualTo(2);
    }

    @Test
    void aMismatchedCopyInALaterBatchComparesWithTheStoredFingerprint() {
        IdempotentConsumer once = consumer(MismatchPolicy.COUNT);
        assertThat(once.processBatch(List.of(payment("a", 1), payment("b", 1))))
                .extracting(Outcome::status)
                .containsExactly(Status.APPLIED, Status.APPLIED);
        // a: stored 1, then 1 again (a copy), then 2 (reused); b: stored 1, delivered 2; c: new.
        List<Outcome> outcomes = once.processBatch(
                List.of(payment("a", 1), payment("b", 2), payment("c", 1), payment("a", 2), payment("c", 1)));
        assertThat(outcomes)
                .extracting(Outcome::status)
                .containsExactly(
                        Status.DUPLICATE, Status.DUPLICATE, Status.APPLIED, Status.DUPLICATE, Status.DUPLICATE);
        assertThat(mismatched())
                .as("b against the inbox, a's second copy against the inbox")
                .isEqualTo(2);

        IdempotentConsumer strict = consumer(MismatchPolicy.FAIL_PERMANENT);
        assertThat(strict.processBatch(List.of(payment("b", 2), payment("c", 1), payment("d", 1), payment("b", 2))))
                .as("each copy of a reused id compares with the payload applied, not with its first copy")
                .extracting(Outcome::status)
                .containsExactly(Status.FAILED_PERMANENT, Status.DUPLICATE, Status.APPLIED, Status.FAILED_PERMANENT);
        assertThat(mismatched()).isEqualTo(4);
        assertThat(effects).as("each event applied exactly once").hasValue(4);
    }

    @Test
    void aMismatchInABatchThatIsBisectedIsCountedOnce() {
        IdempotentConsumer once = consumer(MismatchPolicy.FAIL_PERMANENT);
        once.process(payment("a", 1));
        List<Delivery> batch = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            batch.add(i == 13 ? payment("poison-13", 1) : payment("e-" + i, 1));
        }
        batch.add(5, payment("a", 2));
        List<Outcome> outcomes = once.processBatch(batch);
        assertThat(outcomes.get(5).status()).isEqualTo(Status.FAILED_PERMANENT);
        assertThat(outcomes.get(5).failure()).isInstanceOf(PayloadMismatchException.class);
        assertThat(outcomes)
                .extracting(Outcome::status)
                .filteredOn(s -> s == Status.APPLIED)
                .hasSize(19);
        assertThat(mismatched())
                .as("one reused delivery, however many transactions the bisection ran")
                .isEqualTo(1);
    }

    @Test
    void withALockTimeoutTheClaimsKeepTheFingerprintToo() {
        IdempotentConsumer once = builder(db.dataSource())
                .lockTimeout(java.time.Duration.ofSeconds(2))
                .onMismatch(MismatchPolicy.FAIL_PERMANENT)
                .build();
        assertThat(once.process(payment("a", 1)).status()).isEqualTo(Status.APPLIED);
        assertThat(once.process(payment("a", 2)).status()).isEqualTo(Status.FAILED_PERMANENT);
        assertThat(once.processBatch(List.of(payment("a", 1), payment("b", 1), payment("b", 2))))
                .extracting(Outcome::status)
                .containsExactly(Status.DUPLICATE, Status.APPLIED, Status.FAILED_PERMANENT);
        assertThat(storedFingerprints()).isEqualTo(2);
        assertThat(mismatched()).isEqualTo(2);
    }

    @Test
    void offByDefaultTheClaimWritesNoFingerprintAndCountsNothing() {
        IdempotentConsumer once = builder(db.dataSource()).build();
        once.process(payment("a", 1));
        assertThat(once.process(payment("a", 2)).status()).isEqualTo(Status.DUPLICATE);
        once.processBatch(List.of(payment("b", 1), payment("c", 1), payment("b", 2)));
        assertThat(storedFingerprints())
                .as("fingerprints written with the option off")
                .isZero();
        assertThat(mismatched()).isZero();
    }

    @Test
    void aDeliveryWithoutPayloadOrAClaimWithoutFingerprintIsNeverAMismatch() {
        builder(db.dataSource()).build().process(payment("claimed-before", 1));
        IdempotentConsumer once = consumer(MismatchPolicy.FAIL_PERMANENT);
        assertThat(once.process(payment("claimed-before", 2)).status())
                .as("a claim made with the option off has no fingerprint to compare")
                .isEqualTo(Status.DUPLICATE);
        assertThat(once.process(Delivery.of("empty", new byte[0])).status()).isEqualTo(Status.APPLIED);
        assertThat(once.process(payment("empty", 1)).status()).isEqualTo(Status.DUPLICATE);
        assertThat(once.process(payment("full", 1)).status()).isEqualTo(Status.APPLIED);
        assertThat(once.process(Delivery.of("full", new byte[0])).status())
                .as("a delivery without payload carries no fingerprint")
                .isEqualTo(Status.DUPLICATE);
        assertThat(once.processBatch(List.of(payment("claimed-before", 3), Delivery.of("empty", "x"))))
                .extracting(Outcome::status)
                .containsExactly(Status.DUPLICATE, Status.DUPLICATE);
        assertThat(mismatched()).isZero();
    }

    @Test
    void aSuccessfulClaimCostsNoStatementMoreAndADuplicateOneSelect() throws Exception {
        StatementCounter off = new StatementCounter(db.dataSource());
        StatementCounter on = new StatementCounter(db.dataSource());
        IdempotentConsumer plain = builder(off.dataSource()).build();
        IdempotentConsumer checked = IdempotentConsumer.builder()
                .dataSource(on.dataSource())
                .consumer("checked")
                .meterRegistry(registry)
                .handler((d, tx) -> effects.incrementAndGet())
                .onMismatch(MismatchPolicy.COUNT)
                .build();
        plain.process(payment("warm-up", 1));
        checked.process(payment("warm-up", 1));

        off.reset();
        on.reset();
        plain.process(payment("a", 1));
        checked.process(payment("a", 1));
        assertThat(on.statements()).as("statements of an applied delivery").isEqualTo(off.statements());

        List<Delivery> batch = List.of(payment("b", 1), payment("c", 1), payment("d", 1));
        off.reset();
        on.reset();
        plain.processBatch(batch);
        checked.processBatch(batch);
        assertThat(on.statements()).as("statements of an applied batch").isEqualTo(off.statements());

        off.reset();
        on.reset();
        plain.process(payment("a", 2));
        checked.process(payment("a", 2));
        assertThat(on.statements())
                .as("a duplicate reads the stored fingerprint: one statement more")
                .isEqualTo(off.statements() + 1);

        off.reset();
        on.reset();
        plain.processBatch(List.of(payment("b", 2), payment("c", 1), payment("e", 1)));
        checked.processBatch(List.of(payment("b", 2), payment("c", 1), payment("e", 1)));
        // Without fingerprints, a dialect with a plain first claim (PostgreSQL) sends it before the
        // ON CONFLICT claim, and a duplicate fails it; with them the claim is the ON CONFLICT one.
        boolean plainFirst;
        try (Connection c = db.dataSource().getConnection()) {
            plainFirst = Dialects.detect(c).claimBatchAllNew("once_", null, 3) != null;
        }
        assertThat(on.statements())
                .as("a batch with duplicates reads their fingerprints in one statement")
                .isEqualTo(off.statements() + 1 - (plainFirst ? 1 : 0));
        assertThat(mismatched("checked")).isEqualTo(2);
    }

    @RepeatedTest(3)
    void concurrentDeliveriesOfOneIdWithDifferentPayloadsApplyOnceAndTheOthersAreMismatches() throws Exception {
        IdempotentConsumer once = consumer(MismatchPolicy.FAIL_PERMANENT);
        int n = 6;
        CyclicBarrier barrier = new CyclicBarrier(n);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        List<Status> statuses = new ArrayList<>();
        try {
            List<Future<Outcome>> futures = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                Delivery d = payment("evt-race", i);
                futures.add(pool.submit(() -> {
                    barrier.await(30, TimeUnit.SECONDS);
                    return once.process(d);
                }));
            }
            for (Future<Outcome> f : futures) {
                statuses.add(f.get(60, TimeUnit.SECONDS).status());
            }
        } finally {
            pool.shutdownNow();
        }
        assertThat(statuses).filteredOn(s -> s == Status.APPLIED).hasSize(1);
        assertThat(statuses)
                .as("every loser waited for the winner's commit and then saw its fingerprint")
                .filteredOn(s -> s == Status.FAILED_PERMANENT)
                .hasSize(n - 1);
        assertThat(mismatched()).isEqualTo(n - 1);
        assertThat(effects).as("effect applied exactly once").hasValue(1);
    }

    @Test
    void aJoinedTransactionWhoseSnapshotPredatesTheClaimStillSeesTheStoredFingerprint() throws Exception {
        ManualTransactions manual = new ManualTransactions();
        Dialect dialect;
        try (Connection c = db.dataSource().getConnection()) {
            dialect = Dialects.detect(c);
        }
        IdempotentConsumer joined = IdempotentConsumer.builder()
                .transactions(manual)
                .dialect(dialect)
                .consumer("billing")
                .meterRegistry(registry)
                .handler((d, tx) -> effects.incrementAndGet())
                .onMismatch(MismatchPolicy.FAIL_PERMANENT)
                .build();
        IdempotentConsumer owned = consumer(MismatchPolicy.FAIL_PERMANENT);
        try (Connection c = db.dataSource().getConnection()) {
            c.setAutoCommit(false);
            try (ManualTransactions.Scope tx = manual.join(c)) {
                try (Statement s = c.createStatement();
                        ResultSet rs = s.executeQuery("SELECT count(*) FROM once_inbox")) {
                    rs.next(); // the caller's first read: under REPEATABLE READ its snapshot starts here
                }
                assertThat(owned.process(payment("evt-1", 1)).status()).isEqualTo(Status.APPLIED);
                Outcome o = joined.process(payment("evt-1", 2));
                assertThat(o.status())
                        .as("the claim found evt-1 committed after the caller's snapshot")
                        .isEqualTo(Status.FAILED_PERMANENT);
                tx.commit();
            }
            c.setAutoCommit(true);
        }
        assertThat(mismatched()).isEqualTo(1);
    }

    /** Runs {@code work} with stderr (slf4j-simple's output) copied, and returns the lines written. */
    private static List<String> capturingStderr(Supplier<?> work) {
        PrintStream original = System.err;
        ByteArrayOutputStream copy = new ByteArrayOutputStream();
        System.setErr(new PrintStream(
                new OutputStream() {
                    @Override
                    public void write(int b) {
                        copy.write(b);
                        original.write(b);
                    }

                    @Override
                    public void write(byte[] b, int off, int len) {
                        copy.write(b, off, len);
                        original.write(b, off, len);
                    }
                },
                true,
                StandardCharsets.UTF_8));
        try {
            work.get();
        } finally {
            System.setErr(original);
        }
        return copy.toString(StandardCharsets.UTF_8).lines().toList();
    }

    /** Counts the statements executed on the connections of a data source (commits are not statements). */
    static final class StatementCounter {
        private static final Set<String> EXECUTES = Set.of("execute", "executeQuery", "executeUpdate", "executeBatch");
        private final AtomicInteger count = new AtomicInteger();
        private final DataSource dataSource;

        StatementCounter(DataSource target) {
            this.dataSource = proxy(DataSource.class, target, (result, method) -> {
                if (result instanceof Connection c) {
                    return proxy(Connection.class, c, (r, m) -> {
                        if (r instanceof PreparedStatement ps) {
                            return proxy(PreparedStatement.class, ps, (x, n) -> x);
                        }
                        if (r instanceof Statement s) {
                            return proxy(Statement.class, s, (x, n) -> x);
                        }
                        return r;
                    });
                }
                return result;
            });
        }

        DataSource dataSource() {
            return dataSource;
        }

        int statements() {
            return count.get();
        }

        void reset() {
            count.set(0);
        }

        private interface After {
            Object apply(Object result, String method);
        }

        @SuppressWarnings("unchecked")
        private <T> T proxy(Class<T> type, T target, After after) {
            return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (p, method, args) -> {
                if (EXECUTES.contains(method.getName()) && Statement.class.isAssignableFrom(type)) {
                    count.incrementAndGet();
                }
                if (method.getName().equals("unwrap") || method.getName().equals("isWrapperFor")) {
                    return method.invoke(target, args);
                }
                try {
                    return after.apply(method.invoke(target, args), method.getName());
                } catch (InvocationTargetException e) {
                    throw e.getCause();
                }
            });
        }
    }
}
