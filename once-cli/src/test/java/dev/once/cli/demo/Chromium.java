package dev.once.cli.demo;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.once.testsupport.Services;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A real headless Chromium driven over the Chrome DevTools Protocol, with nothing but the JDK's
 * WebSocket client: launch, open a page, evaluate JavaScript in it, take a screenshot. Skips the
 * test (or fails it when {@code ONCE_REQUIRE_SERVICES} lists {@code chromium}) if no binary exists.
 */
final class Chromium implements AutoCloseable {

    /** Overrides where the binary is looked for. */
    static final String BINARY_ENV = "ONCE_CHROMIUM";

    private static final List<String> CANDIDATES = List.of(
            "/usr/bin/chromium",
            "/usr/bin/chromium-browser",
            "/usr/bin/google-chrome",
            "/usr/bin/google-chrome-stable");
    private static final Pattern LISTENING = Pattern.compile("DevTools listening on (ws://\\S+)");
    private static final Duration CALL_TIMEOUT = Duration.ofSeconds(30);

    private final ObjectMapper json = new ObjectMapper();
    private final Process process;
    private final Path profile;
    private final WebSocket socket;
    private final AtomicInteger ids = new AtomicInteger();
    private final Map<Integer, CompletableFuture<JsonNode>> calls = new ConcurrentHashMap<>();

