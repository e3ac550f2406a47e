package dev.once.outbox;

import dev.once.InvalidConfigurationException;
import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Performs outbox rows whose destination is an {@code http://} or {@code https://} URL: POSTs the
 * payload with the row's idempotency key in the {@value #IDEMPOTENCY_KEY_HEADER} header and every
 * row header (the event id travels as {@value OutboxMessage#EVENT_ID_HEADER}), and records the
 * provider's status and body on the row.
 *
 * <pre>{@code
 * OutboxRelay relay = OutboxRelay.builder()
 *     .dataSource(ds)
 *     .publisher(HttpPublisher.builder().timeout(Duration.ofSeconds(10)).build())
 *     .destinationPrefix("https://")
 *     .build();
 * relay.start();
 * }</pre>
 *
 * <p><b>How answers are classified.</b> 2xx: sent. 408, 409 (the provider is still processing the
 * same key), 425, 429 and 5xx, 401 and 403 (credentials and permissions can be fixed without
 * changing the message, as on every publisher), a timeout or a connection failure: retryable, the
 * relay tries again later with the same key. Any other status (400, 404, 422, …): permanent, the row
 * goes to {@code dead} with the provider's answer. Only the first {@link Receipt#MAX_BODY} characters of an
 * answer are read (the rest is never downloaded), and the whole exchange, body included, must end
 * within the timeout. The {@code content-type} row header, if any, becomes the
 * request's {@code Content-Type} (default {@value #DEFAULT_CONTENT_TYPE}).
 *
 * <p>Immutable and thread-safe; one {@link HttpClient} is shared by every send.
 */
public final class HttpPublisher implements Publisher {

    /** The header that carries the row's idempotency key (IETF draft, Stripe). */
    public static final String IDEMPOTENCY_KEY_HEADER = "Idempotency-Key";
    /** Content type sent when the row has no {@code content-type} header. */
    public static final String DEFAULT_CONTENT_TYPE = "application/json";
    /** How long one send may take, unless configured. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);

    // Headers the JDK client sets itself and refuses from callers.
    private static final Set<String> RESTRICTED =
            Set.of("connection", "content-length", "expect", "host", "upgrade", "content-type", "idempotency-key");

    // UTF-8 needs at most 3 bytes per char of Receipt.MAX_BODY (4 per surrogate pair, which is 2 chars).
    private static final int MAX_READ = 3 * Receipt.MAX_BODY;

    private final HttpClient client;
    private final Duration timeout;

    private HttpPublisher(HttpClient client, Duration timeout) {
        this.client = client;
        this.timeout = timeout;
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * POSTs the message and waits for the answer.
     *
     * @return the provider's status and body
     * @throws PublishFailure retryable or not, with the provider's answer, for a non-2xx status;
     *                        retryable for a timeout or connection failure; permanent when the
     *                        destination is not an http(s) URL
     */
    @Override
    public Receipt publish(OutboxMessage message) throws InterruptedException {
        try {
            return send(message).get();
        } catch (ExecutionException e) {
            throw e.getCause() instanceof PublishFailure f
                    ? f
                    : PublishFailure.retryable(
                            "POST for row " + message.id() + " failed: " + e.getCause(), Receipt.NONE, e.getCause());
        }
    }

    /** POSTs every message at once ({@link HttpClient#sendAsync}); each answer is classified as {@link #publish} does. */
    @Override
    public List<CompletionStage<Receipt>> publishAll(List<OutboxMessage> messages) {
        List<CompletionStage<Receipt>> results = new ArrayList<>(messages.size());
        for (OutboxMessage m : messages) {
            results.add(send(m));
        }
        return results;
    }

    private CompletableFuture<Receipt> send(OutboxMessage message) {
        URI uri;
        try {
            uri = URI.create(message.destination());
        } catch (IllegalArgumentException e) {
            return CompletableFuture.failedFuture(PublishFailure.permanent(
                    "destination '" + message.destination() + "' of row " + message.id() + " is not a URL",
                    Receipt.NONE,
                    e));
        }
        String scheme = uri.getScheme() == null ? "" : uri.getScheme().toLowerCase(Locale.ROOT);
        if (!scheme.equals("http") && !scheme.equals("https")) {
            return CompletableFuture.failedFuture(PublishFailure.permanent(
                    "HttpPublisher sends to http:// or https:// destinations, but row " + message.id() + " has '"
                            + message.destination() + "'",
                    Receipt.NONE,
                    null));
        }
        HttpRequest.Builder request = HttpRequest.newBuilder(uri)
                .timeout(timeout)
                .POST(HttpRequest.BodyPublishers.ofByteArray(message.payload()))
                .header(IDEMPOTENCY_KEY_HEADER, message.idempotencyKey());
        String contentType = DEFAULT_CONTENT_TYPE;
        for (Map.Entry<String, String> h : message.headers().entrySet()) {
            String name = h.getKey().toLowerCase(Locale.ROOT);
            if (name.equals("content-type")) {
                contentType = h.getValue();
            } else if (!RESTRICTED.contains(name)) {
                request.header(h.getKey(), h.getValue());
            }
        }
        request.header("Content-Type", contentType);
        CompletableFuture<HttpResponse<byte[]>> sent;
        try {
            sent = client.sendAsync(request.build(), info -> new Head(MAX_READ));
        } catch (IllegalArgumentException e) {
            return CompletableFuture.failedFuture(PublishFailure.permanent(
                    "POST " + uri + " for row " + message.id() + " cannot be sent: " + e.getMessage(),
                    Receipt.NONE,
                    e));
        }
        // The whole exchange, body included, within the timeout: the request's own timeout ends
        // at the response headers, and a body that trickles would hold the row lock for ever.
        return sent.copy().orTimeout(timeout.toNanos(), TimeUnit.NANOSECONDS).handle((response, failure) -> {
            if (failure != null) {
                Throwable cause = failure instanceof CompletionException && failure.getCause() != null
                        ? failure.getCause()
                        : failure;
                if (cause instanceof TimeoutException) {
                    sent.cancel(true);
                    throw PublishFailure.retryable(
                            "POST " + uri + " for row " + message.id() + " took longer than " + timeout,
                            Receipt.NONE,
                            cause);
                }
                throw PublishFailure.retryable(
                        "POST " + uri + " for row " + message.id() + " failed: " + cause, Receipt.NONE, cause);
            }
            int status = response.statusCode();
            Receipt receipt = new Receipt(status, new String(response.body(), StandardCharsets.UTF_8));
            if (status >= 200 && status < 300) {
                return receipt;
            }
            boolean retryable = status == 401
                    || status == 403
                    || status == 408
                    || status == 409
                    || status == 425
                    || status == 429
                    || status >= 500;
            throw new PublishFailure(
                    "POST " + uri + " for row " + message.id() + " answered " + status + ": " + receipt.body(),
                    retryable,
                    receipt);
        });
    }

    /**
     * Keeps the first bytes of a body and cancels the rest: an answer is stored only up to
     * {@link Receipt#MAX_BODY} characters, so a large or endless one is never read whole.
     */
    private static final class Head implements HttpResponse.BodySubscriber<byte[]> {
        private final int limit;
        private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        private final CompletableFuture<byte[]> body = new CompletableFuture<>();
        private Flow.Subscription subscription;

        Head(int limit) {
            this.limit = limit;
        }

        @Override
        public CompletionStage<byte[]> getBody() {
            return body;
        }

        @Override
        public void onSubscribe(Flow.Subscription subscription) {
            this.subscription = subscription;
            subscription.request(1);
        }

        @Override
        public void onNext(List<ByteBuffer> buffers) {
            for (ByteBuffer b : buffers) {
                int n = Math.min(b.remaining(), limit - bytes.size());
                byte[] chunk = new byte[n];
                b.get(chunk);
                bytes.writeBytes(chunk);
            }
            if (bytes.size() >= limit) {
                subscription.cancel();
                body.complete(bytes.toByteArray());
            } else {
                subscription.request(1);
            }
        }

        @Override
        public void onError(Throwable failure) {
            body.completeExceptionally(failure);
        }

        @Override
        public void onComplete() {
            body.complete(bytes.toByteArray());
        }
    }

    /** Builds an {@link HttpPublisher}. Not thread-safe. */
    public static final class Builder {
        private HttpClient client;
        private Duration timeout = DEFAULT_TIMEOUT;

        private Builder() {}

        /** The client to send with; default a new {@link HttpClient} with a 5 s connect timeout. */
        public Builder client(HttpClient client) {
            this.client = Objects.requireNonNull(client, "client");
            return this;
        }

        /**
         * How long one send may take, 1 ms to 5 minutes; default {@link #DEFAULT_TIMEOUT}. The relay
         * holds the row lock meanwhile, so keep it short.
         */
        public Builder timeout(Duration timeout) {
            if (timeout == null || timeout.toMillis() < 1 || timeout.compareTo(Duration.ofMinutes(5)) > 0) {
                throw new InvalidConfigurationException("timeout must be between 1ms and 5m, but was " + timeout
                        + ": the relay holds the row's lock while a send runs");
            }
            this.timeout = timeout;
            return this;
        }

        public HttpPublisher build() {
            HttpClient c = client != null
                    ? client
                    : HttpClient.newBuilder()
                            .connectTimeout(Duration.ofSeconds(5))
                            .build();
            return new HttpPublisher(c, timeout);
        }
    }
}
