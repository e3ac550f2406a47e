package dev.once.cli.demo;

import dev.once.http.IdempotentHandler;
import dev.once.keys.IdempotencyKeys;
import io.javalin.Javalin;
import io.javalin.http.Context;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;

/**
 * A card provider behind HTTP, as the demo's consumers see one: {@code POST /charges} charges the
 * card. Behind once-http's {@link IdempotentHandler}: a request with an {@code Idempotency-Key}
 * it has already answered gets the saved answer again ({@code Idempotent-Replayed: true}) and
 * charges nothing; a request without the header is charged every time, as the naive lane learns.
 * Its keys live in its own schema, as a provider's would live in its own database. Charges and
 * replays are counted per caller ({@code X-Caller} header) for the page. Thread-safe.
 */
final class PaymentProvider implements AutoCloseable {

    static final String CALLER = "X-Caller";
    static final String REPLAYED = "Idempotent-Replayed";

    private final Map<String, AtomicInteger> charges = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> replays = new ConcurrentHashMap<>();
    private final AtomicInteger next = new AtomicInteger();
    private final Javalin app;

    /** Starts on a free localhost port, keeping its idempotency keys in {@code keysStore}. */
    PaymentProvider(DataSource keysStore) {
        IdempotentHandler idempotent = IdempotentHandler.builder()
                .keys(IdempotencyKeys.builder().dataSource(keysStore).build())
                .required(false) // like most card APIs: the key is optional, and without it every call charges
                .build();
        app = Javalin.create(config -> {
            config.startup.showJavalinBanner = false;
            config.routes.post("/charges", idempotent.wrap(this::charge));
            config.routes.after("/charges", ctx -> {
                if ("true".equals(ctx.res().getHeader(REPLAYED))) {
                    replays.computeIfAbsent(caller(ctx), c -> new AtomicInteger())
                            .incrementAndGet();
                }
            });
        });
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
        charges.computeIfAbsent(caller(ctx), c -> new AtomicInteger()).incrementAndGet();
        ctx.status(201).contentType("application/json").result("{\"charge\":\"ch_" + next.incrementAndGet() + "\"}");
    }

    private static String caller(Context ctx) {
        String caller = ctx.header(CALLER);
        return caller == null ? "unknown" : caller;
    }

    @Override
    public void close() {
        app.stop();
    }
}