    private Chromium(Process process, Path profile, URI page) throws Exception {
        this.process = process;
        this.profile = profile;
        this.socket = HttpClient.newHttpClient()
                .newWebSocketBuilder()
                .buildAsync(page, new Listener())
                .get(CALL_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
    }

    /** Starts a headless Chromium with a fresh profile and attaches to its first tab. */
    static Chromium launch() throws Exception {
        String binary = binary();
        Path profile = Files.createTempDirectory("once-chromium-");
        Process p = new ProcessBuilder(
                        binary,
                        "--headless",
                        "--no-sandbox",
                        "--disable-gpu",
                        "--disable-quic",
                        "--no-first-run",
                        "--disable-background-networking",
                        "--disable-component-update",
                        "--disable-sync",
                        "--disable-dev-shm-usage",
                        "--remote-debugging-port=0",
                        "--remote-allow-origins=*",
                        "--user-data-dir=" + profile,
                        "--window-size=1280,1400",
                        "about:blank")
                .redirectErrorStream(true)
                .start();
        CompletableFuture<String> endpoint = new CompletableFuture<>();
        Thread drain = new Thread(
                () -> {
                    try (BufferedReader r =
                            new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                        String line;
                        while ((line = r.readLine()) != null) {
                            Matcher m = LISTENING.matcher(line);
                            if (m.find()) {
                                endpoint.complete(m.group(1));
                            }
                        }
                    } catch (IOException e) {
                        endpoint.completeExceptionally(e);
                    }
                    // The output ended: chromium is gone. Does nothing if it had already said where it listens.
                    endpoint.completeExceptionally(new IllegalStateException(
                            "chromium closed its output before it listened" + " for DevTools"));
                },
                "chromium-output");
        drain.setDaemon(true);
        drain.start();
        try {
            URI browser = URI.create(endpoint.get(60, TimeUnit.SECONDS));
            URI page = firstPage(browser);
            return new Chromium(p, profile, page);
        } catch (Exception e) {
            p.destroyForcibly();
            deleteTree(profile);
            throw e;
        }
    }

    private static String binary() {
        String configured = System.getenv(BINARY_ENV);
        for (String candidate : configured != null ? List.of(configured) : CANDIDATES) {
            if (Files.isExecutable(Path.of(candidate))) {
                return candidate;
            }
        }
        throw Services.unavailable(
                "chromium",
                "apt-get install -y chromium (or set " + BINARY_ENV + ")",
                new IllegalStateException("no chromium binary at " + (configured != null ? configured : CANDIDATES)));
    }

    private static URI firstPage(URI browser) throws Exception {
        URI list = URI.create("http://" + browser.getHost() + ":" + browser.getPort() + "/json/list");
        ObjectMapper json = new ObjectMapper();
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (System.nanoTime() < deadline) {
            HttpResponse<String> r = HttpClient.newHttpClient()
                    .send(HttpRequest.newBuilder(list).build(), HttpResponse.BodyHandlers.ofString());
            for (JsonNode target : json.readTree(r.body())) {
                if ("page".equals(target.path("type").asText())) {
                    return URI.create(target.path("webSocketDebuggerUrl").asText());
                }
            }
            Thread.sleep(100); // polling the target list until the first tab is registered
        }
        throw new IllegalStateException("chromium showed no page target at " + list);
    }

    /** Sends one DevTools command and returns its result. */
    JsonNode call(String method, Map<String, Object> params) throws Exception {
        int id = ids.incrementAndGet();
        CompletableFuture<JsonNode> answer = new CompletableFuture<>();
        calls.put(id, answer);
        ObjectNode message = json.createObjectNode().put("id", id).put("method", method);
        message.set("params", json.valueToTree(params));
        synchronized (socket) {
            socket.sendText(json.writeValueAsString(message), true).get(CALL_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
        }
        JsonNode reply = answer.get(CALL_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
        if (reply.has("error")) {
            throw new IllegalStateException(method + " failed: " + reply.get("error"));
        }
        return reply.path("result");
    }

    /** Evaluates a JavaScript expression in the page (awaiting a promise) and returns its value. */
    JsonNode eval(String expression) throws Exception {
        JsonNode r =
                call("Runtime.evaluate", Map.of("expression", expression, "returnByValue", true, "awaitPromise", true));
        if (r.has("exceptionDetails")) {
            throw new IllegalStateException("page threw on `" + expression + "`: " + r.get("exceptionDetails"));
        }
        return r.path("result").path("value");
    }

    /** Opens {@code url} in the tab at 1280×1400 and waits until the document has loaded. */
    void open(String url) throws Exception {
        call(
                "Emulation.setDeviceMetricsOverride",
                Map.of("width", 1280, "height", 1400, "deviceScaleFactor", 1, "mobile", false));
        call("Page.navigate", Map.of("url", url));
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (System.nanoTime() < deadline) {
            JsonNode state = eval("document.readyState + ' ' + location.href");
            if (state.asText().startsWith("complete " + url)) {
                return;
            }
            Thread.sleep(50); // polling the page's load state
        }
        throw new IllegalStateException("the page " + url + " did not load within 30 s");
    }

    /** Writes a PNG of the tab's full page. */
    void screenshot(Path file) throws Exception {
        JsonNode r = call("Page.captureScreenshot", Map.of("format", "png", "captureBeyondViewport", true));
        Files.createDirectories(file.getParent());
        Files.write(file, Base64.getDecoder().decode(r.path("data").asText()));
    }

    @Override
    public void close() throws Exception {
        try {
            socket.abort();
        } finally {
            // Chromium's zygote and renderers are children of the process this class started.
            List<ProcessHandle> children = process.descendants().toList();
            process.destroy();
            children.forEach(ProcessHandle::destroy);
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
            deleteTree(profile);
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    /** Assembles text frames and completes the call each reply answers; events are ignored. */
    private final class Listener implements WebSocket.Listener {
        private final StringBuilder buffer = new StringBuilder();

        @Override
        public CompletionStage<?> onText(WebSocket ws, CharSequence data, boolean last) {
            buffer.append(data);
            if (last) {
                String text = buffer.toString();
                buffer.setLength(0);
                try {
                    JsonNode message = json.readTree(text);
                    if (message.has("id")) {
                        CompletableFuture<JsonNode> call =
                                calls.remove(message.get("id").asInt());
                        if (call != null) {
                            call.complete(message);
                        }
                    }
                } catch (IOException e) {
                    calls.values().forEach(c -> c.completeExceptionally(e));
                }
            }
            ws.request(1);
            return null;
        }

        @Override
        public void onError(WebSocket ws, Throwable error) {
            calls.values().forEach(c -> c.completeExceptionally(error));
        }
    }
}
