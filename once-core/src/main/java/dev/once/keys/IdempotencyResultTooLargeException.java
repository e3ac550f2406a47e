package dev.once.keys;

import dev.once.OnceException;

/**
 * A result given to {@link IdempotencyKeys#complete} or {@link IdempotencyKeys#fail} is larger than
 * the configured cap, so it was not saved and the key is still processing under the caller's claim.
 * Save a smaller result (a reference to the created resource rather than the resource), raise
 * {@link IdempotencyKeys.Builder#maxResultBytes}, or {@link IdempotencyKeys#fail} the key.
 */
public class IdempotencyResultTooLargeException extends OnceException {

    private final int size;
    private final int max;

    public IdempotencyResultTooLargeException(String scope, String key, int size, int max) {
        super("result for idempotency key '" + key + "' in scope '" + scope + "' is " + size
                + " bytes, more than maxResultBytes " + max + "; it was not saved and the key is still processing:"
                + " save a smaller result, raise maxResultBytes, or fail the key");
        this.size = size;
        this.max = max;
    }

    public int size() {
        return size;
    }

    public int max() {
        return max;
    }
}
