package dev.once.http;

import dev.once.InvalidConfigurationException;
import dev.once.http.internal.Gate;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.KeyTransaction;
import io.javalin.http.Context;
import io.javalin.http.Handler;
import java.io.InputStream;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;

/**
 * Wraps a Javalin {@link Handler} with the {@code Idempotency-Key} request header (IETF
 * draft-ietf-httpapi-idempotency-key-header), backed by {@link IdempotencyKeys}. Same answers as
 * {@link IdempotencyFilter}: 400 for a missing (where required) or malformed key, 409 while the key
 * is in progress, 422 for a key reused with another request, the saved status, content type and body
 * (with {@code Idempotent-Replayed: true}) for a finished key; otherwise the handler runs and a
 * response below 500 is saved; with {@link Builder#transactional}, in one transaction with the effect
 * the handler applies on {@link #transaction(Context)}'s connection. A response larger than
 * {@link IdempotencyKeys#maxResultBytes()} is answered as the filter does (500).
 *
 * <pre>{@code
 * IdempotentHandler idempotent = IdempotentHandler.builder().keys(keys)
 *         .scope(ctx -> ctx.header("X-Tenant")).build();
 * Javalin.create(config -> config.routes.post("/payments", idempotent.wrap(ctx -> {
 *     ... charge ...
 *     ctx.status(201).json(payment);
 * })));
 * }</pre>
 *
 * <p>The wrapped handler must set its result synchronously ({@code ctx.result}, {@code ctx.json});
 * {@code ctx.future} is not supported. Javalin is a {@code provided} dependency of once-http: add
 * it to your own build (7.x). Immutable and thread-safe.
 */
// Javalin is optional (requires static): an application that uses this class has it, so its types
// in these signatures need no requires transitive.
@SuppressWarnings("exports")
public final class IdempotentHandler {

    private static final String TRANSACTION_ATTRIBUTE = KeyTransaction.class.getName();

    private final Gate gate;
    private final Function<Context, String> scope;

    private IdempotentHandler(Gate gate, Function<Context, String> scope) {
        this.gate = gate;
        this.scope = scope;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** {@code handler} behind the header, with every default: required, POST and PATCH, one scope. */
    public static Handler wrap(IdempotencyKeys keys, Handler handler) {
        return builder().keys(keys).build().wrap(handler);
    }

    /** {@code handler} behind the header. */
    public Handler wrap(Handler handler) {
        Objects.requireNonNull(handler, "handler");
        return ctx -> handle(ctx, handler);
    }

    private void handle(Context ctx, Handler handler) throws Exception {
        String method = ctx.req().getMethod();
        if (!gate.covers(method)) {
            handler.handle(ctx);
            return;
        }
        byte[] body = ctx.bodyAsBytes();
        if (body.length > gate.maxRequestBytes()) {
            respond(ctx, gate.tooLarge());
            return;
        }
        String header = ctx.header(Gate.HEADER);
        String query = ctx.req().getQueryString();
        Gate.Decision decision = gate.begin(
                header == null ? null : scope.apply(ctx),
                method,
                ctx.req().getRequestURI() + (query == null ? "" : "?" + query),
                header,
                body);
        if (decision instanceof Gate.PassThrough) {
            handler.handle(ctx);
            return;
        }
        if (decision instanceof Gate.Respond answer) {
            respond(ctx, answer);
            return;
        }
        Gate.Proceed proceed = (Gate.Proceed) decision;
        if (proceed.transaction() != null) {
            ctx.attribute(TRANSACTION_ATTRIBUTE, proceed.transaction());
        }
        try {
            handler.handle(ctx);
        } catch (Exception | Error e) {
            gate.abandon(proceed);
            throw e;
        }
        // Read no more than a key can save: past that the gate answers instead of the handler.
        byte[] produced;
        try (InputStream result = ctx.resultInputStream()) {
            produced = result == null ? new byte[0] : result.readNBytes(gate.maxResponseBytes() + 1);
        }
        boolean overflowed = produced.length > gate.maxResponseBytes();
        if (!overflowed) {
            ctx.result(produced); // the stream was consumed: put the bytes back for Javalin to send
        }
        Gate.Respond override = gate.finish(
                proceed, ctx.statusCode(), ctx.res().getContentType(), overflowed ? new byte[0] : produced, overflowed);
        if (override != null) {
            respond(ctx, override);
        }
    }

    /**
     * The transaction a request runs in when the wrapper is {@link Builder#transactional transactional}:
     * apply the effect on its {@link KeyTransaction#connection() connection}, and the wrapper commits
     * it with the saved response (never commit it yourself). Empty for requests it does not cover,
     * without a key, or when it is not transactional.
     */
    public static Optional<KeyTransaction> transaction(Context ctx) {
        return Optional.ofNullable(ctx.attribute(TRANSACTION_ATTRIBUTE));
    }

    private static void respond(Context ctx, Gate.Respond answer) {
        ctx.status(answer.status());
        if (answer.contentType() != null) {
            ctx.res().setContentType(answer.contentType());
        }
        if (answer.replayed()) {
            ctx.header(Gate.REPLAYED_HEADER, "true");
        }
        ctx.result(answer.body());
    }

    /** Builds an {@link IdempotentHandler}; {@code keys} is required. Not thread-safe. */
    public static final class Builder extends GateBuilder<Context, Builder> {

        private Builder() {}

        @Override
        Builder self() {
            return this;
        }

        /** @throws InvalidConfigurationException if {@code keys} is not set */
        public IdempotentHandler build() {
            return new IdempotentHandler(gate(), scope());
        }
    }
}
