package dev.once.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.once.keys.IdempotencyKeys;
import dev.once.testkit.fault.CommitFault;
import dev.once.testkit.fault.FaultProxy;
import dev.once.testsupport.MutableClock;
import dev.once.testsupport.OwnThreads;
import dev.once.testsupport.TestDatabase;
import dev.once.testsupport.TestPostgres;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The {@code Idempotency-Key} contract through a real HTTP server, the same table for every server
 * integration: 400 missing or malformed, 409 in progress, 422 same key with another body, replay of
 * the saved status and body (failures included), 5xx and exceptions not saved, scopes apart.
 * A subclass starts its server with {@link Endpoint} behind its integration on POST
 * {@code /payments} (and GET {@code /payments} answering {@code list}).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class HttpIdempotencyContract {

    /** The business endpoint: what each body makes it do. */
    protected interface Endpoint {
        /**
         * @param transaction the request's transaction connection when the integration is
         *                    transactional, else null (the endpoint writes on a connection of its own)
         */
        Response handle(String tenant, String body, Connection transaction) throws Exception;
    }

    protected record Response(int status, String contentType, String body) {}

    protected TestDatabase db;
    protected IdempotencyKeys keys;
    /** Between the keys (and the request's transaction) and the database: drops a commit's reply on demand. */
    private FaultProxy proxy;
    /** The keys' lock expiry moves with this clock; the only fake here is time. */
    protected final MutableClock clock = MutableClock.startingNow();

    private final HttpClient http =
            HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
    private final AtomicInteger payments = new AtomicInteger();
    private volatile CountDownLatch slowEntered = new CountDownLatch(1);
    private volatile CountDownLatch slowRelease = new CountDownLatch(1);
    private static final Duration LOCK = Duration.ofSeconds(30);
    private static final int MAX_RESULT = 16 * 1024;
    private String base;

    /** Starts the server and returns its base URL, e.g. {@code http://127.0.0.1:4711}. */
    protected abstract String start(Endpoint endpoint) throws Exception;

    protected abstract void stop() throws Exception;

    /** True for the subclasses that run the integration with {@code transactional(true)}. */
    protected boolean transactional() {
        return false;
    }

    /** What every subclass's scope function does: the X-Tenant header, or "public". */
    protected static String tenant(String header) {
        return header == null ? "public" : header;
    }

    @BeforeAll
    void startServer() throws Exception {
        db = TestPostgres.shared().freshDatabase();
        db.execute("CREATE TABLE charge (request text NOT NULL)");
        String url = TestPostgres.shared().jdbcUrl();
        url += (url.contains("?") ? "&" : "?") + "currentSchema=" + db.name();
        proxy = FaultProxy.forJdbcUrl(url);
        org.postgresql.ds.PGSimpleDataSource proxied = new org.postgresql.ds.PGSimpleDataSource();
        proxied.setURL(proxy.jdbcUrl(url));
        keys = IdempotencyKeys.builder()
                .dataSource(proxied)
                .lockDuration(LOCK)
                .clock(clock)
                .maxResultBytes(MAX_RESULT)
                .build();
        base = start(this::endpoint);
    }

    @AfterAll
    void stopServer() throws Exception {
        stop();
        proxy.close();
        db.close();
    }

    private Response endpoint(String tenant, String body, Connection transaction) throws Exception {
        int run = runs.computeIfAbsent(tenant + "|" + body, k -> new AtomicInteger())
                .incrementAndGet();
        if (body.startsWith("charge")) {
            return charge(tenant, body, transaction, run);
        }
        if (body.startsWith("big")) {
            return new Response(201, "text/plain", "x".repeat(MAX_RESULT + 1));
        }
        if (body.startsWith("slow")) {
            slowEntered.countDown();
            slowRelease.await(30, TimeUnit.SECONDS);
        }
        if (body.startsWith("declined")) {
            return new Response(402, "application/json", "{\"error\":\"card_declined\"}");
        }
        if (body.startsWith("unavailable")) {
            return new Response(503, "text/plain", "try later");
        }
        if (body.startsWith("boom")) {
            throw new IllegalStateException("handler bug");
        }
        int n = payments.incrementAndGet();
        return new Response(201, "application/json", "{\"payment\":" + n + ",\"tenant\":\"" + tenant + "\"}");
    }

    // The effect is a row in the keys' database: on the request's transaction when there is one.
    private Response charge(String tenant, String body, Connection transaction, int run) throws Exception {
        try (Connection own = transaction == null ? db.dataSource().getConnection() : null) {
            Connection c = transaction == null ? own : transaction;
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO charge (request) VALUES (?)")) {
                ps.setString(1, tenant + "|" + body);
                ps.executeUpdate();
            }
            if (run == 1 && body.startsWith("charge-crash")) {
                throw new IllegalStateException("crash between the effect and the saved result");
            }
            if (run == 1 && body.startsWith("charge-kill")) {
                long pid;
                try (Statement s = c.createStatement();
                        ResultSet rs = s.executeQuery("SELECT pg_backend_pid()")) {
                    rs.next();
                    pid = rs.getLong(1);
                }
                db.queryLong("SELECT count(*) FROM (SELECT pg_terminate_backend(" + pid + ")) t");
            }
            if (run == 1 && body.startsWith("charge-lost-reply")) {
                // the next COMMIT through the proxy: the request's transaction (transactional), else the key's
                // own that saves the result; the database commits it, and its reply never reaches the client
                proxy.failNextCommit(CommitFault.DROP_REPLY);
            }
            if (run == 1 && body.startsWith("charge-slow")) {
                slowEntered.countDown();
                slowRelease.await(30, TimeUnit.SECONDS);
            }
            if (body.startsWith("charge-big")) {
                return new Response(201, "text/plain", "x".repeat(MAX_RESULT + 1));
            }
            return new Response(201, "application/json", "{\"charge\":\"" + body + "\",\"run\":" + run + "}");
        }
    }

    private long charges(String tenant, String body) {
        return db.queryLong("SELECT count(*) FROM charge WHERE request = '" + tenant + "|" + body + "'");
    }

    private int runs(String tenant, String body) {
        AtomicInteger n = runs.get(tenant + "|" + body);
        return n == null ? 0 : n.get();
    }

    private HttpResponse<String> post(String key, String body, String... headers) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + "/payments"))
                .timeout(Duration.ofSeconds(30))
                .POST(HttpRequest.BodyPublishers.ofString(body));
        if (key != null) {
            b.header("Idempotency-Key", key);
        }
        if (headers.length > 0) {
            b.headers(headers);
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
    }

    private static String key() {
        return UUID.randomUUID().toString();
    }

    @Test
    final void aMissingKeyIsA400AndTheHandlerDoesNotRun() throws Exception {
        HttpResponse<String> r = post(null, "missing-key");
        assertThat(r.statusCode()).isEqualTo(400);
        assertThat(r.headers().firstValue("Content-Type"))
                .hasValueSatisfying(t -> assertThat(t).startsWith("application/problem+json"));
        assertThat(r.body()).contains("Idempotency-Key");
        assertThat(runs("public", "missing-key")).isZero();
    }

    @Test
    final void aMalformedKeyIsA400() throws Exception {
        assertThat(post("k".repeat(256), "long-key").statusCode()).isEqualTo(400);
        assertThat(post("\"\"", "empty-key").statusCode()).isEqualTo(400);
        assertThat(runs("public", "long-key") + runs("public", "empty-key")).isZero();
    }

    @Test
    final void aRetryReplaysTheSavedStatusContentTypeAndBodyByteForByte() throws Exception {
        String k = key();
        HttpResponse<String> first = post(k, "pay-20");
        assertThat(first.statusCode()).isEqualTo(201);
        assertThat(first.headers().firstValue("Idempotent-Replayed")).isEmpty();
        HttpResponse<String> second = post(k, "pay-20");
        assertThat(second.statusCode()).isEqualTo(201);
        assertThat(second.body()).isEqualTo(first.body());
        assertThat(second.headers().firstValue("Content-Type"))
                .isEqualTo(first.headers().firstValue("Content-Type"));
        assertThat(second.headers().firstValue("Idempotent-Replayed")).hasValue("true");
        assertThat(post("\"" + k + "\"", "pay-20").body())
                .as("the draft's quoted form is the same key")
                .isEqualTo(first.body());
        assertThat(runs("public", "pay-20")).as("the payment ran once").isEqualTo(1);
    }

    @Test
    final void theSameKeyWithAnotherBodyIsA422() throws Exception {
        String k = key();
        assertThat(post(k, "pay-30").statusCode()).isEqualTo(201);
        HttpResponse<String> r = post(k, "pay-31");
        assertThat(r.statusCode()).isEqualTo(422);
        assertThat(r.body()).contains("different request");
        assertThat(runs("public", "pay-31")).isZero();
    }

    @Test
    final void aKeyInProgressIsA409ThenItsResultIsReplayed() throws Exception {
        String k = key();
        slowEntered = new CountDownLatch(1);
        slowRelease = new CountDownLatch(1);
        CompletableFuture<HttpResponse<String>> first = CompletableFuture.supplyAsync(
                () -> {
                    try {
                        return post(k, "slow-pay");
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                },
                OwnThreads.each());
        assertThat(slowEntered.await(30, TimeUnit.SECONDS)).isTrue();
        HttpResponse<String> concurrent = post(k, "slow-pay");
        assertThat(concurrent.statusCode()).isEqualTo(409);
        slowRelease.countDown();
        HttpResponse<String> done = first.get(30, TimeUnit.SECONDS);
        assertThat(done.statusCode()).isEqualTo(201);
        HttpResponse<String> retry = post(k, "slow-pay");
        assertThat(retry.statusCode()).isEqualTo(201);
        assertThat(retry.body()).isEqualTo(done.body());
        assertThat(runs("public", "slow-pay")).isEqualTo(1);
    }

    @Test
    final void aSavedFailureStatusIsReplayedToo() throws Exception {
        String k = key();
        HttpResponse<String> first = post(k, "declined-1");
        assertThat(first.statusCode()).isEqualTo(402);
        HttpResponse<String> again = post(k, "declined-1");
        assertThat(again.statusCode()).isEqualTo(402);
        assertThat(again.body()).isEqualTo(first.body()).isEqualTo("{\"error\":\"card_declined\"}");
        assertThat(runs("public", "declined-1")).isEqualTo(1);
    }

    @Test
    final void serverErrorsAndExceptionsAreNotSavedSoARetryRunsAgain() throws Exception {
        String k = key();
        assertThat(post(k, "unavailable-1").statusCode()).isEqualTo(503);
        assertThat(post(k, "unavailable-1").statusCode()).isEqualTo(503);
        assertThat(runs("public", "unavailable-1")).isEqualTo(2);

        String k2 = key();
        assertThat(post(k2, "boom-1").statusCode()).isEqualTo(500);
        assertThat(post(k2, "boom-1").statusCode()).isEqualTo(500);
        assertThat(runs("public", "boom-1")).isEqualTo(2);
    }

    @Test
    final void scopesKeepTheirOwnResults() throws Exception {
        String k = key();
        HttpResponse<String> a = post(k, "pay-40", "X-Tenant", "acme");
        HttpResponse<String> b = post(k, "pay-40", "X-Tenant", "globex");
        assertThat(a.statusCode()).isEqualTo(201);
        assertThat(b.statusCode())
                .as("the same key in another scope is a new request")
                .isEqualTo(201);
        assertThat(a.body()).contains("acme");
        assertThat(b.body()).contains("globex");
        assertThat(post(k, "pay-40", "X-Tenant", "acme").body()).isEqualTo(a.body());
        assertThat(post(k, "pay-40", "X-Tenant", "globex").body()).isEqualTo(b.body());
    }

    /**
     * Issue 10 item 9: the request applies its effect, then fails before its result is saved (an
     * exception; a killed database connection). In transactional mode neither commits, so the retry
     * applies the effect once; saved apart, the effect stayed and the retry applied it again.
     */
    @Test
    final void aCrashBetweenTheEffectAndTheSavedResultLeavesNeitherSoARetryAppliesItOnce() throws Exception {
        assumeTrue(transactional(), "without transactional(true) the effect commits apart from the result");
        for (String body : new String[] {"charge-crash-1", "charge-kill-1"}) {
            String k = key();
            assertThat(post(k, body).statusCode())
                    .as("%s: the failed first run", body)
                    .isEqualTo(500);
            assertThat(charges("public", body))
                    .as("%s: the failed run applied nothing", body)
                    .isZero();
            HttpResponse<String> retry = post(k, body);
            assertThat(retry.statusCode()).as("%s: the retry runs", body).isEqualTo(201);
            assertThat(post(k, body).body()).as("%s: and is saved", body).isEqualTo(retry.body());
            assertThat(charges("public", body))
                    .as("%s: effect applied exactly once", body)
                    .isEqualTo(1);
        }
    }

    /**
     * The database commits the request's result (transactional: with its effect), and the reply to that commit is
     * lost: the server cannot know whether it committed. The client must hear just that, and that a retry with the
     * same key is safe; the retry replays the committed result and the effect stays applied once.
     */
    @Test
    final void aLostCommitReplyIsA500NamingTheUnknownOutcomeAndTheRetryReplays() throws Exception {
        String k = key();
        HttpResponse<String> first = post(k, "charge-lost-reply-1");
        assertThat(first.statusCode()).isEqualTo(500);
        assertThat(first.body())
                .as("the answer to a commit whose reply was lost")
                .contains("unknown")
                .contains("retry with the same Idempotency-Key")
                .doesNotContain("nothing was applied");
        HttpResponse<String> retry = post(k, "charge-lost-reply-1");
        assertThat(retry.statusCode())
                .as("the retry replays the committed result")
                .isEqualTo(201);
        assertThat(retry.headers().firstValue("Idempotent-Replayed")).hasValue("true");
        assertThat(runs("public", "charge-lost-reply-1"))
                .as("the request ran once")
                .isEqualTo(1);
        assertThat(charges("public", "charge-lost-reply-1"))
                .as("effect applied exactly once")
                .isEqualTo(1);
    }

    /**
     * Issue 10 item 9: the first request outlives its claim; a retry takes the key over and applies the
     * effect; then the first one finishes. Its result is refused by the fencing token and, in
     * transactional mode, its effect rolls back with it: one effect, not two.
     */
    @Test
    final void aTakeoverAfterTheClaimLapsedCannotApplyTheEffectTwice() throws Exception {
        assumeTrue(transactional(), "without transactional(true) the effect commits apart from the result");
        String k = key();
        slowEntered = new CountDownLatch(1);
        slowRelease = new CountDownLatch(1);
        CompletableFuture<HttpResponse<String>> first = CompletableFuture.supplyAsync(
                () -> {
                    try {
                        return post(k, "charge-slow-1");
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                },
                OwnThreads.each());
        assertThat(slowEntered.await(30, TimeUnit.SECONDS)).isTrue();
        clock.advance(LOCK.plusSeconds(1));
        HttpResponse<String> takeover = post(k, "charge-slow-1");
        assertThat(takeover.statusCode())
                .as("the retry took the lapsed key over")
                .isEqualTo(201);
        slowRelease.countDown();
        HttpResponse<String> late = first.get(30, TimeUnit.SECONDS);
        assertThat(late.statusCode()).as("the first request lost its claim").isEqualTo(409);
        assertThat(charges("public", "charge-slow-1"))
                .as("effect applied exactly once")
                .isEqualTo(1);
        assertThat(post(k, "charge-slow-1").body())
                .as("the successor's result stands")
                .isEqualTo(takeover.body());
    }

    /**
     * A response larger than a key can save is answered 500 and never buffered whole. Transactional:
     * the effect is rolled back and the key released (a retry runs again, applying nothing).
     * Otherwise the effect may have happened: the 500 is saved and replayed, the request not run again.
     */
    @Test
    final void aResponseTooLargeToSaveIsA500AndNeverRunsTheEffectTwice() throws Exception {
        String k = key();
        HttpResponse<String> first = post(k, "charge-big-1");
        assertThat(first.statusCode()).isEqualTo(500);
        assertThat(first.body()).contains("exceeded the " + MAX_RESULT + " bytes");
        HttpResponse<String> again = post(k, "charge-big-1");
        assertThat(again.statusCode()).isEqualTo(500);
        if (transactional()) {
            assertThat(runs("public", "charge-big-1"))
                    .as("released: the retry ran")
                    .isEqualTo(2);
            assertThat(charges("public", "charge-big-1"))
                    .as("and nothing was applied")
                    .isZero();
        } else {
            assertThat(runs("public", "charge-big-1"))
                    .as("the effect may have happened: not run again")
                    .isEqualTo(1);
            assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
            assertThat(charges("public", "charge-big-1")).isEqualTo(1);
        }
    }

    @Test
    final void uncoveredMethodsPassThrough() throws Exception {
        HttpResponse<String> r = http.send(
                HttpRequest.newBuilder(URI.create(base + "/payments")).GET().build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(r.body()).isEqualTo("list");
    }
}
