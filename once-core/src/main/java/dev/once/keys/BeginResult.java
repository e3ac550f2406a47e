package dev.once.keys;

import java.time.Instant;
import java.util.Arrays;
import java.util.Objects;

/**
 * What {@link IdempotencyKeys#begin} decided for one request. Exactly one caller of a key gets
 * {@link Started} at a time; the others get the saved result, a "still running", or a refusal.
 *
 * <pre>{@code
 * BeginResult r = keys.begin(scope, key, fingerprint);
 * if (r instanceof BeginResult.Started s) {          // do the work, then save its result
 *     keys.complete(s, 201, body);
 * } else if (r instanceof BeginResult.Replay replay) { // answer replay.status() with replay.body()
 * } else if (r instanceof BeginResult.InProgress p) {  // answer 409: retry later
 * } else if (r instanceof BeginResult.Mismatch m) {    // answer 422: the key was used for another request
 * }
 * }</pre>
 */
public sealed interface BeginResult
        permits BeginResult.Started, BeginResult.Replay, BeginResult.InProgress, BeginResult.Mismatch {

    /**
     * This caller owns the key until {@code lockedUntil} and must finish it with
     * {@link IdempotencyKeys#complete} or {@link IdempotencyKeys#fail}, which are fenced by
     * {@code token}: once the claim expired and another caller started with a newer token, this
     * one's result is refused.
     *
     * @param scope       the key's scope
     * @param key         the idempotency key
     * @param token       the fencing token of this claim; also usable with {@link dev.once.lease.Fence}
     * @param lockedUntil when another caller may take over
     */
    record Started(String scope, String key, long token, Instant lockedUntil) implements BeginResult {
        public Started {
            Objects.requireNonNull(scope, "scope");
            Objects.requireNonNull(key, "key");
            Objects.requireNonNull(lockedUntil, "lockedUntil");
        }
    }

    /**
     * The key was finished before: answer with the saved result, byte for byte, without doing the work again.
     *
     * @param status the saved status (an HTTP status for HTTP callers)
     * @param body   the saved body, copied
     * @param failed true when the saved result is a permanent failure ({@link IdempotencyKeys#fail} with retryable false)
     */
    record Replay(int status, byte[] body, boolean failed) implements BeginResult {
        public Replay {
            body = body == null ? new byte[0] : body.clone();
        }

        @Override
        public byte[] body() {
            return body.clone();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Replay r && status == r.status && failed == r.failed && Arrays.equals(body, r.body);
        }

        @Override
        public int hashCode() {
            return 31 * Integer.hashCode(status) + Arrays.hashCode(body) + (failed ? 1 : 0);
        }

        @Override
        public String toString() {
            return "Replay[status=" + status + ", body=" + body.length + " bytes, failed=" + failed + "]";
        }
    }

    /**
     * Another caller holds the key and has not finished; retry after {@code lockedUntil} at the latest.
     * Also the answer when another transaction held the key's row longer than
     * {@link IdempotencyKeys.Builder#lockWait} (a caller's transaction that finished the key and has not
     * ended): {@code lockedUntil} is then now plus the lock wait, since a retry soon likely replays.
     *
     * @param lockedUntil when the holder's claim lapses and the key can be taken over, or the hint above
     */
    record InProgress(Instant lockedUntil) implements BeginResult {
        public InProgress {
            Objects.requireNonNull(lockedUntil, "lockedUntil");
        }
    }

    /**
     * The key was first used with a different request (another fingerprint): refused, nothing is
     * replayed, since the saved result answers another request.
     *
     * @param scope the key's scope
     * @param key   the idempotency key
     */
    record Mismatch(String scope, String key) implements BeginResult {}
}
