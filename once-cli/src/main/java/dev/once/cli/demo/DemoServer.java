package dev.once.cli.demo;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.once.cli.internal.Databases;
import dev.once.cli.internal.Failure;
import io.javalin.Javalin;
import io.javalin.http.sse.SseClient;
import io.javalin.http.staticfiles.Location;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The page: static HTML/JS from the jar, {@code POST /api/actions/{action}} for the buttons,
 * {@code GET /api/state} and server-sent events on {@code /events} with the state whenever it
 * changes. Binds to localhost only.
 */
public final class DemoServer implements AutoCloseable {

    private static final long PUSH_MILLIS = 250;

    private final Demo demo;
    private final Javalin app;
    private final ObjectMapper json = new ObjectMapper();
    private final Set<SseClient> clients = ConcurrentHashMap.newKeySet();
    private final ScheduledExecutorService pusher = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "once-demo-sse");
        t.setDaemon(true);
        return t;
    });
    private volatile String last = "";

    private DemoServer(Demo demo, int port) {
        this.demo = demo;
        this.app = Javalin.create(config -> {
            config.startup.showJavalinBanner = false;
            config.staticFiles.add(files -> {
                files.hostedPath = "/";
                files.directory = "/dev/once/cli/demo/web";
                files.location = Location.CLASSPATH;
            });
            config.routes.get(
                    "/api/state", ctx -> ctx.contentType("application/json").result(stateJson()));
            config.routes.post("/api/actions/{action}", ctx -> {
                Demo.Action action;
                try {
                    action = Demo.Action.byKey(ctx.pathParam("action"));
                } catch (IllegalArgumentException e) {
                    ctx.status(404)
                            .contentType("application/json")
                            .result(json.writeValueAsString(Map.of("error", e.getMessage())));
                    return;
                }
                String line = demo.perform(action);
                ctx.contentType("application/json").result(json.writeValueAsString(Map.of("explanation", line)));
                push();
            });
            config.routes.sse("/events", client -> {
                client.keepAlive();
                client.onClose(() -> clients.remove(client));
                clients.add(client);
                client.sendEvent("state", last.isEmpty() ? stateJson() : last);
            });
        });
        try {
            app.start("127.0.0.1", port);
        } catch (RuntimeException e) {
            if (Databases.rootMessage(e).toLowerCase(java.util.Locale.ROOT).contains("address already in use")
                    || e.getCause() instanceof java.net.BindException) {
                throw Failure.usage(
                        "--port " + port + " is in use on localhost; pass another --port, or --port 0 for a free one");
            }
            throw e;
        }
        pusher.scheduleWithFixedDelay(this::push, PUSH_MILLIS, PUSH_MILLIS, TimeUnit.MILLISECONDS);
    }

    /** Serves the page for {@code demo} on {@code port} (0 picks a free one). */
    public static DemoServer start(Demo demo, int port) {
        return new DemoServer(demo, port);
    }

    public int port() {
        return app.port();
    }

    private String stateJson() {
        try {
            return json.writeValueAsString(demo.state());
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    private synchronized void push() {
        String now;
        try {
            now = stateJson();
        } catch (RuntimeException e) {
            return; // the database is briefly away; the next tick tries again
        }
        if (now.equals(last)) {
            return;
        }
        last = now;
        for (SseClient c : clients) {
            if (c.terminated()) {
                clients.remove(c);
            } else {
                c.sendEvent("state", now);
            }
        }
    }

    @Override
    public void close() {
        pusher.shutdownNow();
        clients.forEach(SseClient::close);
        app.stop();
    }
}
