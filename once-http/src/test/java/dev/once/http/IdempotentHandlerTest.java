package dev.once.http;

import io.javalin.Javalin;

/** The contract through the Javalin handler wrapper on Javalin's own Jetty. */
class IdempotentHandlerTest extends HttpIdempotencyContract {

    private Javalin app;

    @Override
    protected String start(Endpoint endpoint) {
        IdempotentHandler idempotent = IdempotentHandler.builder()
                .keys(keys)
                .scope(ctx -> tenant(ctx.header("X-Tenant")))
                .transactional(transactional())
                .build();
        app = Javalin.create(config -> {
                    config.startup.showJavalinBanner = false;
                    config.routes.post("/payments", idempotent.wrap(ctx -> {
                        Response r = endpoint.handle(
                                tenant(ctx.header("X-Tenant")),
                                ctx.body(),
                                IdempotentHandler.transaction(ctx)
                                        .map(t -> t.connection())
                                        .orElse(null));
                        ctx.status(r.status()).contentType(r.contentType()).result(r.body());
                    }));
                    config.routes.get("/payments", ctx -> ctx.result("list"));
                })
                .start("127.0.0.1", 0);
        return "http://127.0.0.1:" + app.port();
    }

    @Override
    protected void stop() {
        app.stop();
    }
}
