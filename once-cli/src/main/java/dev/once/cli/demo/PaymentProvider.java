package dev.once.cli.demo;

import io.javalin.Javalin;
import io.javalin.http.Context;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A card provider behind HTTP, as the demo's consumers see one: {@code POST /charges} charges
 * the card every time, unless the request carries an {@code Idempotency-Key} it has seen, in
 * which case it replays its first answer and charges nothing (the IETF draft's semantics).
 * Charges and replays are counted per caller ({@code X-Caller} header) for the page.
 *
 * <p>Interim: once the outbox work's {@code Idempotency-Key} server integration is on main, this
 * endpoint should be built on it (backed by {@code once_idempotency_key}) instead of the map.
 * Thread-safe.
 */
final class PaymentProvider implements AutoCloseable {

    static final String IDEMPOTENCY_KEY = "Idempotency-Key";
    static final String CALLER = "X-Caller";
    static final String REPLAYED = "Idempotent-Replayed";

    private final Map<String, String> answers = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> charges = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> replays = new ConcurrentHashMap<>();
    private final AtomicInteger next = new AtomicInteger();
    private final Javalin app;

    PaymentProvider() {
        app = Javalin.create(config -> config.showJavalinBanner = false);
        app.post("/charges", this::charge);
        app.start("127.0.0.1", 0);
    }

    /** Where to POST a charge. */
    String chargesUrl() {
        return "http://127.0.0.1:" + app.port() + "/charges";
    }

    int charges(String caller) {
        return charges.getOrDefault(caller, new AtomicInteger()).get();
    }

    int replays(String caller) {
        return replays.getOrDefault(caller, new AtomicInteger()).get();
    }

    private void charge(Context ctx) {
        String caller = ctx.header(CALLER) == null ? "unknown" : ctx.header(CALLER);
        String key = ctx.header(IDEMPOTENCY_KEY);
        if (key == null || key.isBlank()) {
            answer(ctx.status(201), newCharge(caller));
            return;
        }
        boolean[] created = {false};
        // computeIfAbsent is atomic per key: two concurrent requests with one key charge once.
        String charge = answers.computeIfAbsent(key, k -> {
            created[0] = true;
            return newCharge(caller);
        });
        if (created[0]) {
            ctx.status(201);
        } else {
            replays.computeIfAbsent(caller, c -> new AtomicInteger()).incrementAndGet();
            ctx.status(201).header(REPLAYED, "true");
        }
        answer(ctx, charge);
    }

    private static void answer(Context ctx, String charge) {
        ctx.contentType("application/json").result("{\"charge\":\"" + charge + "\"}");
    }

    private String newCharge(String caller) {
        charges.computeIfAbsent(caller, c -> new AtomicInteger()).incrementAndGet();
        return "ch_" + next.incrementAndGet();
    }

    @Override
    public void close() {
        app.stop();
    }
}
