package dev.once.http.internal;

import dev.once.OnceException;
import dev.once.StaleFencingTokenException;
import dev.once.keys.BeginResult;
import dev.once.keys.IdempotencyKeys;
import dev.once.keys.IdempotencyResultTooLargeException;
import dev.once.keys.InvalidIdempotencyKeyException;
import dev.once.keys.KeyTransaction;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.sql.SQLNonTransientConnectionException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientConnectionException;
import java.util.Locale;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
    private final boolean transactional;

    public Gate(
            IdempotencyKeys keys, boolean required, Set<String> methods, int maxRequestBytes, boolean transactional) {
        this.keys = keys;
        this.required = required;
        this.methods = Set.copyOf(methods);
        this.maxRequestBytes = maxRequestBytes;
        this.transactional = transactional;
    }

    /** What to do with a request. */
    public sealed interface Decision permits Proceed, Respond, PassThrough {}

    /**
     * Run the handler, then {@link #finish} with its response (or {@link #abandon} if it threw).
     *
     * @param transaction where the handler applies its effect, in transactional mode; else null
     */
    public record Proceed(BeginResult.Started started, KeyTransaction transaction) implements Decision {}

    /** Answer this instead of running the handler. */
    public record Respond(int status, String contentType, byte[] body, boolean replayed) implements Decision {}

    /** Not covered (another method, or no key where none is required): run the handler untouched. */
    public record PassThrough() implements Decision {
        static final PassThrough INSTANCE = new PassThrough();
    }

    public int maxRequestBytes() {
        return maxRequestBytes;
    }

    /** The most response bytes worth buffering: more cannot be saved ({@link IdempotencyKeys#maxResultBytes()}). */
    public int maxResponseBytes() {
        return keys.maxResultBytes();
    }

    /** True when requests with this method are handled: the others pass through before their body is read. */
    public boolean covers(String method) {
        return methods.contains(method.toUpperCase(Locale.ROOT));
    }

    /** The answer to a request whose body exceeds {@link #maxRequestBytes()}. */
    public Respond tooLarge() {
        return problem(
                413,
                "Content Too Large",
                "request bodies with an " + HEADER + " are limited to " + maxRequestBytes + " bytes");
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
            return required
                    ? problem(400, "Bad Request", "this endpoint requires an " + HEADER + " header")
                    : PassThrough.INSTANCE;
        }
        String key = parseKey(header);
        if (scope == null || scope.isBlank()) {
            return problem(400, "Bad Request", "the request has no scope (tenant) for its " + HEADER);
        }
        BeginResult r;
        try {
            r = keys.begin(
                    scope,
                    key,
                    IdempotencyKeys.fingerprint(
                            method.getBytes(StandardCharsets.UTF_8), target.getBytes(StandardCharsets.UTF_8), body));
        } catch (InvalidIdempotencyKeyException e) {
            return problem(400, "Bad Request", e.getMessage());
        }
        if (r instanceof BeginResult.Started s) {
            if (!transactional) {
                return new Proceed(s, null);
            }
            try {
                return new Proceed(s, keys.transaction(s));
            } catch (OnceException e) {
                log.warn("could not begin the transaction of {} '{}'", HEADER, key, e);
                release(s);
                return problem(
                        503, "Service Unavailable", "the request could not begin; retry with the same " + HEADER);
            }
        }
        if (r instanceof BeginResult.Replay replay) {
            return replay(replay);
        }
        if (r instanceof BeginResult.InProgress) {
            return problem(
                    409, "Conflict", "a request with this " + HEADER + " is still being processed;" + " retry later");
        }
        return problem(
                422,
                "Unprocessable Content",
                "this " + HEADER + " was used with a different request"
                        + " (method, path or body); use a new key for a new request");
    }

    /**
     * Saves the handler's response: a status below 500 is saved and replayed to retries; 5xx is
     * not, so a retry runs the request again. In transactional mode the result commits with the
     * handler's effect, and a 5xx rolls the effect back.
     *
     * @param overflowed true when the handler wrote more than {@link #maxResponseBytes()} and
     *                   {@code body} holds only the first of them
     * @return null to send the handler's response as it is, or an answer to send instead: 409 when
     *         the claim was taken over meanwhile and a successor's result stands, 500 when the
     *         response was too large to save or the result could not be saved
     */
    public Respond finish(Proceed proceed, int status, String contentType, byte[] body, boolean overflowed) {
        BeginResult.Started started = proceed.started();
        KeyTransaction t = proceed.transaction();
        if (overflowed) {
            return tooLargeToSave(proceed, status);
        }
        try {
            if (t == null && status >= 500) {
                keys.fail(started, true, status, null);
            } else if (t == null) {
                keys.complete(started, status, envelope(contentType, body));
            } else if (status >= 500) {
                t.fail(true, status, null);
            } else {
                t.complete(status, envelope(contentType, body));
            }
            return null;
        } catch (StaleFencingTokenException e) {
            log.warn(
                    "{} '{}' was taken over while this request ran; its response is discarded{}: {}",
                    HEADER,
                    started.key(),
                    t == null ? "" : " and its transaction rolled back",
                    e.getMessage());
            return problem(
                    409,
                    "Conflict",
                    "this request outlived its claim on the " + HEADER
                            + " and another request took over; retry to get the saved result");
        } catch (IdempotencyResultTooLargeException e) {
            return tooLargeToSave(proceed, status);
        } catch (SQLException | OnceException e) {
            boolean unknown = connectionLost(e);
            log.warn(
                    "saving the result of {} '{}' failed{}; the key is released unless it committed",
                    HEADER,
                    started.key(),
                    unknown ? " with the connection: whether it committed is unknown" : "",
                    e);
            release(started);
            if (unknown) {
                // the commit may have reached the database and only its reply been lost: the result and (in
                // transactional mode) the effect may stand, and the retry replays them; or it did not, and the retry
                // runs the request (the key's release above succeeds only then)
                return problem(
                        500,
                        "Internal Server Error",
                        t == null
                                ? "the connection to the database failed while this request's result was being"
                                        + " saved: whether it was saved is unknown, and the request may have taken"
                                        + " effect; retry with the same " + HEADER + ": the retry replays the result"
                                        + " if it was saved, and runs the request again if not"
                                : "the connection to the database failed while this request was being committed:"
                                        + " whether it took effect is unknown (the commit may have gone through and"
                                        + " only its reply been lost); retry with the same " + HEADER + ", which is"
                                        + " safe: the retry replays the saved result if it committed, and runs the"
                                        + " request if it did not");
            }
            return problem(
                    500,
                    "Internal Server Error",
                    "the result of this request could not be saved" + (t == null ? "" : " and nothing was applied")
                            + "; retry with the same " + HEADER);
        }
    }

    // Whether the database connection failed (SQLState class 08, or the JDBC types for it): a commit sent then may
    // have taken effect, its reply lost. Any other failure happened before the commit, which then rolled back.
    private static boolean connectionLost(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof SQLRecoverableException
                    || c instanceof SQLNonTransientConnectionException
                    || c instanceof SQLTransientConnectionException
                    || (c instanceof SQLException s
                            && s.getSQLState() != null
                            && s.getSQLState().startsWith("08"))) {
                return true;
            }
        }
        return false;
    }

    // A response past the cap cannot be replayed. In transactional mode the effect is rolled back and
    // the key released: nothing happened. Otherwise the effect may have happened; a retry must not run
    // it again, so a permanent failure is saved in its place (a 5xx, never saved, only releases the key).
    private Respond tooLargeToSave(Proceed proceed, int status) {
        BeginResult.Started started = proceed.started();
        String detail = "the response exceeded the " + keys.maxResultBytes() + " bytes an " + HEADER + " can save";
        log.warn("response for {} '{}' is too large to save: {}", HEADER, started.key(), detail);
        if (proceed.transaction() != null || status >= 500) {
            abandon(proceed);
            return problem(
                    500,
                    "Internal Server Error",
                    detail + (proceed.transaction() == null ? "" : "; nothing was applied") + "; retry with the same "
                            + HEADER + " once the limit is raised");
        }
        Respond answer = problem(
                500,
                "Internal Server Error",
                detail + "; the request may have taken effect, so"
                        + " this answer is saved and replayed instead of running it again");
        try {
            keys.fail(started, false, answer.status(), envelope(answer.contentType(), answer.body()));
        } catch (OnceException e) {
            log.warn("could not save the too-large answer of {} '{}'", HEADER, started.key(), e);
        }
        return answer;
    }

    /** The handler threw: roll back its transaction and release the key so a retry runs the request again. Never throws. */
    public void abandon(Proceed proceed) {
        if (proceed.transaction() != null) {
            try {
                proceed.transaction().close();
            } catch (SQLException | RuntimeException e) {
                log.warn(
                        "rolling back the transaction of {} '{}' failed",
                        HEADER,
                        proceed.started().key(),
                        e);
            }
        }
        release(proceed.started());
    }

    private void release(BeginResult.Started started) {
        try {
            keys.fail(started, true, 500, null);
        } catch (OnceException e) {
            log.warn(
                    "could not release {} '{}' after a failed request; it frees itself when its claim lapses",
                    HEADER,
                    started.key(),
                    e);
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
