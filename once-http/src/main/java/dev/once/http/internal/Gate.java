package dev.once.http.internal;

import dev.once.OnceException;
import dev.once.StaleFencingTokenException;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.IdempotencyResultTooLargeException;
import dev.once.keys.InvalidIdempotencyKeyException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Set;

/**
 * The {@code Idempotency-Key} protocol, independent of any server API: what to answer before the
 * handler runs, and what to save after. Used by the servlet filter and the Javalin wrapper so both
 * behave alike. Immutable and thread-safe. Not API.
 */
public final class Gate {

    public static final String HEADER = "Idempotency-Key";
    public static final String REPLAYED_HEADER = "Idempotent-Replayed";
    static final String PROBLEM_JSON = "application/problem+json";

    private static final Logger log = LoggerFactory.getLogger(Gate.class);

    private final IdempotencyKeys keys;
    private final boolean required;
    private final Set<String> methods;
    private final int maxRequestBytes;

    public Gate(IdempotencyKeys keys, boolean required, Set<String> methods, int maxRequestBytes) {
        this.keys = keys;
        this.required = required;
        this.methods = Set.copyOf(methods);
        this.maxRequestBytes = maxRequestBytes;
    }

    /** What to do with a request. */
    public sealed interface Decision permits Proceed, Respond, PassThrough {
    }

    /** Run the handler, then {@link #finish} with its response. */
    public record Proceed(BeginResult.Started started) implements Decision {
    }

    /** Answer this instead of running the handler. */
    public record Respond(int status, String contentType, byte[] body, boolean replayed) implements Decision {
    }

    /** Not covered (another method, or no key where none is required): run the handler untouched. */
    public record PassThrough() implements Decision {
        static final PassThrough INSTANCE = new PassThrough();
    }

    public int maxRequestBytes() {
        return maxRequestBytes;
    }

    /** True when requests with this method are handled: the others pass through before their body is read. */
    public boolean covers(String method) {
        return methods.contains(method.toUpperCase(Locale.ROOT));
    }

    /** The answer to a request whose body exceeds {@link #maxRequestBytes()}. */
    public Respond tooLarge() {
        return problem(413, "Content Too Large", "request bodies with an " + HEADER + " are limited to "
                + maxRequestBytes + " bytes");
    }

    /**
     * Decides a covered request.
     *
     * @param scope  the caller's scope (tenant, API client); blank or null answers 400
     * @param header the {@value #HEADER} header value, or null when absent
     * @param target method and path with query, both part of the fingerprint
     */
    public Decision begin(String scope, String method, String target, String header, byte[] body) {
        if (header == null) {
            return required ? problem(400, "Bad Request", "this endpoint requires an " + HEADER + " header")
                    : PassThrough.INSTANCE;
        }
        String key = parseKey(header);
        if (scope == null || scope.isBlank()) {
            return problem(400, "Bad Request", "the request has no scope (tenant) for its " + HEADER);
        }
        BeginResult r;
        try {
            r = keys.begin(scope, key, IdempotencyKeys.fingerprint(method.getBytes(StandardCharsets.UTF_8),
                    target.getBytes(StandardCharsets.UTF_8), body));
        } catch (InvalidIdempotencyKeyException e) {
            return problem(400, "Bad Request", e.getMessage());
        }
        if (r instanceof BeginResult.Started s) {
            return new Proceed(s);
        }
        if (r instanceof BeginResult.Replay replay) {
            return replay(replay);
        }
        if (r instanceof BeginResult.InProgress) {
            return problem(409, "Conflict", "a request with this " + HEADER + " is still being processed;"
                    + " retry later");
        }
        return problem(422, "Unprocessable Content", "this " + HEADER + " was used with a different request"
                + " (method, path or body); use a new key for a new request");
    }

    /**
     * Saves the handler's response: a status below 500 is saved and replayed to retries; 5xx is
     * not, so a retry runs the request again.
     *
     * @return null to send the handler's response as it is, or an answer to send instead (409 when
     *         the claim was taken over meanwhile and a successor's result stands)
     */
    public Respond finish(BeginResult.Started started, int status, String contentType, byte[] body) {
        try {
            if (status >= 500) {
                keys.fail(started, true, status, null);
            } else {
                keys.complete(started, status, envelope(contentType, body));
            }
            return null;
        } catch (StaleFencingTokenException e) {
            log.warn("{} '{}' was taken over while this request ran; its response is discarded: {}", HEADER,
                    started.key(), e.getMessage());
            return problem(409, "Conflict", "this request outlived its claim on the " + HEADER
                    + " and another request took over; retry to get the saved result");
        } catch (IdempotencyResultTooLargeException e) {
            log.warn("response for {} '{}' is too large to save, a retry will run the request again: {}", HEADER,
                    started.key(), e.getMessage());
            abandon(started);
            return null;
        }
    }

    /** The handler threw: release the key so a retry runs the request again. Never throws. */
    public void abandon(BeginResult.Started started) {
        try {
            keys.fail(started, true, 500, null);
        } catch (OnceException e) {
            log.warn("could not release {} '{}' after a failed request; it frees itself when its claim lapses",
                    HEADER, started.key(), e);
        }
    }

    /** Structured-field string ({@code "abc"}, as the IETF draft writes it) or a bare token ({@code abc}, as Stripe does). */
    static String parseKey(String header) {
        String v = header.strip();
        if (v.length() >= 2 && v.charAt(0) == '"' && v.charAt(v.length() - 1) == '"') {
            return v.substring(1, v.length() - 1);
        }
        return v;
    }

    // The saved result keeps the content type with the body: "<content type>\n<body bytes>".
    static byte[] envelope(String contentType, byte[] body) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.writeBytes((contentType == null ? "" : contentType).getBytes(StandardCharsets.UTF_8));
        out.write('\n');
        out.writeBytes(body == null ? new byte[0] : body);
        return out.toByteArray();
    }

    static Respond replay(BeginResult.Replay replay) {
        byte[] saved = replay.body();
        int nl = 0;
        while (nl < saved.length && saved[nl] != '\n') {
            nl++;
        }
        String contentType = new String(saved, 0, nl, StandardCharsets.UTF_8);
        byte[] body = nl < saved.length ? java.util.Arrays.copyOfRange(saved, nl + 1, saved.length) : new byte[0];
        return new Respond(replay.status(), contentType.isEmpty() ? null : contentType, body, true);
    }

    static Respond problem(int status, String title, String detail) {
        String json = "{\"type\":\"about:blank\",\"title\":\"" + escape(title) + "\",\"status\":" + status
                + ",\"detail\":\"" + escape(detail) + "\"}";
        return new Respond(status, PROBLEM_JSON, json.getBytes(StandardCharsets.UTF_8), false);
    }

    private static String escape(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        return sb.toString();
    }
}
